"""The prepare stage: assemble and clean the sources into Parquet with every rejected document kept."""

import json
import sys
from pathlib import Path

from prefect import flow

from campaign.errors import CampaignError
from flows.common import StageParams, failed, stage_run
from tasks.config import load_campaign
from tasks.prepare import clean_sources, ensure_demo_inputs, record_dataset


@flow(name="prepare", log_prints=False)
def prepare(params: StageParams = StageParams()):
    try:
        loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
        with stage_run(ws, "prepare", loaded.digest) as run_id:
            data = loaded.config.data.in_workspace(ws.root)
            ensure_demo_inputs(data, loaded.config.seed)
            record = clean_sources(data, ws)
            manifest = json.loads(Path(record.manifest_path).read_text())
            record_dataset(ws, run_id, manifest)
            return record
    except CampaignError as err:
        return failed(err)


if __name__ == "__main__":
    from flows.cli import run_stage_main

    sys.exit(run_stage_main("prepare"))

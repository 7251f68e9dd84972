"""The execute stage: run (simulate) the committed window, refusing if anything changed since commit."""

import sys

from prefect import flow

from campaign.errors import CampaignError
from flows.common import StageParams, failed, quiet_expected_errors, stage_run
from tasks.config import load_campaign
from tasks.execute import check_commitment, simulate_window


@flow(name="execute")
def execute(params: StageParams = StageParams()):
    quiet_expected_errors()
    try:
        loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
        with stage_run(ws, "execute", loaded.digest) as run_id:
            commitment = check_commitment(ws, loaded)
            return simulate_window(ws, loaded.config, commitment, run_id)
    except CampaignError as err:
        return failed(err)


if __name__ == "__main__":
    from flows.cli import run_stage_main

    sys.exit(run_stage_main("execute"))

"""The prepare stage: assemble and clean the sources into Parquet with every rejected document kept.

The shard work runs in a subflow on the task runner `runtime` asks for: threads, or Dask through
prefect-dask (a LocalCluster, or the scheduler at `runtime.dask_address`). On the threads runner with
`runtime.max_workers` > 1 each shard task hands its CPU work to one of that many lean worker processes
(campaign.data.workers: no Prefect, no Dask), so every core is busy without a Dask cluster's processes; one per
32 MB of input at most, so a small input is cleaned in this process without paying for their start.
"""

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from prefect import flow, unmapped

from campaign.config import DataConfig, RuntimeConfig
from campaign.data.inputs import input_bytes
from campaign.data.workers import keep_workers, pool_size, shard_workers
from flows.common import StageParams, fails_cleanly, stage_run, stage_run_name, workspace_campaign
from flows.runners import task_runner_for
from tasks.config import load_campaign
from tasks.prepare import (
    PrepareRecord,
    clean_shard,
    dedup_task,
    ensure_demo_inputs,
    finalise_task,
    plan_shards_task,
    record_dataset,
    write_manifest_task,
)


@flow(
    name="prepare-shards",
    flow_run_name=stage_run_name("prepare-shards", lambda p: workspace_campaign(p["ws"])),
)
def prepare_shards_flow(data: DataConfig, ws) -> PrepareRecord:
    """Plan, clean every shard (mapped), dedup, finalise every source (mapped), write the manifest."""
    plan = plan_shards_task(data, ws.data_dir)
    summaries = [f.result() for f in clean_shard.map(plan.shards, unmapped(data), unmapped(ws.data_dir))]
    keep_workers(len(data.sources))  # the local runner's idle worker processes beyond one per source end here
    stats = dedup_task(
        summaries, data, ws.data_dir, plan.problems
    )  # every unusable input named, in one error
    names = [s.name for s in data.sources]
    results = [f.result() for f in finalise_task.map(names, unmapped(summaries), unmapped(ws.data_dir))]
    return write_manifest_task(data, ws, summaries, results, stats)


def run_prepare_shards(data: DataConfig, ws, runtime: RuntimeConfig) -> PrepareRecord:
    runner = task_runner_for(runtime)
    if runtime.task_runner != "dask":
        with shard_workers(pool_size(input_bytes(data), runtime.max_workers)):
            return prepare_shards_flow.with_options(task_runner=runner)(data, ws)
    with _workers_use_this_api():
        return prepare_shards_flow.with_options(task_runner=runner)(data, ws)


@contextmanager
def _workers_use_this_api():
    """Dask worker processes inherit the environment, not Prefect's settings: without PREFECT_API_URL each
    would start a temporary API server of its own (and time out doing so). Export this process's API URL
    (the temporary server's, when the CLI started one) while the LocalCluster runs."""
    if os.environ.get("PREFECT_API_URL"):
        yield
        return
    from prefect.client.orchestration import get_client

    os.environ["PREFECT_API_URL"] = str(get_client(sync_client=True).api_url)
    try:
        yield
    finally:
        os.environ.pop("PREFECT_API_URL", None)


@flow(name="prepare", log_prints=False, flow_run_name=stage_run_name("prepare"))
@fails_cleanly
def prepare_flow(params: StageParams = StageParams()):
    loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
    with stage_run(ws, "prepare", loaded.digest) as run_id:
        data = loaded.config.data.in_workspace(ws.root)  # `{workspace}/...` paths: this workspace's own
        ensure_demo_inputs(data, loaded.config.seed)
        record = run_prepare_shards(data, ws, loaded.config.runtime)
        manifest = json.loads(Path(record.manifest_path).read_text())
        record_dataset(ws, run_id, manifest)
        return record


if __name__ == "__main__":
    from campaign_cli.terminal import stage_main

    sys.exit(stage_main("prepare"))

"""What-if: many seeded replicas of the window for a config, with percentiles; no gates, no commitment."""

import sys
import time
from contextlib import contextmanager

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from campaign.config import load_config
from campaign.errors import CampaignError
from campaign.sim import replica_batches, summarise_replicas
from campaign.window import window_inputs
from flows.common import failed, quiet_expected_errors
from flows.runners import task_runner_for
from tasks.simulate import simulate_replica_batch


class SimulateParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: str = Field("configs/campaigns/demo.yaml", description="Campaign YAML.")
    overrides: list[str] = Field(default_factory=list, description="dotted.key=value overrides.")
    replicas: int | None = Field(None, gt=0, description="Replicas (default: sim.replicas of the config).")
    seed: int | None = Field(None, ge=0, description="Seed (default: seed of the config).")


@flow(name="simulate")
def simulate_flow(params: SimulateParams = SimulateParams()):
    quiet_expected_errors()
    try:
        overrides = list(params.overrides) + ([f"seed={params.seed}"] if params.seed is not None else [])
        loaded = load_config(params.config, overrides)
    except CampaignError as err:
        return failed(err)
    replicas = params.replicas or loaded.config.sim.replicas
    inputs = window_inputs(loaded.config)
    started = time.perf_counter()
    # One task per worker, each a contiguous batch: results do not depend on the split (replica r is seeded
    # by (seed, r)), and a batch costs one task's overhead instead of one per replica.
    batches = replica_batches(replicas, loaded.config.runtime.max_workers)
    futures = [simulate_replica_batch.submit(inputs, batch) for batch in batches]
    summaries = [s for f in futures for s in f.result()]
    return {
        "replicas": replicas,
        "seed": loaded.config.seed,
        "config_digest": loaded.digest,
        "wall_s": time.perf_counter() - started,
        "summary": summarise_replicas(summaries, inputs.window_s),
    }


def simulate_with_runner(params: SimulateParams):
    """Run the flow in processes (replicas are CPU-bound Python: threads would share one core), or on Dask."""
    runtime = load_config(params.config, params.overrides).config.runtime
    if runtime.task_runner == "dask":
        runner = task_runner_for(runtime)
    else:
        from prefect.task_runners import ProcessPoolTaskRunner

        runner = ProcessPoolTaskRunner(max_workers=runtime.max_workers)
    flow = simulate_flow.with_options(task_runner=runner)
    with _shared_api():
        return flow(params, return_state=True)


@contextmanager
def _shared_api():
    """Without a configured Prefect API, start the temporary one here and name it in the settings, so the worker
    processes report to it instead of each starting a temporary server of its own (seconds each)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    server.start()  # stopped at exit (atexit), after Prefect's log and event workers have drained into it
    with temporary_settings({PREFECT_API_URL: server.api_url}):
        yield


if __name__ == "__main__":
    from flows.cli import run_stage_main

    sys.exit(run_stage_main("simulate"))

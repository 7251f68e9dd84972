"""What-if: many seeded replicas of the window for a config, with percentiles; no gates, no commitment."""

import sys
import time

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from campaign.config import load_config
from campaign.errors import CampaignError
from campaign.sim import summarise_replicas
from campaign.window import window_inputs
from flows.common import failed, quiet_expected_errors
from flows.runners import task_runner_for
from tasks.simulate import simulate_replica


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
    futures = simulate_replica.map(inputs, list(range(replicas)))
    summaries = [f.result() for f in futures]
    return {
        "replicas": replicas,
        "seed": loaded.config.seed,
        "config_digest": loaded.digest,
        "wall_s": time.perf_counter() - started,
        "summary": summarise_replicas(summaries, inputs.window_s),
    }


def simulate_with_runner(params: SimulateParams):
    """Run the flow on the task runner the config asks for (threads, or Dask)."""
    runner = task_runner_for(load_config(params.config, params.overrides).config.runtime)
    return simulate_flow.with_options(task_runner=runner)(params, return_state=True)


if __name__ == "__main__":
    from flows.cli import run_stage_main

    sys.exit(run_stage_main("simulate"))

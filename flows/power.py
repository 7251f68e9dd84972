"""The facility power notice on demand (`campaign power CONFIG`): no gates, no commitment."""

import sys

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from campaign import store
from campaign.window import window_inputs
from flows.common import fails_cleanly, stage_run_name
from tasks.config import load_campaign
from tasks.power import write_power_notice


class PowerParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: str = Field("configs/campaigns/demo.yaml", description="Campaign YAML.")
    overrides: list[str] = Field(default_factory=list, description="dotted.key=value overrides.")
    replicas: int | None = Field(
        None, gt=0, le=10_000, description="Replicas per setting (default: sim.replicas)."
    )
    workspace: str | None = Field(None, description="Workspace (default workspace/<campaign name>).")


@flow(name="power", flow_run_name=stage_run_name("power"))
@fails_cleanly
def power_flow(params: PowerParams = PowerParams()):
    loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
    store.adopt_workspace(ws, loaded.config.name)  # never writes into a folder campaign does not own
    inputs = window_inputs(loaded.config)
    return write_power_notice(
        ws.root / "power",
        loaded.digest[:12],
        inputs,
        params.replicas or loaded.config.sim.replicas,
        f"{loaded.config.name} (config {loaded.digest[:12]})",
    )


if __name__ == "__main__":
    from campaign_cli.terminal import flow_main

    sys.exit(flow_main(power_flow))

"""A failure profile fitted from the team's incident log (`campaign failures fit`), as a flow for the Prefect UI:
the fit's table and figures become artifacts. docs/failures.md."""

import sys

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from flows.common import fails_cleanly, params_field, stage_run_name
from tasks.failures import fit_failure_profile


class FailuresFitParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: str = Field(description="Jobs log, CSV or Parquet: job_id,start,end,gpus.")
    incidents: str = Field(description="Incidents log, CSV or Parquet: time,job_id,category,node.")
    cluster: str = Field("cluster", description="The cluster's name: keys the artifacts.")
    out: str | None = Field(
        None, description="Write the fitted profile here (the YAML cluster.failures names)."
    )
    base: str | None = Field(
        None, description="A failure profile or campaign config whose categories the log's are matched to."
    )
    gpus_per_node: int | None = Field(
        None, ge=1, le=1024, description="GPUs per node (default: base's, else 8)."
    )
    nodes: int | None = Field(
        None, ge=1, le=2_000_000, description="Nodes in the cluster, for the lemon test."
    )


@flow(name="failures-fit", flow_run_name=stage_run_name("failures-fit", lambda p: params_field(p, "cluster")))
@fails_cleanly
def failures_fit_flow(params: FailuresFitParams):
    return fit_failure_profile(
        params.jobs,
        params.incidents,
        params.cluster,
        params.out,
        params.base,
        params.gpus_per_node,
        params.nodes,
    )


if __name__ == "__main__":
    from campaign_cli.terminal import flow_main

    sys.exit(flow_main(failures_fit_flow))

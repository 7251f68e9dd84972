"""The `gates:`, `commit:`, `sim:` and `runtime:` sections: thresholds and run settings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from campaign.config.schema.base import Frozen


class DataGateConfig(Frozen):
    min_documents: int = Field(1, ge=0, le=10**15, description="Clean documents needed.")
    min_tokens: float = Field(1, ge=0, le=1e17, description="Clean tokens needed.")
    max_rejected_fraction: float = Field(
        0.5, ge=0, le=1, description="Largest share of input documents rejected."
    )
    mixture_tolerance: float = Field(
        0.5,
        ge=0,
        le=1000,
        description="Largest relative gap between a source's token share and its planned weight.",
    )


class ConfigGateConfig(Frozen):
    max_memory_fraction: float = Field(0.95, gt=0, le=1, description="Largest share of HBM the plan may use.")
    min_window_margin: float = Field(
        0.0, ge=0, lt=1, description="Share of the window to keep free after the expected campaign length."
    )
    window_replicas: int = Field(
        100,
        ge=0,
        le=1000,
        description="Seeded replicas of the window that judge its length (schedule gate): the window must lie "
        "between the campaign's p90 and p99 completion times (100 is the fewest whose p99 is not simply "
        "the slowest replica); 0 leaves the rule off.",
    )


class GatesConfig(Frozen):
    data: DataGateConfig = DataGateConfig()
    config: ConfigGateConfig = ConfigGateConfig()


class CommitConfig(Frozen):
    require_approval: bool = Field(False, description="A person approves the booking in the Prefect UI.")
    approval_timeout_s: float = Field(3600, gt=0, le=2_592_000, description="How long to wait for approval.")


class SimConfig(Frozen):
    replicas: int = Field(8, gt=0, le=100_000, description="Replicas for `campaign simulate`.")
    power_sample_s: float = Field(
        60.0, ge=1, le=86_400, description="Resolution of the stored power series, seconds."
    )
    stop_at_target: bool = Field(
        True,
        description=(
            "The job stops when plan.target_tokens are trained. False: the window is a snapshot of a longer run and "
            "the job trains to the window's end whatever the target (the plan still checks the target fits)."
        ),
    )


class RuntimeConfig(Frozen):
    task_runner: Literal["threads", "dask"] = Field("threads", description="Task runner for per-shard work.")
    dask_address: str | None = Field(None, description="Address of a Dask scheduler (else a LocalCluster).")
    max_workers: int = Field(
        2, gt=0, le=1024, description="Parallel workers for the threads or local Dask runner."
    )

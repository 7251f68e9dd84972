"""The `cluster:` section: accelerators, network, power, cost, failure categories, lemons and quarantine."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from campaign.config.schema.base import SOURCE_FIELD, Frozen, Source


class KernelCalibrationConfig(Frozen):
    """How close one accelerator family's kernels come to its peaks: fitted once per family by
    `benchmarks/plan/calibrate.py` on published training runs, never per campaign."""

    gemm_peak_fraction: float = Field(
        ge=0.01,
        le=1,
        description=(
            "Fraction of peak dense BF16 a large, well-shaped GEMM reaches (before tile and wave losses)."
        ),
    )
    gemm_half_k: float = Field(
        ge=0,
        le=65_536,
        description=(
            "GEMM inner dimension K at which the per-tile prologue/epilogue halves efficiency: eff x K/(K + this)."
        ),
    )
    attention_peak_fraction: float = Field(
        ge=0.01,
        le=1,
        description=(
            "Fraction of peak a fused (flash) attention kernel reaches fwd+bwd at long sequences and head dim 128."
        ),
    )
    flash2_peak_fraction: float | None = Field(
        None,
        ge=0.01,
        le=1,
        description=(
            "Fraction of peak FlashAttention-2 reaches fwd+bwd on this accelerator (for `plan.attention_kernel: flash2`); "
            "absent = the same as attention_peak_fraction."
        ),
    )
    memory_bw_fraction: float = Field(
        ge=0.01,
        le=1,
        description=(
            "Fraction of hbm_gb_per_s that memory-bound kernels (norms, activations, softmax, optimizer) reach."
        ),
    )
    kernel_gap_us: float = Field(
        0.0,
        ge=0,
        le=1000,
        description=(
            "Idle microseconds between consecutive kernels on a GPU (launch latency, synchronisation, host work)."
        ),
    )
    source: Source = SOURCE_FIELD


class AcceleratorConfig(Frozen):
    name: str = Field(description="Accelerator model, e.g. H100-SXM-80GB.")
    peak_bf16_tflops: float = Field(
        ge=1, le=1_000_000, description="Peak dense BF16 tensor throughput per GPU, TFLOP/s."
    )
    hbm_gib: float = Field(ge=0.001, le=100_000, description="HBM capacity per GPU, GiB.")
    hbm_gb_per_s: float = Field(
        ge=1, le=1_000_000, description="Peak HBM bandwidth per GPU, GB/s (datasheet)."
    )
    sm_count: int = Field(
        gt=0,
        le=100_000,
        description=(
            "Streaming multiprocessors (compute units) per GPU: a GEMM runs in waves of this many output tiles."
        ),
    )
    kernels: KernelCalibrationConfig = Field(
        description="Kernel efficiencies of this accelerator family (fitted)."
    )
    tdp_w: float = Field(ge=1, le=1e5, description="Thermal design power per GPU, W.")
    idle_w: float = Field(
        ge=0, le=1e5, description="Power per GPU when idle, W (an assumption unless measured)."
    )
    source: Source = SOURCE_FIELD

    @model_validator(mode="after")
    def _idle_below_tdp(self) -> AcceleratorConfig:
        if self.idle_w > self.tdp_w:
            raise ValueError(f"idle_w ({self.idle_w}) is above tdp_w ({self.tdp_w}); set idle_w below tdp_w")
        return self


class NetworkConfig(Frozen):
    nvlink_domain_gpus: int = Field(
        gt=0, le=1_000_000, description="GPUs joined by NVLink/NVSwitch (8 on HGX, 72 on NVL72)."
    )
    nvlink_gb_per_s: float = Field(
        ge=0.001, le=1e6, description="Achievable NVLink bandwidth per GPU, GB/s per direction."
    )
    nic_gb_per_s: float = Field(
        ge=0.001, le=1e6, description="Scale-out NIC bandwidth per GPU, GB/s per direction."
    )
    pod_gpus: int = Field(
        gt=0, le=10_000_000, description="GPUs in one non-blocking pod of the scale-out fabric."
    )
    oversubscription: float = Field(
        ge=1, le=1000, description="Downlink:uplink ratio between pods (7 means 1:7)."
    )
    source: Source = SOURCE_FIELD


class PowerConfig(Frozen):
    node_overhead_w: float = Field(
        ge=0, le=1e6, description="Node power beyond its GPUs (CPUs, NICs, fans), W."
    )
    pue: float = Field(
        ge=1, le=10, description="Facility power usage effectiveness (facility power / IT power)."
    )
    source: Source = SOURCE_FIELD


class CostConfig(Frozen):
    gpu_hour_usd: float = Field(ge=0, le=1e4, description="Price of one GPU-hour, USD.")
    energy_usd_per_mwh: float = Field(ge=0, le=1e6, description="Price of facility energy, USD per MWh.")
    source: Source = SOURCE_FIELD


HOURS_PER_YEAR = 365.0 * 24.0


class ObservedRateConfig(Frozen):
    """The evidence a fitted rate came from (`campaign failures fit`): failures seen over an exposure, so a
    replica can draw the rate from its posterior instead of taking it as known (docs/failures.md)."""

    failures: int = Field(
        ge=0, le=1_000_000_000, description="Failures of this category in the incident log."
    )
    exposure_h: float = Field(
        gt=0,
        le=1e15,
        description="Exposure they were seen over, in the rate's own hours: GPU-hours for per_gpu_year, "
        "node-hours for per_1k_node_days, job-hours for per_job_hour.",
    )


class FailureCategoryConfig(Frozen):
    name: str = Field(description="Failure category, e.g. faulty_gpu.")
    scope: Literal["gpu", "node", "network", "job"] = Field(
        description="What fails: one GPU, a whole node, a network element, or the job itself (software)."
    )
    per_gpu_year: float | None = Field(
        None,
        ge=0,
        le=1000,
        description="Rate per GPU-year, growing with the job's GPUs (give one of per_gpu_year, "
        "per_1k_node_days, per_job_hour).",
    )
    per_1k_node_days: float | None = Field(
        None,
        ge=0,
        le=1e6,
        description="Rate per 1,000 node-days, growing with the job's nodes (give one of per_gpu_year, "
        "per_1k_node_days, per_job_hour).",
    )
    per_job_hour: float | None = Field(
        None,
        ge=0,
        le=1000,
        description="Rate per hour of the job whatever its size (software, user code, storage, the scheduler; "
        "give one of per_gpu_year, per_1k_node_days, per_job_hour).",
    )
    detect_s: float = Field(
        ge=0, le=2_592_000, description="Seconds from the fault until the job notices it."
    )
    restart_s: float = Field(
        ge=0, le=2_592_000, description="Seconds to restart the job from the last checkpoint."
    )
    repair_h: float = Field(
        ge=0, le=8760, description="Hours to repair the failed hardware off the job's path."
    )
    aliases: tuple[str, ...] = Field(
        (),
        max_length=64,
        description="Other names an incident log may give this category (e.g. Llama 3 Table 5's 'GPU HBM3 Memory'); "
        "`campaign failures fit` matches them as it matches the name (case, spaces and separators aside).",
    )
    observed: ObservedRateConfig | None = Field(
        None,
        description="Failures and exposure the rate was fitted from; with them each simulated replica draws the "
        "rate from its posterior, so the window's p90 includes not knowing it.",
    )
    source: Source = SOURCE_FIELD

    @model_validator(mode="after")
    def _exactly_one_rate(self) -> FailureCategoryConfig:
        given = [r for r in (self.per_gpu_year, self.per_1k_node_days, self.per_job_hour) if r is not None]
        if len(given) != 1:
            raise ValueError(
                f"failure category '{self.name}' needs exactly one of per_gpu_year or per_1k_node_days (rates "
                "that grow with the job) or per_job_hour (a rate per job-hour whatever its size)"
            )
        if self.observed is not None:
            fitted = self.observed.failures / self.observed.exposure_h
            if not abs(self.unit_rate_per_h - fitted) <= 1e-6 * max(fitted, 1e-300):
                raise ValueError(
                    f"failure category '{self.name}': its rate ({self.unit_rate_per_h:.6g} per {self.exposure_unit}) "
                    f"is not observed.failures / observed.exposure_h = {self.observed.failures} / "
                    f"{self.observed.exposure_h:g} = {fitted:.6g}; refit with `campaign failures fit`, or drop "
                    "observed to state the rate as known"
                )
        return self

    @property
    def exposure_unit(self) -> str:
        """What one hour of exposure is for this category's rate: a GPU-hour, a node-hour or a job-hour."""
        if self.per_gpu_year is not None:
            return "GPU-hour"
        return "node-hour" if self.per_1k_node_days is not None else "job-hour"

    @property
    def unit_rate_per_h(self) -> float:
        """The rate per hour of its own exposure unit (GPU-, node- or job-hour)."""
        if self.per_gpu_year is not None:
            return self.per_gpu_year / HOURS_PER_YEAR
        if self.per_1k_node_days is not None:
            return self.per_1k_node_days / 1000.0 / 24.0
        assert self.per_job_hour is not None
        return self.per_job_hour

    def units_per_job(self, nodes: int, gpus_per_node: int) -> int:
        """Exposure hours one hour of a job of `nodes` nodes adds: its GPUs, its nodes, or 1 (a job-hour)."""
        if self.per_gpu_year is not None:
            return nodes * gpus_per_node
        return nodes if self.per_1k_node_days is not None else 1

    def rate_per_node_hour(self, gpus_per_node: int) -> float:
        """Failure rate per node-hour of a rate that grows with the job (per_gpu_year or per_1k_node_days)."""
        if self.per_job_hour is not None:
            raise ValueError(f"failure category '{self.name}' has a per-job rate, not a per-node one")
        return self.unit_rate_per_h * self.units_per_job(1, gpus_per_node)

    def job_rate_per_hour(self, nodes: int, gpus_per_node: int) -> float:
        """Failures per hour of a whole job of `nodes` nodes, whichever unit the config used."""
        return self.unit_rate_per_h * self.units_per_job(nodes, gpus_per_node)


class PlannedMaintenanceConfig(Frozen):
    per_day: float = Field(
        0.0, ge=0, le=1000, description="Planned interruptions per day (firmware, config changes)."
    )
    duration_min: float = Field(
        0.0, ge=0, le=1440, description="Minutes each planned interruption holds the job."
    )
    source: Source = SOURCE_FIELD


class LemonNodesConfig(Frozen):
    """Heterogeneous nodes: a few whose node-losing failures come `factor` times as often as the rest's
    (Kokolis et al., arXiv 2410.21680, lemon nodes). The categories' rates are the healthy nodes' rates."""

    count: int = Field(
        0, ge=0, le=2_000_000, description="Lemon nodes among the job's nodes and its spares (0: none)."
    )
    fraction: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Share of the job's nodes and spares that are lemons, instead of count (rounded to nodes).",
    )
    factor: float = Field(
        20.0,
        ge=1,
        le=10_000,
        description="How many times the healthy rate a lemon's gpu- and node-scope failures come at.",
    )
    source: Source = SOURCE_FIELD

    @model_validator(mode="after")
    def _count_or_fraction(self) -> LemonNodesConfig:
        if self.fraction is not None and self.count:
            raise ValueError(
                f"@count: give lemons as count ({self.count}) or as fraction ({self.fraction:g}), not both; "
                "drop one of them"
            )
        return self

    def lemon_count(self, nodes: int) -> int:
        """Lemons among `nodes` physical nodes (the job's and its spares)."""
        return round(self.fraction * nodes) if self.fraction is not None else self.count


class QuarantineConfig(Frozen):
    """Retire a node at its k-th failure within a window of hours: it leaves the pool for good and a free spare
    takes its slot (docs/failures.md). Off by default."""

    after_failures: int = Field(
        0,
        ge=0,
        le=1000,
        description="Retire a node at this many gpu- or node-scope failures within window_h (0: never retire).",
    )
    window_h: float = Field(
        168.0, gt=0, le=87_600, description="Hours over which a node's failures count toward quarantine."
    )
    source: Source = SOURCE_FIELD


class ClusterConfig(Frozen):
    name: str = Field("cluster", description="Cluster name.")
    nodes: int = Field(gt=0, le=1_000_000, description="Nodes the job uses (GPUs = nodes x gpus_per_node).")
    gpus_per_node: int = Field(gt=0, le=1024, description="GPUs in one node.")
    spare_nodes: int = Field(0, ge=0, le=1_000_000, description="Hot spare nodes that replace failed nodes.")
    total_nodes: int | None = Field(
        None,
        gt=0,
        le=2_000_000,
        description="Nodes in the whole cluster, the capacity its calendar books (default nodes + spare_nodes); "
        "campaigns sharing a cluster give the same value.",
    )
    accelerator: AcceleratorConfig
    network: NetworkConfig
    power: PowerConfig
    cost: CostConfig
    failures: tuple[FailureCategoryConfig, ...] = Field(
        (), description="Unexpected failure categories, each a Poisson process at its rate and scope."
    )
    planned: PlannedMaintenanceConfig = PlannedMaintenanceConfig()
    lemons: LemonNodesConfig = Field(
        LemonNodesConfig(),
        description="Lemon nodes: a few nodes whose hardware fails a multiple of the healthy rate.",
    )
    quarantine: QuarantineConfig = Field(
        QuarantineConfig(),
        description="Retire a node after k failures within a window of hours (a spare takes its place).",
    )
    diurnal_amplitude: float = Field(
        0.0, ge=0, lt=0.5, description="Peak-to-mean fraction of diurnal throughput drift (0.01 = 1%)."
    )
    source: Source = SOURCE_FIELD

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def booked_nodes(self) -> int:
        """Nodes a booking of this campaign holds: the job's nodes plus its spares."""
        return self.nodes + self.spare_nodes

    @property
    def capacity_nodes(self) -> int:
        """The cluster's total nodes: `total_nodes`, or nodes + spare_nodes when it is not given."""
        return self.total_nodes if self.total_nodes is not None else self.booked_nodes

    @model_validator(mode="after")
    def _booking_fits_cluster(self) -> ClusterConfig:
        if self.total_nodes is not None and self.total_nodes < self.booked_nodes:
            raise ValueError(
                f"@total_nodes: the cluster's total_nodes ({self.total_nodes}) is less than nodes + spare_nodes = "
                f"{self.nodes} + {self.spare_nodes} = {self.booked_nodes}, so this campaign can never be booked on it; "
                "lower cluster.nodes or cluster.spare_nodes, or raise cluster.total_nodes to the cluster's real size"
            )
        if self.lemons.count > self.booked_nodes:
            raise ValueError(
                f"@lemons.count: {self.lemons.count} lemon nodes is more than the job's nodes and spares "
                f"({self.booked_nodes}); lower cluster.lemons.count or give cluster.lemons.fraction"
            )
        return self

    @property
    def lemon_nodes(self) -> int:
        """Lemon nodes among the job's nodes and its spares."""
        return self.lemons.lemon_count(self.booked_nodes)

    @field_validator("failures")
    @classmethod
    def _unique_names(cls, value: tuple[FailureCategoryConfig, ...]) -> tuple[FailureCategoryConfig, ...]:
        names = [f.name for f in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"failure category names must be unique; repeated: {', '.join(dupes)}")
        return value

"""The campaign config's schema: frozen pydantic models with their defaults, ranges and cross-field rules.

Defaults live here, once. Figures from publications carry a `source` beside them. A validator's message that
starts with "@dotted.path: " names the key to blame; the loader turns it into `file:line: field.path: message`.
Also here: the digests of a validated config (`config_digest`, `DataConfig.production_digest`), since they are
functions of the models alone, not of the files they were read from.
"""

from __future__ import annotations

import glob
import hashlib
import json
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Source = str | None

# Ranges the models, the simulator, the catalog and the calendar can represent.
MAX_SEED = 2**53 - 1  # exact in JSON numbers (the Prefect UI form) and in a DuckDB BIGINT
MAX_WINDOW_DAYS = 366.0  # a window is at most a year
WINDOW_YEARS = (2000, 2100)  # timestamps the calendar and the simulator's clock handle
MAX_EXPECTED_FAILURES = 1_000_000  # failures the simulator may expect in one window
MAX_WINDOW_CHECKPOINTS = 10_000_000
MAX_POWER_SAMPLES = 20_000_000  # stored power samples per replica (about 160 MB as float64)
WORKSPACE_PLACEHOLDER = "{workspace}"  # a data path starting with it lives in the campaign's workspace
SOURCE_FIELD = Field(None, description="Where a published figure comes from (paper, section, table).")


class Frozen(BaseModel):
    # allow_inf_nan=False: NaN and infinity are never a valid figure; every number also has a finite range.
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)


# ----------------------------------------------------------------------------------------------- cluster


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


# ------------------------------------------------------------------------------------------------- model


class ModelConfig(Frozen):
    name: str = Field("model", description="Model name.")
    layers: int = Field(gt=0, le=10_000, description="Transformer layers.")
    hidden: int = Field(gt=0, le=1_000_000, description="Hidden size.")
    heads: int = Field(gt=0, le=100_000, description="Attention (query) heads.")
    kv_heads: int = Field(
        gt=0, le=100_000, description="Key/value heads (grouped-query attention; = heads for MHA)."
    )
    ffn_hidden: int = Field(
        gt=0,
        le=10_000_000,
        description=(
            "Feed-forward inner size (swiglu: gate and up matrices of this width, then down; gelu: up and down)."
        ),
    )
    vocab: int = Field(gt=0, le=100_000_000, description="Vocabulary size.")
    seq_len: int = Field(gt=0, le=100_000_000, description="Training sequence length, tokens.")
    mlp: Literal["swiglu", "gelu"] = Field(
        "swiglu",
        description=("MLP family: swiglu (Llama: three h x ffn matrices) or gelu (GPT-3 / Megatron: two)."),
    )
    tied_embeddings: bool = Field(
        False,
        description=(
            "One V x h matrix serves as input embedding and output layer (GPT-3 / Megatron 2021-2022)."
        ),
    )
    position: Literal["rope", "learned"] = Field(
        "rope",
        description=(
            "Position encoding: rope (no weights) or learned (a seq_len x h table, GPT-3 / Megatron)."
        ),
    )
    dropout: bool = Field(
        False,
        description=(
            "Dropout after attention and MLP and on materialized attention probabilities (GPT-3 / Megatron 0.1; "
            "Llama none): extra memory-bound work and stored masks."
        ),
    )
    source: Source = SOURCE_FIELD

    @model_validator(mode="after")
    def _shapes(self) -> ModelConfig:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be divisible by kv_heads ({self.kv_heads})")
        return self


# -------------------------------------------------------------------------------------------------- plan


class LayoutConfig(Frozen):
    tp: int = Field(1, gt=0, le=10_000_000, description="Tensor-parallel degree.")
    pp: int = Field(1, gt=0, le=10_000_000, description="Pipeline-parallel degree.")
    dp: int = Field(1, gt=0, le=10_000_000, description="Data-parallel degree.")
    cp: int = Field(1, gt=0, le=10_000_000, description="Context-parallel degree.")
    vpp: int = Field(
        1, gt=0, le=100_000, description="Virtual pipeline stages per PP rank (interleaved 1F1B)."
    )

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp * self.cp


class CheckpointConfig(Frozen):
    interval_s: float | Literal["auto"] = Field(
        "auto", description="Seconds between checkpoints, or 'auto' for the Young/Daly optimum."
    )
    is_async: bool = Field(
        False, alias="async", description="Asynchronous save: only the copy to host memory blocks training."
    )
    storage_gb_per_s: float = Field(
        ge=0.001, le=1e7, description="Aggregate checkpoint write bandwidth to storage, GB/s."
    )
    source: Source = SOURCE_FIELD

    @field_validator("interval_s", mode="before")
    @classmethod
    def _seconds_or_auto(cls, value: object) -> float | str:
        if value == "auto":
            return value
        if isinstance(value, bool):
            raise ValueError(
                "interval_s must be a number of seconds or 'auto'"
            )  # pydantic reports ValueError
        try:
            # Whatever the YAML held: float() refusing it (TypeError, ValueError) is how a non-number is caught.
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            raise ValueError("interval_s must be a number of seconds or 'auto'") from None
        # Written so that NaN fails it: NaN is not inside any range.
        if not (1.0 <= seconds <= 1e7):
            raise ValueError("interval_s must be a finite number of seconds from 1 to 10,000,000, or 'auto'")
        return seconds


class PowerSmoothingConfig(Frozen):
    floor_fraction: float = Field(0.0, ge=0, le=1, description="GPU power floor as a fraction of TDP.")
    ramp_mw_per_s: float | None = Field(None, gt=0, le=1e6, description="Facility ramp limit, MW per second.")


class OverlapConfig(Frozen):
    """Which communication Megatron hides behind compute. Defaults are Megatron-LM's (`arguments.py`): TP and DP
    overlap are opt-in flags, p2p overlap of the interleaved schedule is on unless disabled."""

    tp: bool = Field(
        False,
        description=(
            "Overlap TP all-gather / reduce-scatter with the GEMMs that use them (--tp-comm-overlap, TE userbuffers)."
        ),
    )
    dp_grad_reduce: bool = Field(
        False,
        description=(
            "Reduce gradient buckets during the last micro-batch's backward (--overlap-grad-reduce)."
        ),
    )
    dp_param_gather: bool = Field(
        False,
        description=(
            "Gather updated parameters during the next step's first forward (--overlap-param-gather)."
        ),
    )
    pp_p2p: bool = Field(
        True,
        description=(
            "Overlap pipeline send/recv with compute in the interleaved schedule (default; --no-overlap-p2p-communication "
            "turns it off)."
        ),
    )


class MeasuredRunConfig(Frozen):
    """One measured run of the same model and stack (`campaign plan measure` prints one): the plan fits its
    stack-efficiency factors to these (docs/plan-model.md#calibrated-on-measured-steps)."""

    nodes: int = Field(gt=0, le=10_000_000, description="Nodes the measured run used.")
    layout: LayoutConfig = Field(
        description="The measured run's layout (tp x pp x dp x cp = nodes x gpus_per_node)."
    )
    global_batch_tokens: int = Field(
        gt=0, le=10**13, description="Tokens per optimizer step of the measured run."
    )
    micro_batch: int | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="Sequences per micro-batch of the measured run; absent = plan.micro_batch.",
    )
    step_time_s: float = Field(gt=0, le=1e7, description="Median seconds per optimizer step after warm-up.")
    source: str = Field(min_length=1, description="Where the figure comes from (job, date, metrics file).")


# What each training stack preset can run (`plan.stack`): the search proposes nothing else, and the config's own
# settings must be among them. Megatron-LM 2021: Narayanan et al. 2021 (interleaving, no sequence parallelism,
# materialized attention, no distributed optimizer or overlap); Megatron-Core: its README and `arguments.py` (CP,
# TE attention, distributed optimizer, TP/DP overlap); a PyTorch FSDP stack like Llama 3's (arXiv 2407.21783
# §3.3.2: FSDP, all-gather CP, interleaved pipeline, FP32 accumulation outside the GEMM, FlashAttention-2 class).
STACK_PRESETS: dict[str, dict[str, object]] = {
    "megatron-core": {
        "context_parallel": True,
        "interleaved_pipeline": True,
        "sequence_parallel": True,
        "fused_grad_accumulation": True,
        "attention_kernels": ("fused", "flash2", "materialized"),
        "distributed_optimizer": True,
        "tp_overlap": True,
        "dp_overlap": True,
    },
    "megatron-lm-2021": {
        "context_parallel": False,
        "interleaved_pipeline": True,
        "sequence_parallel": False,
        "fused_grad_accumulation": True,
        "attention_kernels": ("materialized",),
        "distributed_optimizer": False,
        "tp_overlap": False,
        "dp_overlap": False,
    },
    "pytorch-fsdp": {
        "context_parallel": True,
        "interleaved_pipeline": True,
        "sequence_parallel": True,
        "fused_grad_accumulation": False,
        "attention_kernels": ("flash2", "materialized"),
        "distributed_optimizer": True,
        "tp_overlap": False,
        "dp_overlap": True,
    },
}


class StackConfig(Frozen):
    """What the training software supports: `plan.stack: NAME` (a preset of STACK_PRESETS) or a mapping with
    `preset:` and any key overridden. `campaign plan --search` proposes only what the stack can run."""

    preset: Literal["megatron-core", "megatron-lm-2021", "pytorch-fsdp"] = Field(
        "megatron-core",
        description="The stack these capabilities start from (megatron-core, megatron-lm-2021, pytorch-fsdp).",
    )
    context_parallel: bool = Field(True, description="Context parallelism (cp > 1).")
    interleaved_pipeline: bool = Field(True, description="Interleaved pipeline stages (vpp > 1).")
    sequence_parallel: bool = Field(True, description="Sequence parallelism over the TP group.")
    fused_grad_accumulation: bool = Field(
        True,
        description="Gradient accumulation fused into the weight-gradient GEMM (plan.grad_accumulation_fusion).",
    )
    attention_kernels: tuple[Literal["fused", "flash2", "materialized"], ...] = Field(
        ("fused", "flash2", "materialized"),
        description="Attention kernels the stack has: fused (the accelerator's best), flash2, materialized.",
    )
    distributed_optimizer: bool = Field(True, description="Sharded optimizer state (zero_stage >= 1).")
    tp_overlap: bool = Field(True, description="TP communication overlapped with GEMMs (plan.overlap.tp).")
    dp_overlap: bool = Field(
        True,
        description="DP gradient reduce / parameter gather overlapped (plan.overlap.dp_grad_reduce, dp_param_gather).",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_preset(cls, value: object) -> object:
        if isinstance(value, str):
            value = {"preset": value}
        if isinstance(value, dict):
            name = value.get("preset", "megatron-core")
            if isinstance(name, str) and name in STACK_PRESETS:
                return {**STACK_PRESETS[name], **value}
        return value

    def unsupported(self, plan: PlanConfig, layout: LayoutConfig | None = None) -> list[tuple[str, str]]:
        """(key, what) for each setting of `plan` (and `layout`, default the plan's) the stack cannot run."""
        lay = layout or plan.layout
        kernel = "materialized" if plan.attention == "materialized" else plan.attention_kernel
        checks = [
            (lay.cp > 1 and not self.context_parallel, "layout.cp", f"cp={lay.cp} needs context parallelism"),
            (
                lay.vpp > 1 and not self.interleaved_pipeline,
                "layout.vpp",
                f"vpp={lay.vpp} needs interleaved stages",
            ),
            (
                plan.sequence_parallel and lay.tp > 1 and not self.sequence_parallel,
                "sequence_parallel",
                "sequence parallelism",
            ),
            (
                plan.grad_accumulation_fusion and not self.fused_grad_accumulation,
                "grad_accumulation_fusion",
                "fused gradient accumulation",
            ),
            (kernel not in self.attention_kernels, "attention_kernel", f"the {kernel} attention kernel"),
            (
                plan.zero_stage >= 1 and not self.distributed_optimizer,
                "zero_stage",
                f"zero_stage {plan.zero_stage}",
            ),
            (plan.overlap.tp and not self.tp_overlap, "overlap.tp", "TP overlap"),
            (
                (plan.overlap.dp_grad_reduce or plan.overlap.dp_param_gather) and not self.dp_overlap,
                "overlap",
                "DP overlap",
            ),
        ]
        return [(key, what) for bad, key, what in checks if bad]


class MemoryOverheadsConfig(Frozen):
    """What the framework allocates beside the model's tensors, each from its documented source
    (docs/plan-model.md#memory-as-the-framework-allocates-it)."""

    nccl_channels: int = Field(
        16,
        ge=1,
        le=64,
        description="NCCL channels per communicator. NCCL picks them by topology (at most 32, NCCL_MAX_NCHANNELS "
        "caps it); 16 is an assumption for NVSwitch nodes with one NIC per GPU: read yours from NCCL_DEBUG=INFO "
        "('N coll channels').",
    )
    nccl_connections_per_channel: int = Field(
        2,
        ge=1,
        le=8,
        description="Peer connections whose buffers each channel holds on a GPU: a ring's send and receive (2); "
        "trees add up to three children.",
    )
    nccl_buffsize_mib: float = Field(
        4.0,
        ge=0,
        le=1024,
        description="NCCL_BUFFSIZE, the Simple protocol's buffer per connection: 4 MiB by default (NCCL docs, "
        "environment variables).",
    )
    nccl_ll128_buffsize_mib: float = Field(
        4.6875,
        ge=0,
        le=1024,
        description="NCCL_LL128_BUFFSIZE per connection: 4,915,200 B by default (NCCL src/init.cc "
        "DEFAULT_LL128_BUFFSIZE = 120 elements x 640 threads x 8 steps x 8 B); 0 where LL128 is off.",
    )
    nccl_ll_buffsize_mib: float = Field(
        0.5,
        ge=0,
        le=1024,
        description="NCCL_LL_BUFFSIZE per connection: 524,288 B by default (NCCL src/init.cc DEFAULT_LL_BUFFSIZE = "
        "8 lines x 512 threads x 8 steps x 16 B).",
    )
    cuda_context_mib: float = Field(
        274.0,
        ge=0,
        le=16384,
        description="Device memory of the CUDA context a training process creates: 287,047,680 B measured with "
        "lazy module loading (PyTorch pull request 86509, which made CUDA_MODULE_LOADING=LAZY PyTorch's default; "
        "636 MiB eager). Not the caching allocator's, so not fragmented.",
    )
    cublas_workspace_mib: float = Field(
        32.0,
        ge=0,
        le=16384,
        description="cuBLAS workspace per stream doing GEMMs: 32 MiB recommended on Hopper, 4 MiB before (cuBLAS "
        "docs, cublasSetWorkspace).",
    )


class PlanConfig(Frozen):
    layout: LayoutConfig = LayoutConfig()
    micro_batch: int = Field(1, gt=0, le=1_000_000, description="Sequences per micro-batch.")
    global_batch_tokens: int = Field(
        gt=0, le=10**13, description="Tokens per optimizer step (all data-parallel ranks)."
    )
    zero_stage: Literal[0, 1, 2, 3] = Field(1, description="ZeRO stage (1 = distributed optimizer).")
    recompute: Literal["none", "selective", "full"] = Field(
        "selective", description="Activation recomputation."
    )
    recompute_pointwise: bool = Field(
        False,
        description=(
            "Also recompute norms and the MLP activation in backward instead of storing their outputs "
            "(Megatron-Core --recompute-modules layernorm, activation): cheap memory-bound work, less activation memory."
        ),
    )
    attention: Literal["flash", "materialized"] = Field(
        "flash",
        description=(
            "Attention kernel: flash (fused; the s x s scores are never stored) or materialized (QK^T, softmax, dropout "
            "and AV as separate kernels, Megatron-LM 2021-2022)."
        ),
    )
    attention_kernel: Literal["fused", "flash2"] = Field(
        "fused",
        description=(
            "Which fused attention kernel `attention: flash` runs: fused (the accelerator's best, "
            "kernels.attention_peak_fraction: cuDNN / FlashAttention-3 class on H100) or flash2 (FlashAttention-2, "
            "kernels.flash2_peak_fraction)."
        ),
    )
    sequence_parallel: bool = Field(
        True,
        description=(
            "Shard norms, dropout and residuals over the TP group (Korthikanti et al. 2022); off = replicated."
        ),
    )
    cp_load_balance: bool = Field(
        True,
        description=(
            "Split each sequence into 2 x cp chunks so every CP rank gets equal causal-attention work (Megatron CP); "
            "off = contiguous chunks, the last rank does most of the work."
        ),
    )
    cp_comm: Literal["ring", "all_gather"] = Field(
        "ring",
        description=(
            "How CP ranks share K and V: ring (Megatron / Transformer Engine p2p, each block's exchange hidden behind "
            "the attention of the block before) or all_gather (Llama 3 §3.3.2 and TE cp_comm_type='all_gather': K and V "
            "gathered before attention, gathered again and dK/dV reduce-scattered in backward, all on the critical path)."
        ),
    )
    overlap: OverlapConfig = OverlapConfig()
    grad_accumulation_fusion: bool = Field(
        True,
        description=(
            "The weight-gradient GEMM accumulates into the fp32 gradient buffer (Megatron --gradient-accumulation-fusion, "
            "on by default); off = a separate fp32 add per parameter per micro-batch (PyTorch autograd / FSDP "
            "accumulation, memory-bound)."
        ),
    )
    target_tokens: float = Field(gt=0, le=1e17, description="Tokens to train in the campaign.")
    checkpoint: CheckpointConfig
    power_smoothing: PowerSmoothingConfig | None = Field(None, description="Absent means no smoothing.")
    memory: MemoryOverheadsConfig = Field(
        MemoryOverheadsConfig(),
        description="Framework overheads the memory gate counts beside the model's tensors: NCCL buffers, the CUDA "
        "context and the cuBLAS workspace, each a documented default.",
    )
    allocator_fragmentation: float = Field(
        0.0,
        ge=0,
        le=0.5,
        description="Share of the memory PyTorch's caching allocator reserves for activations and communication "
        "tensors that it holds fragmented (GMLake, arXiv 2401.08156: 0.15 on average, up to 0.33, without "
        "expandable segments); the memory gate counts it. 0 by default: a flat 0.15 would put "
        "published layouts that ran over the limit, the share depends on the stack (expandable segments, "
        "contiguous gradient buffers), and the 95 % limit keeps headroom; set what your allocator's reserved "
        "memory shows (docs/plan-model.md).",
    )
    stack: StackConfig = Field(
        StackConfig(),
        description="What the training software supports: a preset name (megatron-core, megatron-lm-2021, "
        "pytorch-fsdp) or a mapping with preset: and overrides. The search proposes only what it can run.",
    )
    measured: tuple[MeasuredRunConfig, ...] = Field(
        (),
        max_length=1000,
        description="Measured runs of this model and stack (`campaign plan measure` prints one): the plan fits "
        "its stack efficiency to them and says so; absent = uncalibrated, with a band from production runs.",
    )


# ------------------------------------------------------------------------------------------ window, data


class Auto(StrEnum):
    """`window.start: auto`, resolved once at load: commit books the earliest start where the campaign fits on the
    cluster's calendar. A start is a datetime or `AUTO`, never a string to compare (it dumps as "auto")."""

    AUTO = "auto"


AUTO = Auto.AUTO


class WindowConfig(Frozen):
    start: datetime | Auto = Field(
        description="Start of the execution window, ISO 8601 with a time zone, or 'auto': commit books the earliest "
        "start where the campaign fits on the cluster's calendar."
    )
    days: float = Field(
        ge=0.01, le=MAX_WINDOW_DAYS, description="Length of the execution window, days (at most a year)."
    )
    align: Literal["minute", "hour", "day"] = Field(
        "minute",
        description="What an 'auto' start is rounded up to (UTC): the next whole minute, hour or day "
        "(midnight). 'day' keeps the simulated window's clock phase (diurnal drift) the same "
        "whenever it is booked. Ignored for a fixed start.",
    )

    @property
    def is_auto(self) -> bool:
        return self.start is AUTO

    @property
    def fixed_start(self) -> datetime | None:
        """The start the config fixes; None for `auto` (the booking gives it)."""
        return None if isinstance(self.start, Auto) else self.start

    @field_validator("start")
    @classmethod
    def _start_in_range(cls, value: datetime | Auto) -> datetime | Auto:
        if isinstance(value, Auto):
            return value
        low, high = WINDOW_YEARS
        if not (low <= value.year < high):
            raise ValueError(
                f"window start must fall in the years {low} to {high - 1}; give an ISO 8601 date "
                "such as 2027-01-04T00:00:00Z"
            )
        return value


class SourceConfig(Frozen):
    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Source name (lowercase, digits, - and _)."
    )
    path: str = Field(description="Glob of input files, relative to the config file or absolute.")
    format: Literal["jsonl", "parquet", "warc"] = Field(
        description="File format: JSONL (optionally .gz), Parquet, or WARC web archives (.warc, .warc.gz; the main "
        "text of each HTML response is extracted, its URL kept)."
    )
    text_field: str = Field("text", description="Field that holds the document text.")
    id_field: str | None = Field(None, description="Field that holds a document id (else file:line).")
    url_field: str | None = Field(
        None, description="Field that holds the document's URL, read for cleaning.url_filter (else no URL)."
    )
    weight: float = Field(ge=1e-6, le=1e6, description="Planned share of training tokens from this source.")


class GopherRepetitionConfig(Frozen):
    """Gopher repetition filter (Rae et al. 2021, Table A1): remove a document when a fraction is above its limit."""

    enabled: bool = Field(True, description="Apply the Gopher repetition rules.")
    max_duplicate_line_fraction: float = Field(
        0.3, ge=0, le=1, description="Lines that repeat an earlier line, of all lines."
    )
    max_duplicate_paragraph_fraction: float = Field(
        0.3, ge=0, le=1, description="Paragraphs that repeat an earlier paragraph, of all paragraphs."
    )
    max_duplicate_line_char_fraction: float = Field(
        0.2, ge=0, le=1, description="Characters in repeated lines, of all characters."
    )
    max_duplicate_paragraph_char_fraction: float = Field(
        0.2, ge=0, le=1, description="Characters in repeated paragraphs, of all characters."
    )
    top_ngram_char_fractions: tuple[tuple[int, float], ...] = Field(
        ((2, 0.20), (3, 0.18), (4, 0.16)),
        description="(n, limit): characters of the most frequent word n-gram (times its count), of all characters.",
    )
    duplicate_ngram_char_fractions: tuple[tuple[int, float], ...] = Field(
        ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)),
        description="(n, limit): characters covered by word n-grams that occur more than once, of all characters.",
    )
    source: Source = Field(
        "Gopher (Rae et al. 2021, arXiv 2112.11446, Table A1)", description="Thresholds' origin."
    )

    @field_validator("top_ngram_char_fractions", "duplicate_ngram_char_fractions")
    @classmethod
    def _ngram_limits(cls, value: tuple[tuple[int, float], ...]) -> tuple[tuple[int, float], ...]:
        for n, limit in value:
            if not 1 <= n <= 20 or not 0 <= limit <= 1:
                raise ValueError(f"({n}, {limit}): n must be 1..20 and the limit 0..1")
        return value


class C4Config(Frozen):
    """C4's page rules (Raffel et al. 2020, JMLR 21, sec. 2.2) as datatrove's C4QualityFilter applies them.

    Line rules edit the kept text (drop lines); page rules remove the document."""

    enabled: bool = Field(False, description="Apply the C4 rules.")
    filter_no_terminal_punct: bool = Field(
        False, description="Drop lines not ending in terminal punctuation (FineWeb ran C4 with this off)."
    )
    min_words_per_line: int = Field(3, ge=0, le=1000, description="Drop lines with fewer words (paper: 3).")
    max_word_length: int = Field(
        1000, ge=1, le=1_000_000, description="Drop lines with a longer word (chars)."
    )
    min_sentences: int = Field(5, ge=0, le=1000, description="Remove pages with fewer sentences (paper: 5).")
    filter_javascript: bool = Field(True, description="Drop lines that contain 'javascript'.")
    filter_lorem_ipsum: bool = Field(True, description="Remove pages that contain 'lorem ipsum'.")
    filter_curly_bracket: bool = Field(True, description="Remove pages that contain '{'.")
    filter_policy: bool = Field(
        True, description="Drop lines with a policy phrase (terms of use, cookies...)."
    )
    source: Source = Field(
        "C4 (Raffel et al. 2020, JMLR 21, sec. 2.2); datatrove C4QualityFilter",
        description="Thresholds' origin.",
    )


class FineWebConfig(Frozen):
    """FineWeb's three custom rules (Penedo et al. 2024, arXiv 2406.17557, sec. 3)."""

    enabled: bool = Field(False, description="Apply the FineWeb rules.")
    min_line_punct_ratio: float = Field(
        0.12, ge=0, le=1, description="Remove if at most this fraction of lines end in terminal punctuation."
    )
    max_short_line_fraction: float = Field(
        0.67,
        ge=0,
        le=1,
        description="Remove if at least this fraction of lines are 30 characters or shorter.",
    )
    short_line_chars: int = Field(30, ge=1, le=10_000, description="A line this long or shorter is short.")
    max_duplicate_line_char_fraction: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Remove if at least this fraction of characters are in repeated lines (paper 0.1; datatrove "
        "0.10.1 defaults to 0.01).",
    )
    source: Source = Field(
        "FineWeb (Penedo et al. 2024, arXiv 2406.17557, sec. 3)", description="Thresholds' origin."
    )


class NearDedupConfig(Frozen):
    """MinHash near-duplicate removal over word n-grams with LSH banding, clusters joined transitively."""

    enabled: bool = Field(True, description="Remove near-duplicates (one kept per cluster).")
    ngram: int = Field(5, ge=1, le=50, description="Words per shingle (FineWeb: 5).")
    bands: int = Field(14, ge=1, le=1000, description="LSH bands (FineWeb: 14).")
    rows: int = Field(8, ge=1, le=100, description="Hashes per band (FineWeb: 8).")
    seed: int = Field(1, ge=0, le=2**31 - 1, description="Seed of the hash permutations.")
    source: Source = Field(
        "FineWeb (Penedo et al. 2024, sec. 3): 5-grams, 14 bands x 8 hashes",
        description="Parameters' origin.",
    )


class LanguagesConfig(Frozen):
    """Language identification with py3langid's shipped model (offline): keep documents whose most likely language
    is one of `keep` with a probability of at least `min_score`."""

    enabled: bool = Field(False, description="Identify each document's language and apply the rule below.")
    keep: tuple[str, ...] = Field(
        ("en",), description="ISO 639-1 codes of the languages to keep (py3langid's 97 languages)."
    )
    min_score: float = Field(
        0.65, ge=0, le=1, description="Remove a document whose language's probability is below this."
    )
    prefix_chars: int = Field(
        2000,
        ge=0,
        le=10**9,
        description="Identify the language from the document's first this many characters, cut back to a "
        "whitespace (0: the whole text); docs/prepare.md#language says what the cut costs in agreement.",
    )
    source: Source = Field(
        "FineWeb (Penedo et al. 2024, sec. 3): keep English at score >= 0.65; model: langid.py (Lui and Baldwin "
        "2012) as py3langid ships it",
        description="Thresholds' origin.",
    )


class PiiConfig(Frozen):
    """PII redaction in kept text, as datatrove's PIIFormatter: each match replaced by a placeholder."""

    enabled: bool = Field(False, description="Replace emails, IP addresses and phone numbers in kept text.")
    emails: bool = Field(True, description="Replace email addresses with `email_placeholder`.")
    ip_addresses: bool = Field(True, description="Replace public IPv4 and IPv6 addresses.")
    phone_numbers: bool = Field(
        True, description="Replace phone numbers (7 to 15 digits, separators allowed)."
    )
    email_placeholder: str = Field("email@example.com", description="Replaces an email address.")
    ip_placeholder: str = Field("0.0.0.0", description="Replaces an IP address (datatrove draws one of 6).")
    phone_placeholder: str = Field("<PHONE_NUMBER>", description="Replaces a phone number.")
    source: Source = Field(
        "huggingface/datatrove 0.10.1 pipeline/formatters/pii.py (PIIFormatter)", description="Rules' origin."
    )


class UrlFilterConfig(Frozen):
    """Remove documents whose URL (a source's `url_field`) matches a block list; each list is a file, one rule a
    line, '#' starts a comment."""

    domains_file: str | None = Field(
        None, description="Blocked domains, one a line: a domain also blocks its subdomains."
    )
    substrings_file: str | None = Field(
        None, description="Blocked URL substrings, one a line (case-insensitive)."
    )
    regexes_file: str | None = Field(None, description="Blocked URL regexes (Python syntax), one a line.")
    source: Source = Field(
        "FineWeb (Penedo et al. 2024, sec. 3): UT1 block list; datatrove URLFilter",
        description="Rules' origin.",
    )

    @property
    def enabled(self) -> bool:
        return bool(self.domains_file or self.substrings_file or self.regexes_file)


class BenchmarkFileConfig(Frozen):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Benchmark name, used in reasons.")
    path: str = Field(
        description="JSONL or Parquet file of evaluation texts, relative to the config or absolute."
    )
    text_fields: tuple[str, ...] = Field(
        ("text",), min_length=1, description="Fields whose texts are matched (e.g. question, passage)."
    )


class DecontaminateConfig(Frozen):
    """Remove training documents that share a word n-gram with an evaluation text."""

    benchmarks: tuple[BenchmarkFileConfig, ...] = Field((), description="Evaluation files; none: off.")
    ngram: int = Field(13, ge=5, le=50, description="Words per n-gram (GPT-3: 13).")
    source: Source = Field(
        "GPT-3 (Brown et al. 2020, arXiv 2005.14165, App. C): 13-gram overlap", description="Rule's origin."
    )


class CleaningConfig(Frozen):
    max_record_bytes: int = Field(
        64 * 2**20,
        ge=1024,
        le=2**31 - 1,
        description="Reject a JSONL line longer than this (bytes) without holding it in memory.",
    )
    max_doc_bytes: int = Field(
        1_000_000, gt=0, le=2**31 - 1, description="Reject documents larger than this, UTF-8 bytes."
    )
    gopher_quality: bool = Field(True, description="Apply the Gopher quality rules below.")
    min_words: int = Field(50, ge=0, le=10**9, description="Reject documents with fewer words (Gopher: 50).")
    max_words: int = Field(
        100_000, gt=0, le=10**9, description="Reject documents with more words (Gopher: 100,000)."
    )
    min_mean_word_length: float = Field(
        3.0, ge=0, le=1000, description="Gopher: mean word length at least 3."
    )
    max_mean_word_length: float = Field(
        10.0, gt=0, le=1000, description="Gopher: mean word length at most 10."
    )
    max_symbol_word_ratio: float = Field(
        0.1, ge=0, le=1000, description="Gopher: '#' or ellipsis per word at most 0.1."
    )
    max_bullet_lines_fraction: float = Field(
        0.9, ge=0, le=1, description="Gopher: at most 90% of lines start with a bullet point."
    )
    max_ellipsis_lines_fraction: float = Field(
        0.3, ge=0, le=1, description="Gopher: at most 30% of lines end with an ellipsis."
    )
    min_alpha_word_fraction: float = Field(0.8, ge=0, le=1, description="Gopher: 80% of words have a letter.")
    min_stop_words: int = Field(
        2,
        ge=0,
        le=8,
        description="Gopher: at least 2 of the, be, to, of, and, that, have, with (distinct words).",
    )
    gopher_repetition: GopherRepetitionConfig = GopherRepetitionConfig()
    c4: C4Config = C4Config()
    fineweb: FineWebConfig = FineWebConfig()
    languages: LanguagesConfig = LanguagesConfig()
    pii: PiiConfig = PiiConfig()
    url_filter: UrlFilterConfig = UrlFilterConfig()
    exact_dedup: bool = Field(
        True, description="Drop exact duplicates (after normalisation), keeping the first."
    )
    near_dedup: NearDedupConfig = NearDedupConfig()
    source: Source = Field(
        "Gopher (Rae et al. 2021, arXiv 2112.11446, App. A)", description="Thresholds' origin."
    )


TOKENIZER_SPECS = ("cl100k_base", "o200k_base", "utf8-bytes", "gpt2-pretokens")


class DataConfig(Frozen):
    sources: tuple[SourceConfig, ...] = Field(min_length=1, description="Input sources.")
    demo_corpus_dir: str | None = Field(
        None,
        description="Demo only: prepare first writes the synthetic demo corpus here (relative to the config).",
    )
    cleaning: CleaningConfig = CleaningConfig()
    decontaminate: DecontaminateConfig = DecontaminateConfig()
    tokenizer: str = Field(
        "gpt2-pretokens",
        description="Token counter: cl100k_base or o200k_base (bpe-openai, offline), a tokenizer.json path, "
        "utf8-bytes, or gpt2-pretokens (a fast estimate: GPT-2 pre-tokenizer pieces).",
    )
    shard_bytes: int = Field(
        64 * 2**20, ge=2**16, le=2**40, description="Split input files into shards of about this many bytes."
    )
    batch_docs: int = Field(
        2048, ge=1, le=1_000_000, description="Documents per Arrow batch inside a shard (bounds memory)."
    )
    training_shards: bool = Field(
        False,
        description="Also write each source's clean documents as tokenized training shards (Megatron's indexed "
        "dataset, .bin + .idx, under data/tokenized/) and a blend file of the source weights; needs a real "
        "tokenizer (not gpt2-pretokens).",
    )

    @model_validator(mode="after")
    def _shards_need_ids(self) -> DataConfig:
        if self.training_shards and self.tokenizer == "gpt2-pretokens":
            raise ValueError(
                "training_shards needs token ids and gpt2-pretokens only counts: set data.tokenizer to "
                "cl100k_base, o200k_base, utf8-bytes or a tokenizer.json, or training_shards: false"
            )
        return self

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        if value in TOKENIZER_SPECS or value.endswith(".json"):
            return value
        raise ValueError(
            f"unknown tokenizer {value!r}; use one of {', '.join(TOKENIZER_SPECS)} "
            "or the path of a tokenizer.json"
        )

    def in_workspace(self, root: Path) -> DataConfig:
        """This section with `{workspace}` at the start of a path replaced by the workspace folder."""

        def place(path: str, pattern: bool) -> str:
            if path.startswith(WORKSPACE_PLACEHOLDER):
                # A source path is a glob: the workspace part is escaped so that '[', '*' or '?' in a folder
                # name match only that folder (a workspace `ws[1]` must never read `ws1`'s files).
                base = glob.escape(str(root)) if pattern else str(root)
                return str(Path(base) / path[len(WORKSPACE_PLACEHOLDER) :].lstrip("/\\"))
            return path

        sources = tuple(s.model_copy(update={"path": place(s.path, True)}) for s in self.sources)
        demo = place(self.demo_corpus_dir, False) if self.demo_corpus_dir else None
        return self.model_copy(update={"sources": sources, "demo_corpus_dir": demo})

    def production_digest(self) -> str:
        """sha256 of what decides the prepared data: every key of this section except the mixture weights
        (the mixture gate judges those against the current config, so they may change without a new prepare)."""
        dumped = self.model_dump(mode="json", by_alias=True)
        for source in dumped["sources"]:
            source.pop("weight", None)
        canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @field_validator("sources")
    @classmethod
    def _unique_sources(cls, value: tuple[SourceConfig, ...]) -> tuple[SourceConfig, ...]:
        names = [s.name for s in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {', '.join(dupes)}")
        return value


# ------------------------------------------------------------------------------------------------- gates


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


# --------------------------------------------------------------------------------------------- rehearsal


class RehearsalModelConfig(Frozen):
    """The rehearsal model's shape; absent, it is derived from `model:` (same head and FFN ratios, width 128)."""

    layers: int = Field(2, ge=1, le=16, description="Transformer layers of the rehearsal model.")
    hidden: int = Field(128, ge=16, le=1024, description="Hidden size of the rehearsal model.")
    heads: int = Field(4, ge=1, le=64, description="Attention (query) heads of the rehearsal model.")
    kv_heads: int = Field(2, ge=1, le=64, description="Key/value heads of the rehearsal model.")
    ffn_hidden: int = Field(
        512, ge=16, le=8192, description="Feed-forward inner size of the rehearsal model."
    )

    @model_validator(mode="after")
    def _shapes(self) -> RehearsalModelConfig:
        if self.hidden % self.heads or (self.hidden // self.heads) % 2:
            raise ValueError(
                f"hidden ({self.hidden}) must divide by heads ({self.heads}) into an even head size "
                "(rotary embeddings rotate pairs of channels)"
            )
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be divisible by kv_heads ({self.kv_heads})")
        return self


class RehearsalConfig(Frozen):
    """The small-scale rehearsal gate: a real training loop on a sample of the clean data, killed and restored."""

    sample_tokens: int = Field(
        60_000,
        ge=1_000,
        le=100_000_000,
        description="Tokens of clean data to sample (whole documents, chosen by hash).",
    )
    seq_len: int = Field(64, ge=4, le=8192, description="Tokens per packed training sequence.")
    heldout_fraction: float = Field(
        0.1, ge=0.01, le=0.5, description="Share of sampled documents held out for evaluation."
    )
    vocab: Literal["sample", "tokenizer"] = Field(
        "sample",
        description="'sample': ids renumbered densely over the tokens the sample uses (a small "
        "embedding, fast on a CPU); 'tokenizer': the tokenizer's own ids and full vocabulary.",
    )
    steps: int = Field(150, ge=10, le=1_000_000, description="Optimizer steps of each rehearsal run.")
    batch_sequences: int = Field(8, ge=1, le=4096, description="Sequences per optimizer step.")
    checkpoint_every: int = Field(30, ge=1, le=1_000_000, description="Steps between checkpoints.")
    eval_every: int = Field(15, ge=1, le=1_000_000, description="Steps between held-out evaluations.")
    learning_rate: float = Field(3e-3, gt=0, le=1e6, description="Peak learning rate (AdamW).")
    warmup_steps: int = Field(15, ge=0, le=1_000_000, description="Linear warm-up steps before cosine decay.")
    min_loss_drop: float = Field(
        1.0,
        ge=0,
        le=100,
        description="Training loss (nats) must fall at least this "
        "much from the first tenth of the steps to the last tenth.",
    )
    restore_tolerance: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Largest relative loss difference between the "
        "resumed and the uninterrupted run (0 = bit-identical, the reference trainer).",
    )
    timeout_s: float = Field(
        600, gt=0, le=86_400, description="Seconds all trainer starts together may take."
    )
    command: tuple[str, ...] = Field(
        ("python", "-m", "campaign.rehearsal.trainer"),
        min_length=1,
        description="Trainer command (a list of arguments) obeying the trainer contract (docs/rehearsal.md); a first "
        "argument 'python' is the Python running campaign.",
    )
    model: RehearsalModelConfig | None = Field(
        None, description="Rehearsal model shape; absent = derived from `model:` (same ratios, width 128)."
    )

    @model_validator(mode="after")
    def _checkpoint_before_the_end(self) -> RehearsalConfig:
        if 2 * self.checkpoint_every > self.steps:
            raise ValueError(
                f"@checkpoint_every: {self.checkpoint_every} leaves no room for a kill after a "
                f"checkpoint and before step {self.steps}; use at most steps / 2 = {self.steps // 2}"
            )
        if self.warmup_steps >= self.steps:
            raise ValueError(f"@warmup_steps: {self.warmup_steps} must be below steps ({self.steps})")
        return self


# ----------------------------------------------------------------------------------------------- execute

INJECT_KINDS = ("kill", "hang", "node_loss")


class InjectConfig(Frozen):
    """Real faults driven into a real run (docs/execution.md), so a team sees its restart path work."""

    failures: int = Field(0, ge=0, le=1000, description="Faults to inject over the run (0: none).")
    seed: int | None = Field(
        None,
        ge=0,
        le=MAX_SEED,
        description="Seed of the faults' steps and kinds (absent: the campaign's seed).",
    )
    kinds: tuple[Literal["kill", "hang", "node_loss"], ...] = Field(
        ("kill",),
        min_length=1,
        description="Kinds drawn from: kill (SIGKILL of the trainer's process group), hang (SIGSTOP: the trainer "
        "stops writing steps), node_loss (the node is marked lost and the job killed on it).",
    )


class ExecuteConfig(Frozen):
    """How the committed window is executed: simulated, or a real run supervised on this machine or on Slurm.

    Not part of the config digest: how a committed window runs is chosen at execute time (`--backend`)."""

    backend: Literal["simulate", "local", "slurm"] = Field(
        "simulate",
        description="simulate: the discrete-event model of the window; local: the trainer as a process group on "
        "this machine, supervised; slurm: the same through sbatch (docs/execution.md).",
    )
    command: tuple[str, ...] | None = Field(
        None,
        min_length=1,
        description="Trainer command of a real run (the rehearsal's trainer contract); absent: rehearsal.command.",
    )
    steps: int = Field(
        300, ge=10, le=100_000_000, description="Target step of a real run: it ends there or at max_wall_s."
    )
    checkpoint_every: int = Field(
        30, ge=1, le=1_000_000, description="Steps between checkpoints of a real run."
    )
    max_wall_s: float = Field(
        1800,
        gt=0,
        le=2_592_000,
        description="A real run's window: it stops here if the target step is not reached.",
    )
    hang_factor: float = Field(
        10.0,
        ge=2,
        le=10_000,
        description="A trainer that writes no step for this many median step times is hung (killed, restarted).",
    )
    hang_min_s: float = Field(
        2.0,
        ge=0.1,
        le=86_400,
        description="Floor of the hang limit, seconds (the first steps have no median).",
    )
    startup_s: float = Field(
        300,
        gt=0,
        le=86_400,
        description="Seconds a start may take to write its first step before it is hung.",
    )
    backoff_s: float = Field(1.0, ge=0, le=3600, description="Back-off before a restart, seconds.")
    max_restarts: int = Field(20, ge=0, le=10_000, description="Restarts before the run is given up.")
    nodes: tuple[str, ...] = Field(
        ("local-0", "local-1", "local-2"),
        min_length=1,
        description="Nodes a real run may use, in order (local: names of slots on this machine; slurm: hosts).",
    )
    exclude_after: int = Field(
        2,
        ge=1,
        le=1000,
        description="Failures on one node after which it is excluded (a lost node: at once).",
    )
    inject: InjectConfig = InjectConfig()

    @model_validator(mode="after")
    def _room_for_faults(self) -> ExecuteConfig:
        if 2 * self.checkpoint_every > self.steps:
            raise ValueError(
                f"@checkpoint_every: {self.checkpoint_every} leaves at most one checkpoint before step {self.steps}; "
                f"use at most steps / 2 = {self.steps // 2}"
            )
        room = self.steps - self.checkpoint_every - 1
        if self.inject.failures > room:
            raise ValueError(
                f"@inject.failures: {self.inject.failures} faults need as many distinct steps after the first "
                f"checkpoint and before step {self.steps}, and there are {room}; inject fewer or raise steps"
            )
        return self


# ---------------------------------------------------------------------------------------------- campaign


class CampaignConfig(Frozen):
    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Campaign name (names the workspace)."
    )
    seed: int = Field(
        0, ge=0, le=MAX_SEED, description="Seed of every random stream (numpy SeedSequence), 0 to 2^53-1."
    )
    cluster: ClusterConfig
    model: ModelConfig
    plan: PlanConfig
    window: WindowConfig
    data: DataConfig
    gates: GatesConfig = GatesConfig()
    commit: CommitConfig = CommitConfig()
    sim: SimConfig = SimConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    rehearsal: RehearsalConfig = RehearsalConfig()
    execute: ExecuteConfig = ExecuteConfig()

    @model_validator(mode="after")
    def _layout_matches_cluster(self) -> CampaignConfig:
        # A leading "@dotted.path: " tells the loader which key (and so which file:line) to blame.
        lay, cl, m = self.plan.layout, self.cluster, self.model
        if lay.world != cl.gpus:
            raise ValueError(
                f"@plan.layout: tp x pp x dp x cp = {lay.tp}x{lay.pp}x{lay.dp}x{lay.cp} = {lay.world} GPUs, but "
                f"cluster has nodes x gpus_per_node = {cl.nodes}x{cl.gpus_per_node} = {cl.gpus}; "
                "change plan.layout.dp or cluster.nodes so they match"
            )
        if m.heads % lay.tp:
            raise ValueError(
                f"@plan.layout.tp: tp ({lay.tp}) must divide model.heads ({m.heads}); pick a divisor"
            )
        if m.seq_len % lay.cp:
            raise ValueError(f"@plan.layout.cp: cp ({lay.cp}) must divide model.seq_len ({m.seq_len})")
        if self.plan.global_batch_tokens % m.seq_len:
            raise ValueError(
                f"@plan.global_batch_tokens: {self.plan.global_batch_tokens} must be a multiple of "
                f"model.seq_len ({m.seq_len})"
            )
        sequences = self.plan.global_batch_tokens // m.seq_len
        per_replica = self.plan.micro_batch * lay.dp
        if sequences % per_replica:
            raise ValueError(
                f"@plan.global_batch_tokens: a global batch of {sequences} sequences is not divisible by "
                f"micro_batch x dp = {per_replica}; use a multiple of {per_replica * m.seq_len} tokens"
            )
        if lay.vpp > 1 and lay.pp == 1:
            raise ValueError("@plan.layout.vpp: vpp > 1 needs pp > 1 (interleaving splits pipeline stages)")
        for i, run in enumerate(self.plan.measured):
            where = f"@plan.measured.{i}"
            if run.layout.world != run.nodes * cl.gpus_per_node:
                raise ValueError(
                    f"{where}.layout: tp x pp x dp x cp = {run.layout.world} GPUs, but nodes x gpus_per_node = "
                    f"{run.nodes}x{cl.gpus_per_node} = {run.nodes * cl.gpus_per_node}; give the layout the run used"
                )
            if m.heads % run.layout.tp or m.seq_len % run.layout.cp:
                raise ValueError(
                    f"{where}.layout: tp must divide model.heads ({m.heads}) and cp model.seq_len ({m.seq_len}); "
                    "a measured run is of the same model"
                )
            per_replica = (run.micro_batch or self.plan.micro_batch) * run.layout.dp * m.seq_len
            if run.global_batch_tokens % per_replica:
                raise ValueError(
                    f"{where}.global_batch_tokens: {run.global_batch_tokens} is not a multiple of micro_batch x dp x "
                    f"seq_len = {per_replica}; give the batch the run used"
                )
        # Llama 3 put 126 layers on 16 x 8 virtual stages: embedding and output each take one stage's place.
        if m.layers + 2 < lay.pp * lay.vpp:
            raise ValueError(
                f"@plan.layout: pp x vpp = {lay.pp * lay.vpp} stages is more than model.layers + 2 = {m.layers + 2}; "
                "lower pp or vpp"
            )
        return self

    @model_validator(mode="after")
    def _representable(self) -> CampaignConfig:
        """Bounds that involve several fields: what the simulator can hold in memory and time."""
        window_h = self.window.days * 24.0
        nodes = self.cluster.nodes + self.cluster.spare_nodes
        expected = (
            sum(f.job_rate_per_hour(nodes, self.cluster.gpus_per_node) for f in self.cluster.failures)
            * window_h
        )
        expected += self.cluster.planned.per_day * self.window.days
        if not expected <= MAX_EXPECTED_FAILURES:
            raise ValueError(
                f"@cluster.failures: these rates give {expected:,.0f} expected interruptions in the "
                f"{self.window.days:g}-day window, more than the {MAX_EXPECTED_FAILURES:,} the simulator handles; "
                "check the units (per_gpu_year, per_1k_node_days, per_job_hour) or shorten the window"
            )
        interval = self.plan.checkpoint.interval_s
        if interval != "auto" and not interval < window_h * 3600.0:
            raise ValueError(
                f"@plan.checkpoint.interval_s: {interval:g} s is not shorter than the {self.window.days:g}-day window: "
                "no checkpoint could ever commit; use a shorter interval, 'auto', or a longer window.days"
            )
        if interval != "auto" and not window_h * 3600.0 / interval <= MAX_WINDOW_CHECKPOINTS:
            raise ValueError(
                f"@plan.checkpoint.interval_s: {interval:g} s gives more than {MAX_WINDOW_CHECKPOINTS:,} checkpoints "
                "in the window; use a longer interval or 'auto'"
            )
        if not window_h * 3600.0 / self.sim.power_sample_s <= MAX_POWER_SAMPLES:
            raise ValueError(
                f"@sim.power_sample_s: {self.sim.power_sample_s:g} s samples give more than {MAX_POWER_SAMPLES:,} "
                f"power samples over a {self.window.days:g}-day window; use at least "
                f"{window_h * 3600.0 / MAX_POWER_SAMPLES:.0f} s"
            )
        return self

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per step, m = B / (b * dp)."""
        return (
            self.plan.global_batch_tokens
            // self.model.seq_len
            // (self.plan.micro_batch * self.plan.layout.dp)
        )


def config_digest(config: CampaignConfig) -> str:
    """sha256 of the canonical JSON of the validated config (sources and descriptions included), without
    `execute:`."""
    # How a committed window is executed (`execute:`) is chosen at execute time and judged by no gate.
    canonical = json.dumps(
        config.model_dump(mode="json", by_alias=True, exclude={"execute"}),
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()

"""The `plan:` section: layout, batch, checkpointing, stack, memory overheads and measured steps."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from campaign.config.schema.base import SOURCE_FIELD, Frozen, Source


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


# Two measurements of one layout (same nodes, layout, batch and micro-batch) further apart than this ratio contradict
# each other: the config names them instead of fitting their average. A median step time over a few hundred steps
# moves by a few percent between jobs of one layout (contention, a slower node); 25 % is beyond that.
MEASURED_AGREEMENT = 1.25


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
    model: str | None = Field(
        None,
        min_length=1,
        description="model.name of the model the run trained (required): a row of another model, or one that "
        "names none, is refused.",
    )
    stack: str | None = Field(
        None,
        min_length=1,
        description="plan.stack preset the run used (megatron-core, megatron-lm-2021, pytorch-fsdp): a row of "
        "another stack is refused (absent: taken as this config's stack).",
    )


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

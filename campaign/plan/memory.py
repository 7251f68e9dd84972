"""Memory per GPU on the most-loaded pipeline rank, as the framework allocates it: model states, activations in
flight, activation gradients, communication tensors, and the framework's own overheads.

Model states follow Megatron's accounting: bf16 weights 2 B/param, fp32 main gradients 4 B, fp32 master + Adam
m, v 12 B (18 B/param), the 12 B sharded over DP with the distributed optimizer (ZeRO-1: 6 + 12/d); ZeRO-2 and
ZeRO-3 use the ZeRO paper's forms (2 + 14/d and 16/d). Activations per layer follow Korthikanti et al.'s Table 2
accounting, generalised tensor by tensor to GQA, SwiGLU, flash attention and dropout-free models (GPT: 34 sbh/t +
5as^2b/t without recompute); 2*s*b*h/t per layer plus one layer's working set under full recompute; the first stage
holds min(m, p) micro-batches in flight (1F1B), min(m, p*(1 + (p-1)/(p*v))) interleaved. Backward needs one
layer's activation gradients; the sequence-parallel gather, PP send/recv and a DP bucket need tensors. Each
overhead is its own line, from `plan.memory` (campaign.config.MemoryOverheadsConfig): NCCL's buffers (channels x
connections x the Simple, LL128 and LL protocol buffers per communicator), the CUDA context and cuBLAS workspace;
`plan.allocator_fragmentation` adds what the caching allocator reserves beyond its transient allocations.
Source: Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054); Korthikanti et al. 2022 (arXiv 2205.05198, Table 2,
Fig. 1); Megatron-LM `training/theoretical_memory_usage.py`; NCCL environment docs (NCCL_BUFFSIZE) and
`src/init.cc` (LL and LL128 buffer sizes); PyTorch pull request 86509 (CUDA context with lazy loading); cuBLAS docs
(cublasSetWorkspace); Guo et al. 2024, GMLake (arXiv 2401.08156: caching-allocator fragmentation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from campaign.config import MemoryOverheadsConfig, ModelConfig
from campaign.plan.flops import (
    Recompute,
    embedding_parameters,
    kv_hidden,
    layer_parameters,
    output_parameters,
)

GIB = 2.0**30

# Megatron's bf16 training reduces and keeps main gradients in fp32.
WEIGHT_BYTES = 2.0
MAIN_GRAD_BYTES = 4.0
OPTIMIZER_BYTES = 12.0  # fp32 master weights + Adam m + v


def model_state_bytes_per_param(zero_stage: int, dp: int) -> dict[str, float]:
    """Bytes per parameter held on one GPU for weights, gradients and optimizer state."""
    if zero_stage == 0:
        return {"weights": WEIGHT_BYTES, "gradients": MAIN_GRAD_BYTES, "optimizer": OPTIMIZER_BYTES}
    if zero_stage == 1:
        return {"weights": WEIGHT_BYTES, "gradients": MAIN_GRAD_BYTES, "optimizer": OPTIMIZER_BYTES / dp}
    if zero_stage == 2:  # ZeRO paper: 2 + 14/d (bf16 gradients sharded with the optimizer)
        return {"weights": WEIGHT_BYTES, "gradients": 2.0 / dp, "optimizer": OPTIMIZER_BYTES / dp}
    if zero_stage == 3:  # ZeRO paper: 16/d
        return {"weights": WEIGHT_BYTES / dp, "gradients": 2.0 / dp, "optimizer": OPTIMIZER_BYTES / dp}
    raise ValueError(f"zero_stage must be 0-3, got {zero_stage}")


@dataclass(frozen=True)
class StageSplit:
    """Transformer layers per pipeline rank: the first, a middle and the last rank."""

    first: int
    middle: int
    last: int
    note: str | None = None

    @property
    def most(self) -> int:
        return max(self.first, self.middle, self.last)


@lru_cache(maxsize=4096)
def split_layers(layers: int, pp: int, vpp: int = 1) -> StageSplit:
    """Layers per PP rank. Even when pp*vpp divides layers; Llama 3 style when pp*vpp divides layers + 2 (the
    embedding and the output layer each take one layer's place on the first and last rank); else ceil."""
    stages = pp * vpp
    if pp == 1:
        return StageSplit(layers, layers, layers)
    if layers % stages == 0:
        per = layers // pp
        return StageSplit(per, per, per)
    if (layers + 2) % stages == 0:
        per = (layers + 2) // pp
        return StageSplit(
            per - 1,
            per if pp > 2 else per - 1,
            per - 1,
            note=(
                f"{layers} layers on {pp}x{vpp} pipeline stages: the first and last rank hold {per - 1} layers plus the "
                f"embedding / output layer, the others {per} (Llama 3 split)"
            ),
        )
    per = math.ceil(layers / stages) * vpp
    return StageSplit(
        per,
        per,
        per,
        note=(
            f"{layers} layers do not split evenly over {pp}x{vpp} pipeline stages: the most-loaded rank is assumed to "
            f"hold ceil({layers}/{stages})x{vpp} = {per} layers (pick pp*vpp dividing {layers} to balance)"
        ),
    )


@lru_cache(maxsize=4096)
def stage_parameters(model: ModelConfig, split: StageSplit, pp: int) -> int:
    """Parameters on the most-loaded pipeline rank before TP sharding: the embedding (and learned positions) on the
    first rank, the output layer on the last; with tied embeddings and pp > 1 the last rank keeps its own copy of
    the embedding (Megatron syncs the two), so every stage count stays the same as untied."""
    per_layer = layer_parameters(model)
    emb = embedding_parameters(model)
    out = output_parameters(model)
    if pp == 1:
        return split.first * per_layer + emb + out
    if model.tied_embeddings:
        out += model.vocab * model.hidden
    first = split.first * per_layer + emb
    middle = split.middle * per_layer
    last = split.last * per_layer + out
    return max(first, middle, last)


def activation_bytes_per_layer(
    model: ModelConfig,
    micro_batch: int,
    tp: int,
    cp: int,
    recompute: Recompute,
    *,
    attention: str = "flash",
    sequence_parallel: bool = True,
    recompute_pointwise: bool = False,
) -> float:
    """Activation bytes one layer keeps for one micro-batch on one GPU (CP shards the sequence).

    Per token, bf16, Korthikanti et al.'s accounting generalised to GQA and SwiGLU: h-wide tensors sharded by
    sequence parallelism (norm inputs 2 x 2h, the two GEMM inputs 2 x 2h, dropout masks 2 x h), TP-sharded ones
    (Q, K, V 2(h + 2 kv); attention output 2h; MLP up output 2 x ffn (x2 SwiGLU); activation output 2 ffn) and,
    with materialized attention and no recompute, the scores (softmax output 2as, dropout mask and output 3as).
    GPT (4h GeLU, dropout) gives 34 sbh/t + 5as^2b/t; pointwise recompute drops the GEMM inputs and activation
    output. For `full` this is only the stored layer input; add `working_layer_bytes` once."""
    s = model.seq_len / cp
    tokens = s * micro_batch
    h, ffn, kv = model.hidden, model.ffn_hidden, kv_hidden(model)
    sp = tp if sequence_parallel else 1
    if recompute == "full":
        return 2.0 * tokens * h / sp
    replicated = 2 * 2.0 * h + (2 * 1.0 * h if model.dropout else 0.0)  # norm inputs, dropout masks
    gemm_inputs = 0.0 if recompute_pointwise else 2 * 2.0 * h  # QKV and MLP-up inputs
    up = (2 if model.mlp == "swiglu" else 1) * ffn
    sharded = 2.0 * (h + 2 * kv) + 2.0 * h + 2.0 * up + (0.0 if recompute_pointwise else 2.0 * ffn)
    per_token = (replicated + gemm_inputs) / sp + sharded / tp
    if attention == "materialized" and recompute == "none":
        per_token += (2.0 + (3.0 if model.dropout else 0.0)) * model.heads * s / tp
    elif attention == "flash":
        per_token += 4.0 * model.heads / tp  # fp32 log-sum-exp per head
    return tokens * per_token


def working_layer_bytes(
    model: ModelConfig,
    micro_batch: int,
    tp: int,
    cp: int,
    *,
    attention: str = "flash",
    sequence_parallel: bool = True,
) -> float:
    """One layer's full activation set, rebuilt during the backward pass under full recompute."""
    return activation_bytes_per_layer(
        model, micro_batch, tp, cp, "none", attention=attention, sequence_parallel=sequence_parallel
    )


def activation_gradient_bytes(
    model: ModelConfig, micro_batch: int, tp: int, cp: int, *, attention: str = "flash"
) -> float:
    """Gradient buffers alive while one layer runs backward: the gradients of the MLP up output and activation
    output (TP-sharded), two full-sequence h-wide gradients (after the sequence-parallel all-gather), the
    incoming and outgoing layer gradient, and with materialized attention the gradient of the scores."""
    tokens = model.seq_len / cp * micro_batch
    up = (2 if model.mlp == "swiglu" else 1) * model.ffn_hidden
    per_token = 2.0 * (up + model.ffn_hidden) / tp + 2 * 2.0 * model.hidden + 2 * 2.0 * model.hidden / tp
    if attention == "materialized":
        per_token += 2.0 * 2.0 * model.heads * (model.seq_len / cp) / tp
    return tokens * per_token


MIB = 2.0**20


def nccl_communicators(tp: int, pp: int, dp: int, cp: int) -> int:
    """NCCL communicators a rank uses: one per parallel group larger than one (tp, cp, pp and dp x cp)."""
    return sum(1 for size in (tp, cp, pp, dp * cp) if size > 1)


def nccl_buffer_bytes(communicators: int, overheads: MemoryOverheadsConfig) -> float:
    """NCCL's own buffers: per communicator, each channel's peer connections hold one buffer per protocol (Simple
    NCCL_BUFFSIZE, LL128, LL), allocated by NCCL outside PyTorch's caching allocator (NCCL docs; src/init.cc)."""
    per_connection = (
        overheads.nccl_buffsize_mib + overheads.nccl_ll128_buffsize_mib + overheads.nccl_ll_buffsize_mib
    ) * MIB
    return communicators * overheads.nccl_channels * overheads.nccl_connections_per_channel * per_connection


def cuda_context_bytes(overheads: MemoryOverheadsConfig) -> float:
    """The CUDA context of the training process and its cuBLAS workspace."""
    return (overheads.cuda_context_mib + overheads.cublas_workspace_mib) * MIB


def communication_buffer_bytes(
    model: ModelConfig,
    micro_batch: int,
    tp: int,
    pp: int,
    dp: int,
    cp: int,
    params_gpu: float,
    zero_stage: int,
) -> float:
    """Communication tensors the framework allocates (through the caching allocator): the sequence-parallel
    all-gather output, the PP send/recv buffers and one DP bucket staged for its collective."""
    tokens = model.seq_len / cp * micro_batch
    gathered = 2.0 * tokens * model.hidden if tp > 1 else 0.0
    p2p = 2 * 2 * 2.0 * tokens * model.hidden / tp if pp > 1 else 0.0
    bucket = 4.0 * min(params_gpu, 40e6) if dp * cp > 1 and zero_stage >= 1 else 0.0
    return gathered + p2p + bucket


def in_flight_micro_batches(pp: int, vpp: int, micro_batches: int) -> float:
    """Micro-batches whose activations the first pipeline stage holds at the peak (1F1B, interleaved)."""
    if pp == 1:
        return 1.0
    if vpp == 1:
        return float(min(micro_batches, pp))
    return min(float(micro_batches), pp * (1.0 + (pp - 1) / (pp * vpp)))


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per GPU by kind on the most-loaded rank."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    activation_gradients: float
    communication: float  # communication tensors: sequence-parallel gather, PP send/recv, a DP bucket
    other: float
    allocator: float = (
        0.0  # what the caching allocator reserves beyond the transient allocations (fragmentation)
    )
    nccl: float = 0.0  # NCCL's own buffers (outside the caching allocator)
    cuda_context: float = 0.0  # the CUDA context and cuBLAS workspace

    @property
    def total(self) -> float:
        return (
            self.weights
            + self.gradients
            + self.optimizer
            + self.activations
            + self.activation_gradients
            + self.communication
            + self.other
            + self.allocator
            + self.nccl
            + self.cuda_context
        )

    def gib(self) -> dict[str, float]:
        kinds = (
            "weights",
            "gradients",
            "optimizer",
            "activations",
            "activation_gradients",
            "communication",
            "other",
            "allocator",
            "nccl",
            "cuda_context",
        )
        return {k: getattr(self, k) / GIB for k in kinds}


def allocator_bytes(transient: float, fragmentation: float) -> float:
    """Bytes the caching allocator holds free beyond `transient` allocated bytes when a share `fragmentation` of
    what it reserves for them is fragmented: transient x f / (1 - f) (GMLake, arXiv 2401.08156: 15 % on average,
    up to 33 %, over eight LLMs on A100 80 GB with PyTorch's allocator)."""
    return transient * fragmentation / (1.0 - fragmentation) if fragmentation > 0 else 0.0


class MemoryModel:
    """The memory model of one (model, plan settings), memoising per-layer bytes by (micro-batch, tp, cp) and stage
    parameters by (pp, vpp), so a layout search pays only for what differs."""

    def __init__(
        self,
        model: ModelConfig,
        *,
        zero_stage: int,
        recompute: Recompute,
        attention: str = "flash",
        sequence_parallel: bool = True,
        recompute_pointwise: bool = False,
        allocator_fragmentation: float = 0.0,
        overheads: MemoryOverheadsConfig | None = None,
    ) -> None:
        self.model, self.zero_stage, self.recompute = model, zero_stage, recompute
        self.fragmentation = allocator_fragmentation
        self.overheads = overheads or MemoryOverheadsConfig()
        self._fixed: dict[int, float] = {}
        self.attention, self.sequence_parallel, self.recompute_pointwise = (
            attention,
            sequence_parallel,
            recompute_pointwise,
        )
        self._layer: dict[tuple[int, int, int], tuple[float, float, float]] = {}
        self._params: dict[tuple[int, int], tuple[StageSplit, int]] = {}
        self._states: dict[tuple[str, int], float] = {}

    def _per_layer(self, b: int, t: int, c: int) -> tuple[float, float, float]:
        key = (b, t, c)
        if key not in self._layer:
            model = self.model
            per_layer = activation_bytes_per_layer(
                model,
                b,
                t,
                c,
                self.recompute,
                attention=self.attention,
                sequence_parallel=self.sequence_parallel,
                recompute_pointwise=self.recompute_pointwise,
            )
            working = (
                working_layer_bytes(
                    model, b, t, c, attention=self.attention, sequence_parallel=self.sequence_parallel
                )
                if self.recompute == "full"
                else 0.0
            )
            self._layer[key] = (
                per_layer,
                working,
                activation_gradient_bytes(model, b, t, c, attention=self.attention),
            )
        return self._layer[key]

    def _stage(self, pp: int, vpp: int) -> tuple[StageSplit, int]:
        key = (pp, vpp)
        if key not in self._params:
            split = split_layers(self.model.layers, pp, vpp)
            self._params[key] = (split, stage_parameters(self.model, split, pp))
        return self._params[key]

    def total_bytes(
        self, tp: int, pp: int, dp: int, cp: int, vpp: int, micro_batch: int, micro_batches: int
    ) -> float:
        """`estimate(...).total` without building the breakdown (the search's filter; the same arithmetic)."""
        split, stage_params = self._stage(pp, vpp)
        params = stage_params / tp
        key = ("per_param", dp * cp)
        per_param = self._states.get(key)
        if per_param is None:
            per_param = self._states[key] = sum(
                model_state_bytes_per_param(self.zero_stage, dp * cp).values()
            )
        in_flight = in_flight_micro_batches(pp, vpp, micro_batches)
        per_layer, working, act_grads = self._per_layer(micro_batch, tp, cp)
        model = self.model
        s = model.seq_len / cp
        other = (8.0 * s * micro_batch + s * micro_batch * model.hidden) * in_flight / tp
        if pp == 1:
            other += 4.0 * s * micro_batch * model.hidden * (1.0 + model.vocab / model.hidden) / tp
        comm = communication_buffer_bytes(model, micro_batch, tp, pp, dp, cp, params, self.zero_stage)
        transient = per_layer * split.most * in_flight + working + act_grads + comm + other
        return (
            params * per_param
            + transient
            + allocator_bytes(transient, self.fragmentation)
            + self._framework_bytes(tp, pp, dp, cp)
        )

    def _framework_bytes(self, tp: int, pp: int, dp: int, cp: int) -> float:
        """NCCL buffers and the CUDA context: what the framework holds outside the caching allocator."""
        n = nccl_communicators(tp, pp, dp, cp)
        if n not in self._fixed:
            self._fixed[n] = nccl_buffer_bytes(n, self.overheads) + cuda_context_bytes(self.overheads)
        return self._fixed[n]

    def estimate(
        self, *, tp: int, pp: int, dp: int, cp: int, vpp: int, micro_batch: int, micro_batches: int
    ) -> MemoryEstimate:
        model = self.model
        split, stage_params = self._stage(pp, vpp)
        params = stage_params / tp
        per_param = model_state_bytes_per_param(self.zero_stage, dp * cp)  # Megatron shards over dp x cp
        in_flight = in_flight_micro_batches(pp, vpp, micro_batches)
        per_layer, working, act_grads = self._per_layer(micro_batch, tp, cp)
        s = model.seq_len / cp
        other = (8.0 * s * micro_batch + s * micro_batch * model.hidden) * in_flight / tp
        if pp == 1:
            other += 4.0 * s * micro_batch * model.hidden * (1.0 + model.vocab / model.hidden) / tp
        activations = per_layer * split.most * in_flight + working
        comm = communication_buffer_bytes(model, micro_batch, tp, pp, dp, cp, params, self.zero_stage)
        return MemoryEstimate(
            weights=params * per_param["weights"],
            gradients=params * per_param["gradients"],
            optimizer=params * per_param["optimizer"],
            activations=activations,
            activation_gradients=act_grads,
            communication=comm,
            other=other,
            allocator=allocator_bytes(activations + act_grads + comm + other, self.fragmentation),
            nccl=nccl_buffer_bytes(nccl_communicators(tp, pp, dp, cp), self.overheads),
            cuda_context=cuda_context_bytes(self.overheads),
        )


def estimate_memory(
    model: ModelConfig,
    *,
    tp: int,
    pp: int,
    dp: int,
    cp: int,
    vpp: int,
    micro_batch: int,
    micro_batches: int,
    zero_stage: int,
    recompute: Recompute,
    attention: str = "flash",
    sequence_parallel: bool = True,
    recompute_pointwise: bool = False,
) -> MemoryEstimate:
    """Memory on the most-loaded GPU: model states of the largest stage shard (/tp; sharded over dp x cp), the
    largest layer count's activations with the first stage's micro-batches in flight, one layer's activation
    gradients, communication buffers. `other` holds Megatron's embedding terms (token ids, embedding output per
    micro-batch in flight) and the fp32 logits and their gradient when pp = 1."""
    return MemoryModel(
        model,
        zero_stage=zero_stage,
        recompute=recompute,
        attention=attention,
        sequence_parallel=sequence_parallel,
        recompute_pointwise=recompute_pointwise,
    ).estimate(tp=tp, pp=pp, dp=dp, cp=cp, vpp=vpp, micro_batch=micro_batch, micro_batches=micro_batches)

"""Memory per GPU on the most-loaded pipeline rank: model states plus activations in flight.

Model states follow Megatron's accounting: bf16 weights 2 B/param, fp32 main gradients 4 B, fp32 master + Adam
m, v 12 B (18 B/param), the 12 B sharded over DP with the distributed optimizer (ZeRO-1: 6 + 12/d); ZeRO-2 and
ZeRO-3 use the ZeRO paper's forms (2 + 14/d and 16/d). Activations per layer follow Korthikanti et al.'s
table in Megatron's generalised form s*b*h*(18 + 4*ffn/h)/t (TP + sequence parallel, selective recompute), with
5*a*s/h added when the attention scores are stored (no recompute) and 2*s*b*h/t per layer plus one layer's working
set under full recompute; the first stage holds min(m, p) micro-batches in flight (1F1B), min(m, p*(1 + (p-1)/(p*v)))
interleaved.
Source: Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054); Korthikanti et al. 2022 (arXiv 2205.05198, Table 2,
Fig. 1); Megatron-LM `training/theoretical_memory_usage.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from campaign.config import ModelConfig
from campaign.plan.flops import Recompute, embedding_parameters, layer_parameters

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
        return StageSplit(per - 1, per if pp > 2 else per - 1, per - 1, note=(
            f"{layers} layers on {pp}x{vpp} pipeline stages: the first and last rank hold {per - 1} layers plus the "
            f"embedding / output layer, the others {per} (Llama 3 split)"))
    per = math.ceil(layers / stages) * vpp
    return StageSplit(per, per, per, note=(
        f"{layers} layers do not split evenly over {pp}x{vpp} pipeline stages: the most-loaded rank is assumed to "
        f"hold ceil({layers}/{stages})x{vpp} = {per} layers (pick pp*vpp dividing {layers} to balance)"))


def stage_parameters(model: ModelConfig, split: StageSplit, pp: int, *, gated_mlp: bool = True,
                     tied_embeddings: bool = False) -> int:
    """Parameters on the most-loaded pipeline rank before TP sharding (embedding on the first rank, output
    layer on the last; both on one rank when pp = 1, one matrix when tied)."""
    per_layer = layer_parameters(model, gated_mlp=gated_mlp)
    emb = embedding_parameters(model)
    if pp == 1:
        return split.first * per_layer + emb * (1 if tied_embeddings else 2) + model.hidden
    first = split.first * per_layer + emb
    middle = split.middle * per_layer
    last = split.last * per_layer + emb + model.hidden
    return max(first, middle, last)


def activation_bytes_per_layer(model: ModelConfig, micro_batch: int, tp: int, cp: int, recompute: Recompute) -> float:
    """Activation bytes one layer keeps for one micro-batch on one GPU (TP with sequence parallelism, CP shards
    the sequence). For `full` this is only the stored layer input; add `working_layer_bytes` once."""
    s = model.seq_len / cp
    sbh = s * micro_batch * model.hidden
    if recompute == "full":
        return 2.0 * sbh / tp
    per = 18.0 + 4.0 * model.ffn_hidden / model.hidden
    if recompute == "none":
        per += 5.0 * model.heads * s / model.hidden
    return sbh * per / tp


def working_layer_bytes(model: ModelConfig, micro_batch: int, tp: int, cp: int) -> float:
    """One layer's full activation set, rebuilt during the backward pass under full recompute."""
    return activation_bytes_per_layer(model, micro_batch, tp, cp, "none")


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
    other: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.other

    def gib(self) -> dict[str, float]:
        return {k: getattr(self, k) / GIB for k in ("weights", "gradients", "optimizer", "activations", "other")}


def estimate_memory(model: ModelConfig, *, tp: int, pp: int, dp: int, cp: int, vpp: int, micro_batch: int,
                    micro_batches: int, zero_stage: int, recompute: Recompute, gated_mlp: bool = True,
                    tied_embeddings: bool = False) -> MemoryEstimate:
    """Memory on the most-loaded GPU: model states of the largest stage shard (/tp; sharded over dp x cp) and the
    largest layer count's activations with the first stage's micro-batches in flight. `other` holds Megatron's
    embedding terms (token ids, embedding output per micro-batch in flight) and the fp32 logits when pp = 1."""
    split = split_layers(model.layers, pp, vpp)
    params = stage_parameters(model, split, pp, gated_mlp=gated_mlp, tied_embeddings=tied_embeddings) / tp
    per_param = model_state_bytes_per_param(zero_stage, dp * cp)  # Megatron shards over the dp x cp group
    in_flight = in_flight_micro_batches(pp, vpp, micro_batches)
    per_layer = activation_bytes_per_layer(model, micro_batch, tp, cp, recompute)
    activations = per_layer * split.most * in_flight
    if recompute == "full":
        activations += working_layer_bytes(model, micro_batch, tp, cp)
    s = model.seq_len / cp
    other = (8.0 * s * micro_batch + s * micro_batch * model.hidden) * in_flight / tp
    if pp == 1:
        other += 4.0 * s * micro_batch * model.hidden * (1.0 + model.vocab / model.hidden) / tp
    return MemoryEstimate(
        weights=params * per_param["weights"],
        gradients=params * per_param["gradients"],
        optimizer=params * per_param["optimizer"],
        activations=activations,
        other=other,
    )

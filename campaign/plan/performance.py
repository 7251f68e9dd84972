"""Step time of 4D-parallel (TP, CP, PP, DP) training: compute, exposed communication and pipeline bubble.

step = compute + TP comm + exposed CP comm + bubble + PP p2p on the critical path + exposed DP comm, all on the
slowest pipeline rank. Compute is hardware FLOPs / (peak x kernel_efficiency). TP (sequence parallel: 4 all-gathers
+ 4 reduce-scatters of b*s*h per layer per micro-batch, 6 + 6 with full recompute) is fully exposed; CP K/V exchange
hides behind the attention core; the 1F1B bubble is (p-1)/(v*m) of the per-micro-batch stage time; DP reduce-scatters
fp32 gradients and all-gathers bf16 weights, hidden behind one micro-batch's backward up to DP_OVERLAP of it.
Rank order is Llama 3's [TP, CP, PP, DP]: DP is outermost, so it is the group that crosses pods.
Source: Narayanan et al. 2021 (SC'21: bubble, TP volume, scatter-gather p2p); Korthikanti et al. 2022 (sequence
parallel); Llama 3 (arXiv 2407.21783) §3.3.2 (rank order); Megatron-LM distributed optimizer (overlapped DP).
"""

from __future__ import annotations

from dataclasses import dataclass

from campaign.config import CampaignConfig, LayoutConfig, ModelConfig
from campaign.plan.flops import (
    Recompute,
    attention_flops_per_token_layer,
    head_dim,
    layer_flops_per_token,
    logits_flops_per_token,
)
from campaign.plan.memory import split_layers, stage_parameters
from campaign.plan.topology import Fabric, all_gather_s, p2p_s, place_group, reduce_scatter_s

# Assumption: at most 80% of the DP reduce-scatter / all-gather hides behind compute (bucketed overlap as in
# Megatron's --overlap-grad-reduce / --overlap-param-gather); the last bucket and launch gaps stay exposed.
DP_OVERLAP = 0.8
ACT_BYTES = 2.0        # bf16 activations on the wire
GRAD_REDUCE_BYTES = 4.0  # Megatron reduces bf16 training gradients in fp32
PARAM_GATHER_BYTES = 2.0


@dataclass(frozen=True)
class StepEstimate:
    step_s: float
    compute_s: float
    tp_comm_s: float
    cp_comm_s: float
    pp_bubble_s: float
    pp_comm_s: float
    dp_comm_s: float
    dp_comm_exposed_s: float
    notes: tuple[str, ...] = ()

    @property
    def comm_fraction(self) -> float:
        """Share of the step the GPUs wait on communication or the bubble instead of computing."""
        return max(0.0, min(1.0, (self.step_s - self.compute_s) / self.step_s)) if self.step_s > 0 else 0.0

    def breakdown(self) -> dict[str, float]:
        return {
            "compute": self.compute_s,
            "tp_comm": self.tp_comm_s,
            "cp_comm_exposed": self.cp_comm_s,
            "pp_bubble": self.pp_bubble_s,
            "pp_comm": self.pp_comm_s,
            "dp_comm_exposed": self.dp_comm_exposed_s,
            "dp_comm_total": self.dp_comm_s,
        }


def estimate_step(model: ModelConfig, layout: LayoutConfig, *, micro_batch: int, micro_batches: int,
                  recompute: Recompute, zero_stage: int, kernel_efficiency: float, peak_tflops: float,
                  fabric: Fabric, gated_mlp: bool = True, tied_embeddings: bool = False) -> StepEstimate:
    """Time of one optimizer step (seconds) with its parts, for `micro_batches` micro-batches per pipeline."""
    t, p, d, c, v = layout.tp, layout.pp, layout.dp, layout.cp, layout.vpp
    m = micro_batches
    notes: list[str] = []
    split = split_layers(model.layers, p, v)
    rate = peak_tflops * 1e12 * kernel_efficiency
    tokens_mb = micro_batch * model.seq_len / c  # tokens one GPU processes per micro-batch

    layer_hw = layer_flops_per_token(model, recompute, gated_mlp=gated_mlp)
    logits = logits_flops_per_token(model)
    if p == 1:
        rank_flops, rank_layers = model.layers * layer_hw + logits, model.layers
    else:
        candidates = [(split.first * layer_hw, split.first), (split.middle * layer_hw, split.middle),
                      (split.last * layer_hw + logits, split.last)]
        rank_flops, rank_layers = max(candidates)
    mb_compute_s = rank_flops * tokens_mb / t / rate
    compute_s = m * mb_compute_s

    # TP with sequence parallelism: all-gather + reduce-scatter pairs of the full b*s*h activation per layer.
    tp_group = place_group(t, 1, fabric)
    act_bytes = micro_batch * (model.seq_len / c) * model.hidden * ACT_BYTES
    n_collectives = 12 if recompute == "full" else 8
    tp_layer_s = n_collectives * reduce_scatter_s(act_bytes, tp_group, fabric) if t > 1 else 0.0
    if tp_group.crosses_domain:
        notes.append(f"tp={t} crosses the NVLink domain: TP traffic priced on the scale-out network")
    tp_comm_s = m * rank_layers * tp_layer_s

    # CP: all-gather K,V in forward, reduce-scatter dK,dV in backward; overlapped with the attention core.
    cp_comm_s = 0.0
    if c > 1:
        cp_group = place_group(c, t, fabric)
        kv_local = head_dim(model) * max(1.0, model.kv_heads / t)
        kv_bytes = 2.0 * micro_batch * model.seq_len * kv_local * ACT_BYTES
        cp_layer_s = 2.0 * all_gather_s(kv_bytes, cp_group, fabric)
        attn_fwd = attention_flops_per_token_layer(model)
        attn_passes = 3.0 + (1.0 if recompute in ("selective", "full") else 0.0)
        attn_s = attn_passes * attn_fwd * tokens_mb / t / rate
        cp_comm_s = m * rank_layers * max(0.0, cp_layer_s - attn_s)
        if cp_group.crosses_domain:
            notes.append(f"tp x cp = {t * c} spans more than one NVLink domain: CP K/V exchange uses the NIC")

    mb_stage_s = (compute_s + tp_comm_s + cp_comm_s) / m
    pp_bubble_s = (p - 1) / v * mb_stage_s if p > 1 else 0.0

    # PP p2p on the critical path: the warm-up and cool-down cross p*v - 1 chunk boundaries each way; with
    # Megatron's scatter-gather each TP rank sends 1/t of the activation.
    pp_comm_s = 0.0
    if p > 1:
        pp_group = place_group(p, t * c, fabric)
        pp_comm_s = 2.0 * (p * v - 1) * p2p_s(act_bytes / t, pp_group, fabric)

    # DP (and CP: Megatron reduces gradients over dp x cp) on the stage's gradient shard.
    params_gpu = stage_parameters(model, split, p, gated_mlp=gated_mlp, tied_embeddings=tied_embeddings) / t
    dp_group = place_group(d, t * c * p, fabric)
    cp_grad_group = place_group(c, t, fabric)

    def shard_rs(bytes_: float) -> float:
        return reduce_scatter_s(bytes_, cp_grad_group, fabric) + reduce_scatter_s(bytes_ / c, dp_group, fabric)

    if d * c == 1:
        dp_comm_s = 0.0
    elif zero_stage == 0:
        dp_comm_s = 2.0 * shard_rs(params_gpu * GRAD_REDUCE_BYTES)
    elif zero_stage == 1:
        dp_comm_s = shard_rs(params_gpu * GRAD_REDUCE_BYTES) + shard_rs(params_gpu * PARAM_GATHER_BYTES)
    elif zero_stage == 2:
        dp_comm_s = 2.0 * shard_rs(params_gpu * 2.0)
    else:  # ZeRO-3: weights gathered for forward and backward of every micro-batch, gradients scattered once
        dp_comm_s = shard_rs(params_gpu * 2.0) + 2.0 * m * shard_rs(params_gpu * PARAM_GATHER_BYTES)
    window_s = compute_s + tp_comm_s if zero_stage == 3 else mb_stage_s
    dp_comm_exposed_s = max(dp_comm_s - window_s, (1.0 - DP_OVERLAP) * dp_comm_s)
    if dp_group.crosses_pod:
        notes.append(f"the dp={d} group spans {dp_group.pods} pods: its cross-pod ring runs at "
                     f"nic/oversubscription = {fabric.nic_gb_per_s / fabric.oversubscription:.1f} GB/s per GPU")

    step_s = compute_s + tp_comm_s + cp_comm_s + pp_bubble_s + pp_comm_s + dp_comm_exposed_s
    return StepEstimate(step_s=step_s, compute_s=compute_s, tp_comm_s=tp_comm_s, cp_comm_s=cp_comm_s,
                        pp_bubble_s=pp_bubble_s, pp_comm_s=pp_comm_s, dp_comm_s=dp_comm_s,
                        dp_comm_exposed_s=dp_comm_exposed_s, notes=tuple(notes))


def step_time_s(config: CampaignConfig) -> float:
    """Seconds per optimizer step for the config's own layout."""
    plan = config.plan
    return estimate_step(
        config.model, plan.layout, micro_batch=plan.micro_batch, micro_batches=config.micro_batches,
        recompute=plan.recompute, zero_stage=plan.zero_stage, kernel_efficiency=plan.kernel_efficiency,
        peak_tflops=config.cluster.accelerator.peak_bf16_tflops, fabric=Fabric.from_cluster(config.cluster),
    ).step_s

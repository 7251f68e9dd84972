"""Step time of 4D-parallel (TP, CP, PP, DP) training: kernel-level compute, exposed communication, bubble.

Per micro-batch and layer on one GPU (T = b*s/c tokens, TP shard t):
* GEMMs Q/K/V, O, MLP up (x2 for SwiGLU) and down, shaped (T, out/t, in) or (T, out, in/t), forward, data
  gradient and weight gradient each timed by `kernels.Kernels.gemm_s` (shape-dependent efficiency, roofline);
* attention: fused (flash) kernels on the causal half, or materialized (Megatron 2021-2022): batched QK^T and AV
  GEMMs over the full s x s scores plus the softmax / dropout traffic;
* memory-bound work timed from bytes moved: norms, residual adds, dropout, activation function, RoPE, and on the
  last stage cross entropy over V/t logits; the optimizer step once per step; unless the framework fuses it into the
  weight-gradient GEMM (Megatron; `plan.grad_accumulation_fusion`), the fp32 gradient accumulation of every
  micro-batch (PyTorch autograd / FSDP, Llama 3 §3.3.2 "FP32 gradients accumulation ... over multiple micro-batches").
Recompute adds forward work in the backward (selective: the attention core; full: the whole layer; pointwise:
norms and the MLP activation).
Communication: TP (sequence parallel: 4 all-gathers + 4 reduce-scatters of b*s*h per layer per micro-batch,
6 + 6 with full recompute; without SP the same volume as all-reduces) exposed unless `overlap.tp`, then hidden
behind the layer's GEMMs except the first of t chunks; CP ring (Megatron/TE p2p): c-1 K/V exchanges per layer
forward, K/V + dK/dV backward, each hidden only behind the attention of the block it overlaps, or (`cp_comm:
all_gather`, Llama 3's and TE's all-gather CP) K/V gathered forward and backward and dK/dV reduce-scattered, all
exposed; causal work imbalanced (2 - 1/c) unless `cp_load_balance`, and chunk-length attention efficiency; PP bubble (p-1)/v of a
micro-batch's stage time plus p2p; DP over dp x cp (distributed optimizer: reduce-scatter fp32 gradients,
all-gather bf16 weights) exposed unless `overlap.dp_grad_reduce` / `overlap.dp_param_gather`, which hide it
behind the last micro-batch's backward / the first micro-batch's forward except the last bucket.
Rank order is Megatron's and Llama 3's [TP, CP, PP, DP]: DP is outermost, so it is the group that crosses pods.
Source: Narayanan et al. 2021 (SC'21: bubble, TP volume, scatter-gather p2p); Korthikanti et al. 2022 (sequence
parallel, selective recompute); Llama 3 (arXiv 2407.21783) §3.3.2 (rank order, CP); Megatron-LM
`distributed/param_and_grad_buffer.py` (40M-parameter buckets, overlapped grad reduce / param gather) and
`arguments.py` (overlap defaults); Liu et al. 2023 Ring Attention (arXiv 2310.01889: block exchange hidden behind
block compute); Megatron-Core CP docs (load-balanced 2 x cp chunks); Transformer Engine `cp_comm_type`
("p2p" ring, "all_gather") docs.
"""

from __future__ import annotations

from dataclasses import dataclass

from campaign.config import CampaignConfig, LayoutConfig, ModelConfig, PlanConfig
from campaign.plan.flops import head_dim, kv_hidden
from campaign.plan.kernels import Kernels
from campaign.plan.layout import LayoutShape
from campaign.plan.memory import split_layers, stage_parameters
from campaign.plan.topology import Fabric, Placement, all_gather_s, p2p_s, place_group, reduce_scatter_s

ACT_BYTES = 2.0  # bf16 activations on the wire
GRAD_REDUCE_BYTES = 4.0  # Megatron reduces bf16 training gradients in fp32 main-grad buffers
PARAM_GATHER_BYTES = 2.0
# Megatron DDP bucket: max(40M, 1M x dp) parameters; the last bucket's collective cannot overlap.
BUCKET_PARAMS = 40e6
# Adam step per parameter it updates: read fp32 gradient (4), read+write fp32 master, m and v (24), write the bf16
# weight (2), and the gradient-norm pass for clipping (4).
OPTIMIZER_BYTES_PER_PARAM = 34.0
# Megatron's vocab-parallel cross entropy in unfused PyTorch ops: bf16->fp32 cast, max, subtract, exp, sum, log
# and the backward softmax - one-hot, scale and cast: about 9 fp32 reads/writes per logit.
CE_BYTES_PER_LOGIT = 36.0
CE_KERNELS = 12
# Materialized attention, bytes per score: forward fused scale-mask-softmax (read 2, write 2); dropout on the
# probabilities (read 2, write 2, mask 1). Backward: softmax (read 2 + 2, write 2), dropout (read 2 + 1, write 2).
SOFTMAX_FWD_BYTES, SOFTMAX_BWD_BYTES = 4.0, 6.0
DROPOUT_FWD_BYTES, DROPOUT_BWD_BYTES = 5.0, 5.0
# CP ring attention (TE): after each of the c-1 exchange steps the partial output (forward) or the dQ, dK, dV
# accumulators (backward) are corrected in fp32: read + write 4 bytes each per element.
CP_ACCUMULATOR_BYTES = 8.0
# Unfused gradient accumulation (`plan.grad_accumulation_fusion: false`, PyTorch autograd's AccumulateGrad / FSDP
# with fp32 gradients): per parameter per micro-batch the weight-gradient GEMM writes a bf16 gradient (2), a
# separate add reads it (2) and reads and writes the fp32 accumulator (4 + 4). Megatron fuses it into the GEMM.
GRAD_ACCUM_BYTES_PER_PARAM = 12.0
# Memory-bound backward kernels read the saved input and the incoming gradient and write the outgoing one.
POINTWISE_BACKWARD_FACTOR = 2.0


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
    optimizer_s: float = 0.0
    memory_bound_s: float = 0.0
    tp_comm_total_s: float = 0.0
    cp_comm_total_s: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def comm_fraction(self) -> float:
        """Share of the step the GPUs wait on communication or the bubble instead of computing."""
        busy = self.compute_s + self.optimizer_s
        return max(0.0, min(1.0, (self.step_s - busy) / self.step_s)) if self.step_s > 0 else 0.0

    def breakdown(self) -> dict[str, float]:
        return {
            "compute": self.compute_s,
            "compute_memory_bound": self.memory_bound_s,
            "optimizer": self.optimizer_s,
            "tp_comm": self.tp_comm_s,
            "tp_comm_total": self.tp_comm_total_s,
            "cp_comm_exposed": self.cp_comm_s,
            "cp_comm_total": self.cp_comm_total_s,
            "pp_bubble": self.pp_bubble_s,
            "pp_comm": self.pp_comm_s,
            "dp_comm_exposed": self.dp_comm_exposed_s,
            "dp_comm_total": self.dp_comm_s,
        }


@dataclass(frozen=True)
class LayerTimes:
    """Seconds one GPU spends on one transformer layer for one micro-batch."""

    fwd_s: float
    bwd_s: float  # backward, recompute included
    gemm_s: float  # all GEMM time fwd + bwd (what TP overlap can hide behind)
    memory_bound_s: float  # memory-bound part of fwd + bwd
    attn_fwd_s: float  # attention core forward (what a CP exchange hides behind)
    attn_bwd_s: float

    @property
    def total_s(self) -> float:
        return self.fwd_s + self.bwd_s


def _pointwise_fwd_bytes(
    model: ModelConfig, tokens: float, t: int, sequence_parallel: bool
) -> tuple[float, float]:
    """(norm + residual + dropout bytes, activation-function + RoPE bytes) one layer's forward moves."""
    h_bytes = ACT_BYTES * tokens * model.hidden / (t if sequence_parallel else 1)
    norms = 2 * 2.0 * h_bytes  # two norms: read x, write y
    residual = 2 * 3.0 * h_bytes  # two adds: read 2, write 1
    if model.dropout:
        residual += 2 * 1.5 * h_bytes  # extra read + 1-byte mask, fused with the add
    ffn_bytes = ACT_BYTES * tokens * model.ffn_hidden / t
    act = (3.0 if model.mlp == "swiglu" else 2.0) * ffn_bytes
    if model.position == "rope":
        act += 2.0 * ACT_BYTES * tokens * (model.hidden + kv_hidden(model)) / t
    return norms + residual, act


def layer_times(
    model: ModelConfig, plan: PlanConfig, kernels: Kernels, micro_batch: int, t: int, c: int
) -> LayerTimes:
    """Forward and backward seconds of one layer for one micro-batch on one GPU of a (tp=t, cp=c) group."""
    s, h, d = model.seq_len, model.hidden, head_dim(model)
    tokens = micro_batch * s / c
    kv = kv_hidden(model)
    up = (2 if model.mlp == "swiglu" else 1) * model.ffn_hidden
    shapes = [
        (tokens, (h + 2 * kv) / t, h),
        (tokens, h, h / t),
        (tokens, up / t, h),
        (tokens, h, model.ffn_hidden / t),
    ]
    gemm_f = gemm_b = 0.0
    for m, n, k in shapes:
        f, b = kernels.gemm_fwd_bwd_s(m, n, k)
        gemm_f, gemm_b = gemm_f + f, gemm_b + b

    heads = max(1.0, model.heads / t)
    if plan.attention == "flash":
        imbalance = 1.0 if (c == 1 or plan.cp_load_balance) else 2.0 - 1.0 / c
        fwd_flops = 2.0 * micro_batch * heads * (s / c) * s * d * imbalance  # causal half of 4 s_q s d
        block = s / (2 * c) if (c > 1 and plan.cp_load_balance) else s / c
        attn_f, attn_b = kernels.flash_attention_s(fwd_flops, block, d)
        attn_mem_f = attn_mem_b = 0.0
        if c > 1 and plan.cp_comm == "ring":  # ring steps merge partial results: fp32 output / dQ, dK, dV
            steps = c - 1
            attn_mem_f = steps * CP_ACCUMULATOR_BYTES * tokens * h / t
            attn_mem_b = steps * CP_ACCUMULATOR_BYTES * tokens * (h + 2 * kv) / t
            attn_f += kernels.memory_s(attn_mem_f)
            attn_b += kernels.memory_s(attn_mem_b)
    else:  # materialized: full s x s scores, batched GEMMs with K = head dim (QK^T) or s (AV)
        batch = max(1, round(micro_batch * heads))
        sq = s / c
        qk, av = kernels.gemm_s(sq, s, d, batch), kernels.gemm_s(sq, d, s, batch)
        scores = micro_batch * heads * sq * s
        attn_mem_f = scores * (SOFTMAX_FWD_BYTES + (DROPOUT_FWD_BYTES if model.dropout else 0.0))
        attn_mem_b = scores * (SOFTMAX_BWD_BYTES + (DROPOUT_BWD_BYTES if model.dropout else 0.0))
        attn_f = qk + av + kernels.memory_s(attn_mem_f)
        attn_b = (
            kernels.gemm_s(sq, s, d, batch)
            + kernels.gemm_s(s, d, sq, batch)
            + kernels.gemm_s(sq, d, s, batch)
            + kernels.gemm_s(s, d, sq, batch)
            + kernels.memory_s(attn_mem_b)
        )

    # Kernel launches per layer (each pays the family's inter-kernel gap): 4 GEMMs forward, 8 backward; flash
    # attention 1 + 2 per extra CP ring step each way; materialized 2 batched GEMMs + softmax (+ dropout) forward,
    # 4 + 1 (+ 1) backward; pointwise: 2 norms, 2 residual adds, the activation and RoPE forward, the same backward
    # plus 2 norm-weight reductions.
    if plan.attention == "flash" and plan.cp_comm == "all_gather":
        attn_kernels_f = attn_kernels_b = 2 if (c > 1 and plan.cp_load_balance) else 1  # one per local chunk
    elif plan.attention == "flash":
        attn_kernels_f = attn_kernels_b = 1 + 2 * (c - 1)
    else:
        attn_kernels_f, attn_kernels_b = 3 + int(model.dropout), 5 + int(model.dropout)
    pw_kernels = 5 + int(model.position == "rope")
    attn_f += attn_kernels_f * kernels.gap_s
    attn_b += attn_kernels_b * kernels.gap_s
    gemm_f += 4 * kernels.gap_s
    gemm_b += 8 * kernels.gap_s

    norm_res, act = _pointwise_fwd_bytes(model, tokens, t, plan.sequence_parallel)
    pw_mem_f = kernels.memory_s(norm_res + act)
    pw_f = pw_mem_f + pw_kernels * kernels.gap_s
    pw_b = POINTWISE_BACKWARD_FACTOR * pw_mem_f + (pw_kernels + 2) * kernels.gap_s
    fwd = gemm_f + attn_f + pw_f
    recompute = 0.0
    if plan.recompute == "full":
        recompute = fwd
    else:
        if plan.recompute == "selective":
            recompute += attn_f
        if plan.recompute_pointwise:
            recompute += pw_f
    mem_bound = (1.0 + POINTWISE_BACKWARD_FACTOR) * pw_mem_f + kernels.memory_s(attn_mem_f + attn_mem_b)
    if plan.recompute == "full":
        mem_bound += pw_mem_f + kernels.memory_s(attn_mem_f)
    elif plan.recompute_pointwise:
        mem_bound += pw_mem_f
    gemm_total = gemm_f + gemm_b + (gemm_f if plan.recompute == "full" else 0.0)
    return LayerTimes(
        fwd_s=fwd,
        bwd_s=gemm_b + attn_b + pw_b + recompute,
        gemm_s=gemm_total,
        memory_bound_s=mem_bound,
        attn_fwd_s=attn_f,
        attn_bwd_s=attn_b,
    )


def logits_times(
    model: ModelConfig, kernels: Kernels, micro_batch: int, t: int, c: int
) -> tuple[float, float]:
    """(seconds, memory-bound seconds) of the output layer and cross entropy, fwd + bwd, for one micro-batch."""
    tokens = micro_batch * model.seq_len / c
    f, b = kernels.gemm_fwd_bwd_s(tokens, model.vocab / t, model.hidden)
    ce = kernels.memory_s(CE_BYTES_PER_LOGIT * tokens * model.vocab / t)
    return f + b + ce + CE_KERNELS * kernels.gap_s, ce


def _tp_layer_s(
    model: ModelConfig, plan: PlanConfig, micro_batch: int, t: int, c: int, fabric: Fabric
) -> float:
    """TP collective seconds per layer per micro-batch (all of them, before any overlap)."""
    if t <= 1:
        return 0.0
    act_bytes = micro_batch * (model.seq_len / c) * model.hidden * ACT_BYTES
    n_collectives = 12 if plan.recompute == "full" else 8  # reduce-scatter-sized halves of all-reduces
    return n_collectives * reduce_scatter_s(act_bytes, place_group(t, 1, fabric), fabric)


class StepModel:
    """The step-time model of one (model, plan, accelerator, fabric), memoising what many layouts share (layer
    times by micro-batch, tp and cp; parameters by stage split; group placements), so a layout search pays
    only for what differs."""

    def __init__(self, model: ModelConfig, plan: PlanConfig, kernels: Kernels, fabric: Fabric) -> None:
        self.model, self.plan, self.kernels, self.fabric = model, plan, kernels, fabric
        self._cache: dict[tuple, object] = {}

    def _memo(self, key: tuple, make):
        try:
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = make()
            return value

    def layer(self, b: int, t: int, c: int) -> LayerTimes:
        return self._memo(
            ("layer", b, t, c), lambda: layer_times(self.model, self.plan, self.kernels, b, t, c)
        )

    def logits(self, b: int, t: int, c: int) -> tuple[float, float]:
        return self._memo(("logits", b, t, c), lambda: logits_times(self.model, self.kernels, b, t, c))

    def params_gpu(self, p: int, v: int, t: int) -> float:
        return self._memo(
            ("params", p, v, t),
            lambda: stage_parameters(self.model, split_layers(self.model.layers, p, v), p) / t,
        )

    def group(self, size: int, stride: int) -> Placement:
        return self._memo(("group", size, stride), lambda: place_group(size, stride, self.fabric))

    def comm(self, b: int, t: int, c: int) -> tuple[float, float, float, float, tuple[str, ...]]:
        """(TP seconds, TP exposed, CP seconds, CP exposed) per layer per micro-batch, and notes."""
        return self._memo(("comm", b, t, c), lambda: self._comm(b, t, c))

    def _comm(self, b: int, t: int, c: int) -> tuple[float, float, float, float, tuple[str, ...]]:
        model, plan, fabric = self.model, self.plan, self.fabric
        lt = self.layer(b, t, c)
        notes: list[str] = []
        tp_layer = _tp_layer_s(model, plan, b, t, c, fabric)
        if t > 1 and self.group(t, 1).crosses_domain:
            notes.append(f"tp={t} crosses the NVLink domain: TP traffic priced on the scale-out network")
        tp_exposed = tp_layer
        if plan.overlap.tp and tp_layer > 0:
            # Userbuffers split each collective into t chunks pipelined with the GEMMs: the first is exposed.
            tp_exposed = max(tp_layer - lt.gemm_s, 0.0) + tp_layer / t
        cp_layer = cp_exposed = 0.0
        if c > 1 and plan.cp_comm == "all_gather":
            # Llama 3's CP: all-gather K and V before attention (and again to recompute / run the backward), then
            # reduce-scatter dK and dV; nothing hides it ("exposed in the critical path", §3.3.2), GQA keeps it small.
            cp_group = self.group(c, t)
            kv_local = head_dim(model) * max(1.0, model.kv_heads / t)
            gathered = 2.0 * b * model.seq_len * kv_local * ACT_BYTES  # K and V of the whole sequence
            one = all_gather_s(gathered, cp_group, fabric)
            collectives = 3 + (1 if plan.recompute in ("selective", "full") else 0)
            cp_layer = cp_exposed = collectives * one
            if cp_group.crosses_domain:
                notes.append(
                    f"tp x cp = {t * c} spans more than one NVLink domain: the CP all-gather uses the NIC"
                )
        elif c > 1:
            cp_group = self.group(c, t)
            kv_local = head_dim(model) * max(1.0, model.kv_heads / t)
            block_bytes = 2.0 * b * (model.seq_len / c) * kv_local * ACT_BYTES  # K and V of one chunk
            hop_s = p2p_s(block_bytes, cp_group, fabric)
            steps = c - 1
            # Each ring step's exchange hides behind the attention of the block computed meanwhile (1/c of it).
            cp_layer = steps * 3.0 * hop_s  # forward K,V; backward K,V and dK,dV
            fwd_block, bwd_block = lt.attn_fwd_s / c, lt.attn_bwd_s / c
            cp_exposed = steps * (max(0.0, hop_s - fwd_block) + max(0.0, 2.0 * hop_s - bwd_block))
            if plan.recompute in ("selective", "full"):
                cp_layer += steps * hop_s
                cp_exposed += steps * max(0.0, hop_s - fwd_block)
            if cp_group.crosses_domain:
                notes.append(
                    f"tp x cp = {t * c} spans more than one NVLink domain: CP K/V exchange uses the NIC"
                )
        if c > 1 and not plan.cp_load_balance:
            notes.append(
                f"cp={c} without load balancing: the last CP rank does {2 - 1 / c:.2f}x the mean "
                "causal attention work"
            )
        return tp_layer, tp_exposed, cp_layer, cp_exposed, tuple(notes)

    def lower_bound_s(self, layout: LayoutShape, micro_batch: int, micro_batches: int) -> float:
        """A cheap bound no step of this layout can beat: the busiest rank's layers with their exposed TP and CP
        time, and the bubble that adds; no logits, PP p2p, DP or optimizer time."""
        p, v = layout.pp, layout.vpp
        most = split_layers(self.model.layers, p, v).most
        _, tp_exposed, _, cp_exposed, _ = self.comm(micro_batch, layout.tp, layout.cp)
        mb = most * (self.layer(micro_batch, layout.tp, layout.cp).total_s + tp_exposed + cp_exposed)
        return mb * (micro_batches + (p - 1) / v)

    def estimate(self, layout: LayoutShape, micro_batch: int, micro_batches: int) -> StepEstimate:
        """Time of one optimizer step (seconds) with its parts, for `micro_batches` micro-batches per pipeline."""
        model, plan, fabric = self.model, self.plan, self.fabric
        t, p, d, c, v = layout.tp, layout.pp, layout.dp, layout.cp, layout.vpp
        m = micro_batches
        split = split_layers(model.layers, p, v)
        lt = self.layer(micro_batch, t, c)
        logits_s, ce_mem_s = self.logits(micro_batch, t, c)
        tp_layer, tp_exposed, cp_layer, cp_exposed, comm_notes = self.comm(micro_batch, t, c)
        notes = list(comm_notes)

        # The slowest pipeline rank: the first holds the embedding, the last the output layer and cross entropy.
        per_layer_s = lt.total_s + tp_exposed + cp_exposed
        if p > 1:
            ranks = [(split.first, 0.0), (split.middle, 0.0), (split.last, logits_s)]
            layers, extra = max(ranks, key=lambda r: r[0] * per_layer_s + r[1])
        else:
            layers, extra = model.layers, logits_s
        params_gpu = self.params_gpu(p, v, t)
        accum_s = (
            0.0
            if plan.grad_accumulation_fusion
            else self.kernels.memory_s(GRAD_ACCUM_BYTES_PER_PARAM * params_gpu)
        )
        mb_compute_s = layers * lt.total_s + extra + accum_s
        mb_stage_s = mb_compute_s + layers * (tp_exposed + cp_exposed)
        compute_s = m * mb_compute_s
        memory_bound_s = m * (layers * lt.memory_bound_s + (ce_mem_s if extra else 0.0) + accum_s)
        tp_comm_s, cp_comm_s = m * layers * tp_exposed, m * layers * cp_exposed
        pp_bubble_s = (p - 1) / v * mb_stage_s if p > 1 else 0.0

        # PP p2p: warm-up and cool-down cross p*v - 1 chunk boundaries each way; without overlap every
        # micro-batch's send/recv pair also sits on the critical path. Megatron's scatter-gather sends 1/t.
        pp_comm_s = 0.0
        if p > 1:
            act_bytes = micro_batch * (model.seq_len / c) * model.hidden * ACT_BYTES
            hop = p2p_s(act_bytes / t, self.group(p, t * c), fabric)
            pp_comm_s = 2.0 * (p * v - 1) * hop
            if not (v > 1 and plan.overlap.pp_p2p):
                pp_comm_s += 2.0 * m * hop

        # DP (and CP: Megatron reduces gradients over dp x cp) on the stage's gradient shard.
        dp_group = self.group(d, t * c * p)
        cp_grad_group = self.group(c, t)
        zero = plan.zero_stage

        def shard_rs(bytes_: float) -> float:
            return reduce_scatter_s(bytes_, cp_grad_group, fabric) + reduce_scatter_s(
                bytes_ / c, dp_group, fabric
            )

        grad_s = gather_s = 0.0
        if d * c > 1:
            if zero == 0:
                grad_s = 2.0 * shard_rs(params_gpu * GRAD_REDUCE_BYTES)
            elif zero == 1:
                grad_s = shard_rs(params_gpu * GRAD_REDUCE_BYTES)
                gather_s = shard_rs(params_gpu * PARAM_GATHER_BYTES)
            elif zero == 2:
                grad_s, gather_s = shard_rs(params_gpu * 2.0), shard_rs(params_gpu * PARAM_GATHER_BYTES)
            else:  # ZeRO-3: weights gathered for forward and backward of every micro-batch, gradients once
                grad_s, gather_s = (
                    shard_rs(params_gpu * 2.0),
                    2.0 * m * shard_rs(params_gpu * PARAM_GATHER_BYTES),
                )
        tail = min(1.0, max(BUCKET_PARAMS, 1e6 * d) / max(params_gpu, 1.0))
        mb_bwd_s = layers * (lt.bwd_s + tp_exposed * 0.5)
        mb_fwd_s = layers * lt.fwd_s
        grad_exposed = (
            (max(grad_s - mb_bwd_s, 0.0) + tail * grad_s) if plan.overlap.dp_grad_reduce else grad_s
        )
        if zero == 3:
            gather_exposed = max(gather_s - compute_s, 0.0) + tail * gather_s / (2 * m)
        elif plan.overlap.dp_param_gather:
            gather_exposed = max(gather_s - mb_fwd_s, 0.0) + tail * gather_s
        else:
            gather_exposed = gather_s
        dp_comm_s = grad_s + gather_s
        dp_comm_exposed_s = min(dp_comm_s, grad_exposed + gather_exposed)
        if dp_group.crosses_pod:
            notes.append(
                f"the dp={d} group spans {dp_group.pods} pods: its cross-pod ring runs at "
                f"nic/oversubscription = {fabric.nic_gb_per_s / fabric.oversubscription:.1f} GB/s per GPU"
            )

        updated = params_gpu / (d * c) if zero >= 1 else params_gpu
        optimizer_s = self.kernels.memory_s(OPTIMIZER_BYTES_PER_PARAM * updated)

        step_s = compute_s + tp_comm_s + cp_comm_s + pp_bubble_s + pp_comm_s + dp_comm_exposed_s + optimizer_s
        return StepEstimate(
            step_s=step_s,
            compute_s=compute_s,
            tp_comm_s=tp_comm_s,
            cp_comm_s=cp_comm_s,
            pp_bubble_s=pp_bubble_s,
            pp_comm_s=pp_comm_s,
            dp_comm_s=dp_comm_s,
            dp_comm_exposed_s=dp_comm_exposed_s,
            optimizer_s=optimizer_s,
            memory_bound_s=memory_bound_s,
            tp_comm_total_s=m * layers * tp_layer,
            cp_comm_total_s=m * layers * cp_layer,
            notes=tuple(notes),
        )


def estimate_step(
    model: ModelConfig,
    layout: LayoutConfig,
    plan: PlanConfig,
    *,
    micro_batch: int,
    micro_batches: int,
    kernels: Kernels,
    fabric: Fabric,
) -> StepEstimate:
    """Time of one optimizer step (seconds) with its parts, for `micro_batches` micro-batches per pipeline."""
    return StepModel(model, plan, kernels, fabric).estimate(layout, micro_batch, micro_batches)


def step_time_s(config: CampaignConfig) -> float:
    """Seconds per optimizer step for the config's own layout."""
    plan = config.plan
    return estimate_step(
        config.model,
        plan.layout,
        plan,
        micro_batch=plan.micro_batch,
        micro_batches=config.micro_batches,
        kernels=Kernels.from_accelerator(config.cluster.accelerator, plan.attention_kernel),
        fabric=Fabric.from_cluster(config.cluster),
    ).step_s

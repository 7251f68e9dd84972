"""Performance and memory models against published training runs (shared/reference/perf-model.md §3).

GPT reference models (Megatron 2021, Korthikanti 2022, Megatron-Core 2024) have a 4h GeLU MLP, multi-head
attention and a tied embedding: ModelConfig(ffn_hidden=4h, kv_heads=heads) with evaluate_layout(gated_mlp=False,
tied_embeddings=True). Step times use ONE kernel efficiency for every row (REF_KERNEL_EFFICIENCY), never per row.
"""

import pytest

from campaign.config import CampaignConfig, LayoutConfig, ModelConfig, load_config, parameter_count
from campaign.plan import estimate_memory, evaluate_layout, make_plan
from campaign.plan.flops import (
    hardware_flops_per_token,
    layer_parameters,
    model_flops_per_token,
    narayanan_flops_per_iteration,
)
from campaign.plan.memory import GIB, model_state_bytes_per_param, split_layers
from tests.paths import DEMO, LLAMA

# The single kernel efficiency used for all published step times below (A100 and H100 alike). It is a fit
# to no particular row: 0.6 puts the large-model rows of all three tables inside +-25 %.
REF_KERNEL_EFFICIENCY = 0.60

# Selene (DGX A100): SimAI's effective NVLink3 busbw and HDR 200 Gb/s per GPU; H100: NVLink4 and 400G NDR.
A100 = {"peak": 312.0, "nvlink": 240.0, "nic": 23.5}
H100 = {"peak": 989.0, "nvlink": 370.8, "nic": 48.5}


def gpt_model(h, layers, heads, seq=2048, vocab=51200):
    return ModelConfig(name="gpt", layers=layers, hidden=h, heads=heads, kv_heads=heads, ffn_hidden=4 * h,
                       vocab=vocab, seq_len=seq)


def gpt_campaign(h, layers, heads, tp, pp, dp, batch, *, vpp=1, recompute="selective", seq=2048, vocab=51200,
                 hw=A100, micro_batch=1):
    base = load_config(DEMO).config.model_dump(mode="json", by_alias=True)
    gpus = tp * pp * dp
    cluster = dict(base["cluster"], nodes=max(1, gpus // 8), gpus_per_node=min(8, gpus))
    cluster["accelerator"] = dict(cluster["accelerator"], peak_bf16_tflops=hw["peak"])
    cluster["network"] = dict(cluster["network"], nvlink_gb_per_s=hw["nvlink"], nic_gb_per_s=hw["nic"],
                              pod_gpus=8192, oversubscription=1)
    plan = dict(base["plan"], layout={"tp": tp, "pp": pp, "dp": dp, "cp": 1, "vpp": vpp}, micro_batch=micro_batch,
                global_batch_tokens=batch * seq, recompute=recompute, kernel_efficiency=REF_KERNEL_EFFICIENCY,
                zero_stage=1)
    model = gpt_model(h, layers, heads, seq, vocab).model_dump(mode="json")
    return CampaignConfig.model_validate(dict(base, cluster=cluster, model=model, plan=plan))


def gpt_plan(cfg):
    return evaluate_layout(cfg, cfg.plan.layout, gated_mlp=False, tied_embeddings=True)


# ------------------------------------------------------------------ (1) Megatron-LM 2021 FLOPs (§3.1)

# h, l, heads, TP, PP, DP, B, TFLOP/s per GPU, % of peak, derived iteration s, derived MFU
MEGATRON_2021 = [
    (2304, 24, 24, 1, 1, 32, 512, 137, 0.44, 3.53, 0.335),
    (3072, 30, 32, 2, 1, 32, 512, 138, 0.44, 3.70, 0.335),
    (4096, 36, 32, 4, 1, 32, 512, 142, 0.46, 3.70, 0.344),
    (6144, 40, 48, 8, 1, 32, 1024, 135, 0.43, 9.40, 0.326),
    (8192, 48, 64, 8, 2, 32, 1536, 138, 0.44, 14.45, 0.333),
    (10240, 60, 80, 8, 4, 32, 1792, 140, 0.45, 16.06, 0.337),
    (12288, 80, 96, 8, 8, 24, 2304, 148, 0.47, 24.82, 0.356),
    (16384, 96, 128, 8, 16, 15, 2160, 155, 0.50, 37.61, 0.373),
    (20480, 105, 128, 8, 35, 9, 2520, 163, 0.52, 54.08, 0.392),
    (25600, 128, 160, 8, 64, 6, 3072, 163, 0.52, 102.63, 0.392),
]


@pytest.mark.parametrize("row", MEGATRON_2021, ids=[f"h{r[0]}" for r in MEGATRON_2021])
def test_megatron2021_flops_per_iteration(row):
    """Our full-recompute hardware FLOPs in the non-causal (paper) convention equal Narayanan's 96 B s l h^2 (...)
    and give the derived iteration time (tolerance 1 %); model/hardware FLOPs give the MFU-to-HFU relation
    (published % of peak x 72/96 form = derived MFU, tolerance 3 %)."""
    h, l, a, tp, pp, dp, batch, tflops, pct_peak, iter_s, mfu = row
    model = gpt_model(h, l, a)
    tokens = batch * 2048
    ours_hw = tokens * hardware_flops_per_token(model, "full", gated_mlp=False, causal=False)
    assert ours_hw == pytest.approx(narayanan_flops_per_iteration(batch, 2048, l, h, 51200), rel=1e-9)
    assert ours_hw / (tflops * 1e12 * tp * pp * dp) == pytest.approx(iter_s, rel=0.01)
    ratio = model_flops_per_token(model, gated_mlp=False, causal=False) / hardware_flops_per_token(
        model, "full", gated_mlp=False, causal=False)
    assert tflops / 312.0 * ratio == pytest.approx(mfu, rel=0.03)
    assert tflops / 312.0 == pytest.approx(pct_peak, abs=0.006)


def test_causal_convention_counts_fewer_attention_flops():
    """Our MFU convention (causal, Megatron-Core) is below the paper's by 6lhs per token: 0.7 % for 1T at s = 2048,
    6.0 % for the 1.7B model (s/6h = 0.15)."""
    model = gpt_model(25600, 128, 160)
    causal = model_flops_per_token(model, gated_mlp=False)
    paper = model_flops_per_token(model, gated_mlp=False, causal=False)
    assert paper - causal == pytest.approx(6 * 128 * 25600 * 2048)
    assert causal / paper == pytest.approx(0.9934, abs=5e-4)
    small = gpt_model(2304, 24, 24)
    ratio = model_flops_per_token(small, gated_mlp=False) / model_flops_per_token(small, gated_mlp=False, causal=False)
    assert ratio == pytest.approx(0.9396, abs=5e-4)


# ------------------------------------------------------ (2) Korthikanti et al. 2022 memory, Fig. 1 (§3.2)

# h, l, heads, TP, PP, vpp, micro-batch, global batch, params+optimizer GiB, SP+selective activations GiB
KORTHIKANTI_FIG1 = [
    (6144, 48, 64, 8, 1, 1, 4, 4, 45.56, 9.56),
    (12288, 96, 96, 8, 8, 3, 1, 64, 45.56, 12.35),
    (20480, 105, 128, 8, 35, 3, 1, 280, 31.64, 23.08),
    (25600, 128, 160, 8, 64, 1, 1, 512, 32.96, 26.56),
]


@pytest.mark.parametrize("row", KORTHIKANTI_FIG1, ids=["22B", "175B", "530B", "1T"])
def test_korthikanti_fig1_memory(row):
    """Parameters + optimizer at 18 B/param of a pipeline stage's transformer layers (Fig. 1 leaves out the
    embedding: it matches N_transformer/(p t) x 18), tolerance 2 %; SP + selective activations on the first stage
    (layers x micro-batches in flight, interleave factor), tolerance 2 %."""
    h, l, a, tp, pp, vpp, b, batch, states_gib, act_gib = row
    model = gpt_model(h, l, a)
    split = split_layers(l, pp, vpp)
    per_param = sum(model_state_bytes_per_param(1, 1).values())
    assert per_param == 18.0
    stage_states = split.middle * layer_parameters(model, gated_mlp=False) / tp * per_param / GIB
    assert stage_states == pytest.approx(states_gib, rel=0.02)
    mem = estimate_memory(model, tp=tp, pp=pp, dp=1, cp=1, vpp=vpp, micro_batch=b, micro_batches=batch // b,
                          zero_stage=1, recompute="selective", gated_mlp=False, tied_embeddings=True)
    assert mem.activations / GIB == pytest.approx(act_gib, rel=0.02)


def test_korthikanti_22b_most_loaded_stage_includes_embedding():
    """With pp = 1 the one stage holds the embedding too; still within 2 % of Fig. 1's 45.56 GiB."""
    mem = estimate_memory(gpt_model(6144, 48, 64), tp=8, pp=1, dp=1, cp=1, vpp=1, micro_batch=4, micro_batches=1,
                          zero_stage=1, recompute="selective", gated_mlp=False, tied_embeddings=True)
    assert (mem.weights + mem.gradients + mem.optimizer) / GIB == pytest.approx(45.56, rel=0.02)


# ------------------------------------------------------------------------ (3) step times, one efficiency

# Korthikanti Table 5 (A100, DP = 1): h, l, heads, TP, PP, vpp, B, full-recompute s, SP+selective s
KORTHIKANTI_T5 = [
    (6144, 48, 64, 8, 1, 1, 4, 1.42, 1.10),
    (12288, 96, 96, 8, 8, 3, 64, 18.13, 13.75),
    (20480, 105, 128, 8, 35, 3, 280, 49.05, 37.83),
    (25600, 128, 160, 8, 64, 1, 512, 94.42, 71.49),
]


@pytest.mark.parametrize("row", KORTHIKANTI_T5, ids=["22B", "175B", "530B", "1T"])
@pytest.mark.parametrize("recompute", ["full", "selective"])
def test_korthikanti_table5_step_times(row, recompute):
    """Tolerance +-22 % (measured with 0.60: -16 % (22B) to +19 % (1T); the model is pessimistic for the largest
    pipelines, whose bubble it charges in full, and optimistic for the single-node 22B)."""
    h, l, a, tp, pp, vpp, batch, full_s, sel_s = row
    plan = gpt_plan(gpt_campaign(h, l, a, tp, pp, 1, batch, vpp=vpp, recompute=recompute))
    assert plan.step_time_s == pytest.approx(full_s if recompute == "full" else sel_s, rel=0.22)


@pytest.mark.parametrize("row", MEGATRON_2021, ids=[f"h{r[0]}" for r in MEGATRON_2021])
def test_megatron2021_step_times(row):
    """Derived iteration times (full recompute). Tolerance +-20 % for models of 18B and up (measured -9 % to +9 %);
    the 1.7B-7.5B rows are optimistic by 14-31 % (one kernel efficiency cannot capture that small GEMMs run far
    below peak), tolerance -35 %/+20 % there."""
    h, l, a, tp, pp, dp, batch, _, _, iter_s, _ = row
    plan = gpt_plan(gpt_campaign(h, l, a, tp, pp, dp, batch, recompute="full"))
    ratio = plan.step_time_s / iter_s
    low = 0.80 if h >= 6144 else 0.65
    assert low <= ratio <= 1.20


# Megatron-Core 2024 on H100 (V = 131,072, s = 4096): heads, h, l, TP, PP, DP, B, derived iteration s (causal)
MCORE_H100 = [
    (16, 2048, 24, 1, 1, 48, 192, 0.40),
    (32, 4096, 30, 2, 1, 48, 192, 0.75),
    (48, 6144, 32, 4, 1, 48, 192, 0.81),
    (56, 7168, 48, 8, 1, 48, 192, 0.85),
    (64, 8192, 84, 8, 2, 48, 384, 2.09),
    (80, 10240, 92, 8, 4, 48, 768, 3.53),
    (96, 12288, 96, 8, 6, 48, 1152, 5.12),
    (128, 16384, 96, 8, 8, 48, 1536, 8.23),
    (144, 18432, 112, 8, 16, 48, 3072, 12.49),
]


@pytest.mark.parametrize("row", MCORE_H100, ids=[f"h{r[1]}" for r in MCORE_H100])
def test_megatron_core_h100_step_times(row):
    """Selective recompute, no TP-comm overlap in our model (Megatron-Core overlaps TP and DP communication).
    Tolerance +-25 % for 16B-462B except 32B; measured -25 % (1.7B) to +23 % (314B), and +37 % for 32B (TP8 x DP48
    with m = 4: our DP overlap window is one micro-batch, the table's overlapped run hides more). Tolerance
    -30 %/+40 % for those two rows."""
    a, h, l, tp, pp, dp, batch, iter_s = row
    cfg = gpt_campaign(h, l, a, tp, pp, dp, batch, seq=4096, vocab=131072, hw=H100)
    plan = evaluate_layout(cfg, cfg.plan.layout, gated_mlp=False, tied_embeddings=False)
    ratio = plan.step_time_s / iter_s
    low, high = (0.70, 1.40) if h in (2048, 7168) else (0.75, 1.25)
    assert low <= ratio <= high


# ----------------------------------------------------------------------------- (4) Llama 3 405B (§3.3)


def test_llama3_parameter_count():
    """405B (+-1 %)."""
    cfg = load_config(LLAMA).config
    assert parameter_count(cfg.model) == pytest.approx(405e9, rel=0.01)
    assert make_plan(cfg).parameters == parameter_count(cfg.model)


def test_llama3_mfu_in_published_band():
    """Llama 3 Table 4: 38-43 % BF16 MFU; the config's kernel_efficiency 0.55; tolerance +-3 points."""
    plan = make_plan(load_config(LLAMA).config)
    assert 0.35 <= plan.mfu <= 0.46


def test_llama3_memory_fits_80_gib_with_sharded_gradients():
    """Llama 3 §3.3.2: FSDP shards optimizer states and gradients (ZeRO-2-like): fits in 80 GiB.

    With ZeRO-1 (Megatron's fp32 main gradients unsharded, 4 B/param) the same layout needs ~80 GiB: the
    published layout is at the edge of an H100 under Megatron's activation accounting."""
    zero2 = make_plan(load_config(LLAMA, ["plan.zero_stage=2"]).config)
    assert zero2.memory_gib_per_gpu <= 80.0
    assert not [v for v in zero2.violations if v.rule == "memory"]
    zero1 = make_plan(load_config(LLAMA).config)
    assert zero1.memory_gib_per_gpu == pytest.approx(zero2.memory_gib_per_gpu + zero1.memory_breakdown_gib["gradients"]
                                                     - zero2.memory_breakdown_gib["gradients"], rel=1e-9)


def test_llama3_campaign_length_matches_reported_gpu_hours():
    """Llama 3.1 model card: 30.84M H100 GPU-hours for 405B pre-training = 78.4 days on 16,384 GPUs (the card's
    figure; not in shared/reference). Expected days for the whole 15.6T tokens (§3.1) within +-15 % (the GPU-hours
    include more than the main run). The shipped config targets only what its 54-day window trains."""
    plan = make_plan(load_config(LLAMA, ["plan.target_tokens=15.6e12"]).config)
    assert plan.expected_days == pytest.approx(30.84e6 / 16384 / 24, rel=0.15)


def test_llama3_plan_layout_is_legal():
    plan = make_plan(load_config(LLAMA).config)
    assert not [v for v in plan.violations if v.rule == "layout"]
    assert plan.layout == {"tp": 8, "pp": 16, "dp": 128, "cp": 1, "vpp": 8}
    assert any("Llama 3 split" in n for n in plan.notes)


def test_gpt_campaign_fixture_is_what_the_tables_describe():
    cfg = gpt_campaign(25600, 128, 160, 8, 64, 6, 3072, recompute="full")
    assert cfg.plan.layout == LayoutConfig(tp=8, pp=64, dp=6, cp=1)
    assert cfg.cluster.gpus == 3072 and cfg.micro_batches == 512

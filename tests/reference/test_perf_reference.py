"""Performance and memory models against published training runs (shared/reference/perf-model.md §3).

The rows, their configs and each publication's metric live in tests/oracles/published_runs.py; the accelerator
calibration they use is the shipped one (configs/accelerators/*.yaml, fitted by benchmarks/plan/calibrate.py on
the Megatron-LM 2021 and Megatron-Core 2024 tables only; Korthikanti 2022 Table 5 is out of sample).
Errors are in points of the publication's own metric (% of peak with its FLOP convention).
"""

import statistics

import pytest

from campaign.config import LayoutConfig, ModelConfig, load_config
from campaign.plan import estimate_memory, evaluate_layout, make_plan
from campaign.plan.flops import (
    hardware_flops_per_token,
    layer_parameters,
    megatron_core_2024_flops_per_iteration,
    model_flops_per_token,
    narayanan_flops_per_iteration,
    palm_flops_per_token,
    parameter_count,
)
from campaign.plan.memory import GIB, model_state_bytes_per_param, split_layers
from tests.helpers.paths import LLAMA
from tests.oracles.published_runs import (
    KORTHIKANTI_T5,
    MCORE_2024,
    MEGATRON_2021,
    PublishedRun,
    all_runs,
    korthikanti_2022,
    mcore_2024,
    megatron_2021,
)


def gpt_model(h, layers, heads, seq=2048, vocab=51200, **family):
    spec = {"mlp": "gelu", "tied_embeddings": True, "position": "learned", "dropout": True, **family}
    return ModelConfig(
        name="gpt",
        layers=layers,
        hidden=h,
        heads=heads,
        kv_heads=heads,
        ffn_hidden=4 * h,
        vocab=vocab,
        seq_len=seq,
        **spec,
    )


# ------------------------------------------------------------------ (1) FLOP conventions, as each paper states


@pytest.mark.parametrize("row", MEGATRON_2021, ids=[r[0] for r in MEGATRON_2021])
def test_megatron2021_flops_are_the_papers_formula(row):
    """Our full-recompute hardware FLOPs in the non-causal convention equal Narayanan's 96 B s l h^2 (1 + s/6h +
    V/16lh) (rel 1e-9), our model FLOPs its 72 form, and the published TFLOP/s give the derived iteration time."""
    _, h, l, a, _, _, _, batch, _ = row
    model = gpt_model(h, l, a)
    tokens = batch * 2048
    assert tokens * hardware_flops_per_token(model, "full", causal=False) == pytest.approx(
        narayanan_flops_per_iteration(batch, 2048, l, h, 51200), rel=1e-9
    )
    assert tokens * model_flops_per_token(model, causal=False) == pytest.approx(
        narayanan_flops_per_iteration(batch, 2048, l, h, 51200, full_recompute=False), rel=1e-9
    )


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_megatron_core_2024_formula_is_the_non_causal_convention(mlp):
    """The 2024 `num_floating_point_operations` (README table) counts attention without the causal halving: it
    equals our non-causal model FLOPs, and is above the causal (today's) count by 6 l h s per token."""
    model = ModelConfig(
        name="m",
        layers=48,
        hidden=7168,
        heads=56,
        kv_heads=8,
        ffn_hidden=4 * 7168,
        vocab=131072,
        seq_len=4096,
        mlp=mlp,
    )
    tokens = 192 * 4096
    stated = megatron_core_2024_flops_per_iteration(model, 192)
    assert tokens * model_flops_per_token(model, causal=False) == pytest.approx(stated, rel=1e-9)
    causal = tokens * model_flops_per_token(model)
    assert stated - causal == pytest.approx(tokens * 6 * 48 * 7168 * 4096, rel=1e-9)


def test_mcore_2024_targets_use_the_non_causal_convention():
    """The table's TFLOP/s are non-causal model FLOPs, so its iteration times are 3-12 % longer than a causal
    count would derive (0.45 / 0.40 s for 1.7B, 12.72 / 12.49 s for 462B)."""
    runs = {r.name: r for r in mcore_2024()}
    assert runs["1.7B"].step_s() == pytest.approx(0.45, abs=0.01)
    assert runs["462B"].step_s() == pytest.approx(12.72, abs=0.03)
    assert runs["32B"].step_s() == pytest.approx(0.89, abs=0.01)


def test_model_family_parameters():
    """GPT-3 175B as a plain config (GeLU, tied, learned positions) is 174.6B (GPT-3 paper: 175.0B incl. biases,
    within 0.3 %); the same shapes as Llama (SwiGLU of 4h, untied, RoPE) would be 50 % larger in the MLP."""
    gpt3 = gpt_model(12288, 96, 96)
    assert parameter_count(gpt3) == pytest.approx(175.0e9, rel=0.003)
    swiglu = gpt_model(12288, 96, 96, mlp="swiglu", tied_embeddings=False, position="rope")
    assert layer_parameters(swiglu) - layer_parameters(gpt3) == 12288 * 4 * 12288


def test_causal_convention_counts_fewer_attention_flops():
    """The plan's MFU convention (causal, Megatron-Core today) is below the papers' by 6lhs per token: 0.7 % for
    1T at s = 2048, 6.0 % for the 1.7B model (s/6h = 0.15)."""
    model = gpt_model(25600, 128, 160)
    assert model_flops_per_token(model, causal=False) - model_flops_per_token(model) == pytest.approx(
        6 * 128 * 25600 * 2048
    )
    small = gpt_model(2304, 24, 24)
    ratio = model_flops_per_token(small) / model_flops_per_token(small, causal=False)
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
    """Parameters + optimizer at 18 B/param of a stage's transformer layers (Fig. 1 leaves the embedding out),
    tolerance 2 %; SP + selective activations on the first stage (34 sbh/t per layer, interleave factor),
    tolerance 2 %."""
    h, l, a, tp, pp, vpp, b, batch, states_gib, act_gib = row
    model = gpt_model(h, l, a)
    split = split_layers(l, pp, vpp)
    per_param = sum(model_state_bytes_per_param(1, 1).values())
    assert per_param == 18.0
    assert split.middle * layer_parameters(model) / tp * per_param / GIB == pytest.approx(
        states_gib, rel=0.02
    )
    mem = estimate_memory(
        model,
        tp=tp,
        pp=pp,
        dp=1,
        cp=1,
        vpp=vpp,
        micro_batch=b,
        micro_batches=batch // b,
        zero_stage=1,
        recompute="selective",
        attention="materialized",
    )
    assert mem.activations / GIB == pytest.approx(act_gib, rel=0.02)


def test_korthikanti_no_recompute_activations_match_table2():
    """Without recompute and without SP, materialized attention keeps s b h (10 + 24/t + 5 a s/(h t)) per layer."""
    model = gpt_model(6144, 48, 64)
    mem = estimate_memory(
        model,
        tp=8,
        pp=1,
        dp=1,
        cp=1,
        vpp=1,
        micro_batch=4,
        micro_batches=1,
        zero_stage=1,
        recompute="none",
        attention="materialized",
        sequence_parallel=False,
    )
    sbh = 2048 * 4 * 6144
    assert mem.activations == pytest.approx(48 * sbh * (10 + 24 / 8 + 5 * 64 * 2048 / (6144 * 8)), rel=1e-9)


# ------------------------------------------------------------------ (3) step times: one calibration per family

# The limits, in points of each publication's own metric, one calibration per family: no row worse than 8
# points, and the mean over every row of the three tables at most 3 points. Measured errors with the shipped
# calibration (python benchmarks/plan/calibrate.py --check) are in tests/reference/calibration_fit.txt and
# docs/plan-model.md. The worst row is Megatron-Core 32B (-7.2: TP8 x DP48, four micro-batches of one sequence, so
# Megatron's no_sync leaves most of the fp32 gradient reduce-scatter exposed; the table gives no micro-batch).
ROW_LIMIT_POINTS = 8.0
MEAN_LIMIT_POINTS = 3.0


def _error_points(run: PublishedRun) -> float:
    plan = evaluate_layout(run.config, run.config.plan.layout)
    return 100.0 * (run.metric(plan.step_time_s) - run.published)


RUNS = all_runs()


@pytest.mark.parametrize("run", RUNS, ids=[f"{r.table}-{r.name}" for r in RUNS])
def test_published_row_within_the_row_limit(run):
    """No row of the three tables worse than 8 points, no exception."""
    assert abs(_error_points(run)) <= ROW_LIMIT_POINTS


def test_accuracy_over_all_three_tables():
    """Targets: mean |error| <= 3 points over every row of the three tables (27 rows), the worst <= 8."""
    errors = [abs(_error_points(r)) for r in RUNS]
    assert len(errors) == len(MEGATRON_2021) + len(MCORE_2024) + 2 * len(KORTHIKANTI_T5) == 27
    assert statistics.mean(errors) <= MEAN_LIMIT_POINTS
    assert max(errors) <= ROW_LIMIT_POINTS


def test_out_of_sample_table_within_3_points_mean():
    """Korthikanti Table 5 never enters the fit: mean |error| <= 3 points, each row <= 5."""
    errors = [abs(_error_points(r)) for r in korthikanti_2022()]
    assert statistics.mean(errors) <= 3.0 and max(errors) <= 5.0


def test_error_does_not_trend_with_model_size():
    """The old single-constant model was +20 points at 1.7B and -4 to -11 from 32B up. The mean signed
    error of the smallest three rows and of the largest three rows of each in-sample table both sit within 3
    points."""
    for rows in (megatron_2021(), mcore_2024()):
        errs = [_error_points(r) for r in rows]
        assert abs(statistics.mean(errs[:3])) <= 3.0 and abs(statistics.mean(errs[-3:])) <= 3.0


# ----------------------------------------------------------------------------- (4) Llama 3 405B (§3.3)


def test_llama3_parameter_count():
    """405B (+-1 %)."""
    cfg = load_config(LLAMA).config
    assert parameter_count(cfg.model) == pytest.approx(405e9, rel=0.01)
    assert make_plan(cfg).parameters == parameter_count(cfg.model)


# Llama 3 Table 4 (arXiv 2407.21783): GPUs, sequence, layout (tp, cp, pp, dp), TFLOP/s per GPU. Out of sample (the H100
# calibration comes from the Megatron-Core table). The paper reports BF16 MFU "(MFU; Chowdhery et al.)": PaLM's
# 6N + 12 L H Q T per token (all parameters, attention over the whole T x T, not halved for causality), so the
# published TFLOP/s are converted with `palm_flops_per_token`, against H100's 989 dense TFLOP/s. vpp is not
# published: the config's 8 (one layer per virtual stage). The limit for published runs outside the tables:
# each within 4 points (measured +0.2 / -0.2 / -1.3, benchmarks/plan/llama3_table4.py and docs/plan-model.md).
LLAMA3_LIMIT_POINTS = 4.0
LLAMA3_TABLE4 = [
    (16384, 8192, (8, 1, 16, 128), 400.0),
    (8192, 8192, (8, 1, 16, 64), 430.0),
    (16384, 131072, (8, 16, 16, 8), 380.0),
]


def llama3_row_config(gpus, seq, cp, dp, *sets):
    return load_config(
        LLAMA,
        [
            f"cluster.nodes={gpus // 8}",
            f"model.seq_len={seq}",
            f"plan.layout.cp={cp}",
            f"plan.layout.dp={dp}",
            "plan.measured=[]",  # the shipped config is calibrated on the 8K row: the model alone here
            *sets,
        ],
    ).config


def llama3_palm_mfu(cfg, plan) -> float:
    return plan.tokens_per_s * palm_flops_per_token(cfg.model) / (plan.gpus * 989e12)


@pytest.mark.parametrize("row", LLAMA3_TABLE4, ids=["16384-8K", "8192-8K", "16384-131K"])
def test_llama3_published_layouts_fit_and_land_near_their_mfu(row):
    gpus, seq, (tp, cp, pp, dp), tflops = row
    cfg = llama3_row_config(gpus, seq, cp, dp)
    plan = make_plan(cfg)
    assert plan.layout == {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "vpp": 8}
    assert plan.runs, plan.violations
    assert plan.memory_gib_per_gpu <= 0.95 * 80
    assert abs(llama3_palm_mfu(cfg, plan) - tflops / 989.0) * 100 <= LLAMA3_LIMIT_POINTS


def test_llama3_palm_convention_is_the_papers_6n_plus_12lhqt():
    """6N + 12 L H Q T with N = 405.9B: 2.638 TFLOP per token at 8K; at 131K attention adds 3.25 TFLOP."""
    cfg = load_config(LLAMA).config
    n = parameter_count(cfg.model)
    assert palm_flops_per_token(cfg.model) == pytest.approx(6 * n + 12 * 126 * 128 * 128 * 8192, rel=1e-12)
    assert palm_flops_per_token(cfg.model) == pytest.approx(2.638e12, rel=1e-3)
    long = llama3_row_config(16384, 131072, 16, 8).model
    assert palm_flops_per_token(long) - 6 * n == pytest.approx(3.247e12, rel=1e-3)


def test_llama3_interleaving_below_4_does_not_fit_the_8192_gpu_row():
    """vpp is not published; with the config's recompute, the 8,192-GPU row (32 micro-batches in flight at most
    p (1 + (p-1)/(p v))) fits 95 % of 80 GB at vpp 4 and 8 but not at 2: the published run had vpp >= 4."""
    mem = {
        v: make_plan(llama3_row_config(8192, 8192, 1, 64, f"plan.layout.vpp={v}")).memory_gib_per_gpu
        for v in (2, 4, 8)
    }
    assert mem[2] > 0.95 * 80 >= mem[4] > mem[8]


def test_llama3_memory_counts_activation_gradients_and_buffers():
    plan = make_plan(load_config(LLAMA).config)
    gib = plan.memory_breakdown_gib
    assert (
        gib["activation_gradients"] > 0.5 and gib["communication"] + gib["nccl"] + gib["cuda_context"] > 1.0
    )
    assert plan.memory_gib_per_gpu == pytest.approx(sum(gib.values()), rel=1e-9)


def test_llama3_campaign_length_matches_reported_gpu_hours():
    """Llama 3.1 model card: 30.84M H100 GPU-hours for 405B pre-training = 78.4 days on 16,384 GPUs (the card's
    figure; not in shared/reference). Expected days for the whole 15.6T tokens (§3.1) within +-15 % (the GPU-hours
    include more than the main run)."""
    plan = make_plan(load_config(LLAMA, ["plan.target_tokens=15.6e12"]).config)
    assert plan.expected_days == pytest.approx(30.84e6 / 16384 / 24, rel=0.15)


def test_llama3_plan_layout_is_legal():
    plan = make_plan(load_config(LLAMA).config)
    assert not [v for v in plan.violations if v.rule == "layout"]
    assert plan.layout == {"tp": 8, "pp": 16, "dp": 128, "cp": 1, "vpp": 8}
    assert any("Llama 3 split" in n for n in plan.notes)


def test_reference_fixture_is_what_the_tables_describe():
    run = next(r for r in megatron_2021() if r.name == "1T")
    cfg = run.config
    assert cfg.plan.layout == LayoutConfig(tp=8, pp=64, dp=6, cp=1)
    assert cfg.cluster.gpus == 3072 and cfg.micro_batches == 512
    assert cfg.model.mlp == "gelu" and cfg.model.tied_embeddings and cfg.model.position == "learned"
    assert run.step_s() == pytest.approx(102.63, rel=0.01)  # perf-model.md §3.1 derived iteration time


def test_llama3_search_does_not_prefer_context_parallelism_at_8k():
    """On Llama 3 405B at 8K the search does not prefer CP, and its top layout is within 5 % of the
    published one's throughput. With Llama 3's stack priced (unfused fp32 gradient accumulation per micro-batch, which
    costs twice as much per GPU at TP4 as at TP8; FlashAttention-2-class attention, slower on short CP chunks;
    exposed all-gather CP) the top is the published TP8 CP1 PP16 vpp8 itself; the best CP layout is below it."""
    from campaign.plan import search_layouts

    cfg = load_config(LLAMA).config
    ranked = search_layouts(cfg, top=10)
    published = make_plan(cfg)
    assert ranked[0].layout["cp"] == 1
    assert ranked[0].tokens_per_s <= 1.05 * published.tokens_per_s
    best_cp = next((p for p in ranked if p.layout["cp"] > 1), None)
    assert best_cp is None or best_cp.tokens_per_s < ranked[0].tokens_per_s


@pytest.mark.parametrize(
    ("name", "params", "row"),
    [("gpt3-175b", 175.0e9, "175B"), ("turing-530b", 530e9, "530B"), ("megatron-1t", 1.0e12, "1T")],
)
def test_gpt_family_model_files_are_the_reference_rows(name, params, row):
    """configs/models holds GPT-3 / Megatron models as plain configs: they load, count their published size
    (within 1.5 %, biases left out) and are exactly the models of the Korthikanti rows."""
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[2] / "configs" / "models" / f"{name}.yaml"
    model = ModelConfig.model_validate(yaml.safe_load(path.read_text()))
    assert parameter_count(model) == pytest.approx(params, rel=0.015)
    run = next(r for r in korthikanti_2022() if r.name == f"{row} full")
    assert model.model_dump(exclude={"name", "source"}) == run.config.model.model_dump(
        exclude={"name", "source"}
    )


@pytest.mark.parametrize("family", ["A100", "H100"])
def test_shipped_calibration_is_the_recorded_fit(family):
    """The accelerator files carry exactly the values benchmarks/plan/calibrate.py fitted (its recorded output,
    tests/reference/calibration_fit.txt), and every H100 fitted value lies inside its bounds or on a physical floor
    of 0 (a fit stopped by an artificial bound would be suspect)."""
    import re
    from pathlib import Path

    from tests.oracles.published_runs import accelerator

    text = (Path(__file__).parent / "calibration_fit.txt").read_text()
    block = text.split(f"== {family}: fitted kernels")[1].split("\n\n")[0]
    fitted = {m[0]: float(m[1]) for m in re.findall(r"^\s+(\w+): ([0-9.]+)\s+\(shipped", block, re.MULTILINE)}
    assert fitted and fitted == {k: accelerator(family)["kernels"][k] for k in fitted}
    if family == "H100":
        assert 0.2 < fitted["memory_bw_fraction"] < 0.95

"""Unit tests of the planner: violations, layout search, memory and step-time monotonicity."""

import json

import pytest

from campaign.config import LayoutConfig, load_config
from campaign.plan import (
    estimate_memory,
    evaluate_layout,
    layout_violations,
    make_plan,
    search_layouts,
)
from tests.helpers.paths import DEMO, LLAMA


def _rules(plan):
    return {v.rule for v in plan.violations}


def test_demo_plan_fits_within_its_window():
    plan = make_plan(load_config(DEMO).config)
    assert plan.fits, plan.violations
    assert plan.gpus == 128 and plan.nodes == 16
    assert 0 < plan.mfu < 1 and 0 <= plan.comm_fraction < 1
    assert 0 < plan.expected_ettr < 1


def test_tp16_on_8_gpu_domains_is_a_layout_violation():
    cfg = load_config(DEMO, ["plan.layout.tp=16", "plan.layout.dp=8", "model.kv_heads=16"]).config
    plan = make_plan(cfg)
    assert not plan.fits
    messages = [v.message for v in plan.violations if v.rule == "layout"]
    assert any("tp=16 spans 2 NVLink domains of 8 GPUs" in m and "tp<=8" in m for m in messages), messages


def test_huge_model_on_few_gpus_is_a_memory_violation():
    cfg = load_config(
        DEMO,
        [
            "model.layers=96",
            "model.hidden=12288",
            "model.heads=96",
            "model.kv_heads=96",
            "model.ffn_hidden=49152",
        ],
    ).config
    plan = make_plan(cfg)
    assert "memory" in _rules(plan)
    assert plan.memory_gib_per_gpu > 0.95 * 80
    message = next(v.message for v in plan.violations if v.rule == "memory")
    assert "GiB" in message and "raise tp or pp" in message


def test_tiny_window_is_a_schedule_violation():
    plan = make_plan(load_config(DEMO, ["window.days=0.01"]).config)
    assert _rules(plan) == {"schedule"}
    assert plan.expected_days > 0.01


def test_infeasible_layout_is_a_result_not_an_exception():
    cfg = load_config(DEMO).config
    plan = evaluate_layout(cfg, LayoutConfig(tp=3, pp=1, dp=5, cp=1), micro_batch=3)
    assert not plan.fits
    assert "layout" in _rules(plan)


def test_to_json_is_json_ready_with_required_keys():
    data = make_plan(load_config(DEMO, ["window.days=0.01"]).config).to_json()
    json.dumps(data)
    for key in (
        "gpus",
        "layout",
        "memory_gib_per_gpu",
        "step_time_s",
        "mfu",
        "tokens_per_s",
        "checkpoint",
        "job_mtbf_h",
        "expected_ettr",
        "expected_days",
        "fits",
        "violations",
    ):
        assert key in data
    assert set(data["layout"]) >= {"tp", "pp", "dp", "cp"}
    assert set(data["checkpoint"]) >= {"size_gb", "write_s", "interval_s"}
    assert data["violations"][0].startswith("schedule: ")


@pytest.mark.parametrize("path", [DEMO, LLAMA])
def test_search_returns_only_legal_layouts_ranked(path):
    cfg = load_config(path).config
    plans = search_layouts(cfg, top=10)
    assert 0 < len(plans) <= 10
    for plan in plans:
        lay = LayoutConfig(**plan.layout)
        assert lay.world == cfg.cluster.gpus
        assert not [v for v in plan.violations if v.rule == "layout"]
        assert not layout_violations(cfg, lay, plan.micro_batch)
    keys = [(not p.fits, any(v.rule == "memory" for v in p.violations), -p.tokens_per_s) for p in plans]
    assert keys == sorted(keys)


def test_search_ranks_fitting_layouts_first():
    plans = search_layouts(load_config(DEMO).config, top=200)
    fits = [p.fits for p in plans]
    assert fits[0] and fits == sorted(fits, reverse=True)


def _memory(cfg, **over):
    args = {
        "tp": 2,
        "pp": 1,
        "dp": 64,
        "cp": 1,
        "vpp": 1,
        "micro_batch": 2,
        "micro_batches": 4,
        "zero_stage": 1,
        "recompute": "selective",
    }
    args.update(over)
    return estimate_memory(cfg.model, **args)


def test_memory_falls_with_zero_stage_and_recompute():
    cfg = load_config(DEMO).config
    totals = [_memory(cfg, zero_stage=z).total for z in (0, 1, 2, 3)]
    assert totals == sorted(totals, reverse=True)
    acts = [_memory(cfg, recompute=r).activations for r in ("none", "selective", "full")]
    assert acts == sorted(acts, reverse=True)


def test_uneven_layer_split_is_noted():
    cfg = load_config(DEMO).config
    plan = evaluate_layout(cfg, LayoutConfig(tp=2, pp=16, dp=4, cp=1), micro_batch=1)
    assert any("do not split evenly" in n for n in plan.notes)


def test_full_recompute_is_slower_than_selective():
    sel = make_plan(load_config(DEMO).config)
    full = make_plan(load_config(DEMO, ["plan.recompute=full"]).config)
    assert full.step_time_s > sel.step_time_s
    assert full.mfu < sel.mfu
    assert full.memory_gib_per_gpu < sel.memory_gib_per_gpu


def _llama_step(layout, *sets):
    # The model alone: the shipped config is calibrated on one published row, and a calibration re-fitted under
    # each variant would absorb the very difference these tests measure.
    cfg = load_config(LLAMA, ["plan.measured=[]", *sets]).config
    return evaluate_layout(cfg, LayoutConfig(**layout))


CP4 = {"tp": 8, "pp": 16, "dp": 32, "cp": 4, "vpp": 8}


def test_cp_exchange_hides_only_behind_the_chunks_attention():
    """The K/V ring exchange is free while each block's attention outlasts it; on a slow NIC it is exposed."""
    fast = _llama_step(CP4, "plan.cp_comm=ring").step_breakdown_s
    assert fast["cp_comm_total"] > 0 and fast["cp_comm_exposed"] == 0
    slow = _llama_step(CP4, "plan.cp_comm=ring", "cluster.network.nic_gb_per_s=0.5").step_breakdown_s
    assert slow["cp_comm_exposed"] > 0.5 * slow["cp_comm_total"] > 0


def test_all_gather_cp_is_exposed_and_has_no_ring_merges():
    """Llama 3's all-gather CP (the Llama config's setting): every K/V gather and dK/dV reduce-scatter sits on the
    critical path (exposed == total, growing as the NIC slows); the attention runs once per local chunk, without the
    ring's per-step fp32 merges, so its compute is below the ring's at the same layout."""
    ag = _llama_step(CP4)
    assert ag.step_breakdown_s["cp_comm_exposed"] == ag.step_breakdown_s["cp_comm_total"] > 0
    slow = _llama_step(CP4, "cluster.network.nic_gb_per_s=10")
    assert slow.step_breakdown_s["cp_comm_exposed"] > 2 * ag.step_breakdown_s["cp_comm_exposed"]
    ring = _llama_step(CP4, "plan.cp_comm=ring")
    assert ag.step_breakdown_s["compute"] < ring.step_breakdown_s["compute"]
    assert _llama_step({**CP4, "cp": 1, "dp": 128}).step_breakdown_s["cp_comm_total"] == 0


def test_cp_without_load_balancing_pays_the_causal_imbalance():
    balanced = _llama_step(CP4)
    contiguous = _llama_step(CP4, "plan.cp_load_balance=false")
    assert contiguous.step_time_s > balanced.step_time_s
    assert any("without load balancing" in n for n in contiguous.notes)


def test_attention_efficiency_falls_with_chunk_length_and_head_dim():
    from campaign.plan.kernels import Kernels

    k = Kernels.from_accelerator(load_config(LLAMA).config.cluster.accelerator)
    effs = [k.attention_efficiency(s, 128) for s in (512, 1024, 4096, 16384)]
    assert effs == sorted(effs) and effs[0] < 0.6 * effs[-1]
    assert k.attention_efficiency(4096, 64) < k.attention_efficiency(4096, 128)


def test_gemm_efficiency_depends_on_shape():
    """Wave quantization and the inner dimension: a GEMM one tile wider than a full wave runs below one that
    fills its waves; a tiny K runs below a long one (per-tile prologue/epilogue)."""
    from campaign.plan.kernels import Kernels

    k = Kernels.from_accelerator(load_config(DEMO).config.cluster.accelerator)
    full = k.gemm_efficiency(128 * 132, 256, 4096)
    assert k.gemm_efficiency(128 * 133, 256, 4096) < 0.7 * full
    a100 = Kernels(
        peak_flops=312e12,
        memory_bytes_per_s=1.9e12,
        hbm_bytes_per_s=2.0e12,
        sm_count=108,
        gemm_peak_fraction=0.75,
        gemm_half_k=50.0,
        attention_peak_fraction=0.72,
        gap_s=0.0,
    )
    assert a100.gemm_efficiency(8192, 8192, 64) < 0.6 * a100.gemm_efficiency(8192, 8192, 8192)


def test_overlap_settings_default_to_megatron_and_hide_communication():
    from campaign.config import OverlapConfig

    assert OverlapConfig() == OverlapConfig(
        tp=False, dp_grad_reduce=False, dp_param_gather=False, pp_p2p=True
    )
    base = make_plan(load_config(DEMO).config)
    over = make_plan(
        load_config(
            DEMO,
            ["plan.overlap.tp=true", "plan.overlap.dp_grad_reduce=true", "plan.overlap.dp_param_gather=true"],
        ).config
    )
    assert base.step_breakdown_s["tp_comm"] == base.step_breakdown_s["tp_comm_total"] > 0
    assert over.step_breakdown_s["tp_comm"] < base.step_breakdown_s["tp_comm"]
    assert over.step_breakdown_s["dp_comm_exposed"] < base.step_breakdown_s["dp_comm_exposed"]
    assert over.step_time_s < base.step_time_s


def test_memory_bound_work_is_timed_from_bytes_at_hbm_bandwidth():
    """Halving HBM bandwidth slows the step by more than nothing and less than the memory-bound share."""
    base = make_plan(load_config(DEMO).config)
    slow = make_plan(load_config(DEMO, ["cluster.accelerator.hbm_gb_per_s=1676"]).config)
    mem_bound = base.step_breakdown_s["compute_memory_bound"] + base.step_breakdown_s["optimizer"]
    assert 0 < mem_bound < base.step_time_s
    assert slow.step_time_s - base.step_time_s == pytest.approx(mem_bound, rel=0.1)


def test_search_does_not_use_a_sequence_length_rule_for_cp():
    """CP layouts are legal at any length with 2*cp dividing it; the step-time model prices them."""
    cfg = load_config(LLAMA).config
    plan = evaluate_layout(cfg, LayoutConfig(tp=8, pp=16, dp=16, cp=8, vpp=8))
    assert not [v for v in plan.violations if v.rule == "layout"]


def test_interleaving_needs_micro_batches_divisible_by_pp():
    cfg = load_config(LLAMA, ["plan.global_batch_tokens=8388608"]).config  # 1,024 sequences: 8 per pipeline
    plan = evaluate_layout(cfg, LayoutConfig(tp=8, pp=16, dp=128, cp=1, vpp=8))
    assert any("multiple of pp=16" in v.message for v in plan.violations)


def _plan_imports() -> dict[str, set[str]]:
    """Module -> campaign.plan modules it imports (any import statement, at any depth of the file)."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "campaign" / "plan"
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        if path.stem == "__init__":
            continue
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("campaign.plan."):
                deps.add(node.module.rsplit(".", 1)[1])
        graph[path.stem] = deps
    return graph


def test_plan_modules_have_no_import_cycle_and_rules_sit_below_the_planner():
    graph = _plan_imports()
    assert "planner" not in graph["layout"] and "search" not in graph["layout"]
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(node: str) -> None:
        assert state.get(node) != 1, f"import cycle through campaign.plan.{node}"
        if state.get(node) == 2:
            return
        state[node] = 1
        for dep in graph.get(node, ()):
            visit(dep)
        state[node] = 2
        order.append(node)

    for module in graph:
        visit(module)
    assert order.index("layout") < order.index("planner") < order.index("search")


def test_every_shipped_h100_uses_the_one_h100_calibration():
    """One calibration per accelerator family: the demo's inline accelerator and the Llama 3 cluster's referenced
    file carry exactly configs/accelerators/h100-sxm-80gb.yaml."""
    from pathlib import Path

    import yaml

    shipped = yaml.safe_load((Path(DEMO).parents[1] / "accelerators" / "h100-sxm-80gb.yaml").read_text())
    for path in (DEMO, LLAMA):
        acc = load_config(path).config.cluster.accelerator
        assert acc.kernels.model_dump(exclude={"source"}) == {
            k: v for k, v in shipped["kernels"].items() if k != "source"
        }
        assert (acc.peak_bf16_tflops, acc.hbm_gb_per_s, acc.sm_count) == (
            shipped["peak_bf16_tflops"],
            shipped["hbm_gb_per_s"],
            shipped["sm_count"],
        )


def test_memory_total_fast_path_equals_the_breakdown():
    from campaign.plan.memory import MemoryModel

    cfg = load_config(LLAMA).config
    mm = MemoryModel(
        cfg.model, zero_stage=cfg.plan.zero_stage, recompute="selective", recompute_pointwise=True
    )
    for tp, pp, dp, cp, vpp, b, m in (
        (8, 16, 128, 1, 8, 1, 16),
        (4, 8, 256, 2, 16, 2, 4),
        (8, 1, 2048, 1, 1, 1, 1),
    ):
        full = mm.estimate(tp=tp, pp=pp, dp=dp, cp=cp, vpp=vpp, micro_batch=b, micro_batches=m)
        assert mm.total_bytes(tp, pp, dp, cp, vpp, b, m) == pytest.approx(full.total, rel=1e-12)


def test_search_finds_the_fastest_fitting_layout_of_an_exhaustive_scan():
    """The branch-and-bound search returns what timing every fitting candidate would."""
    from campaign.plan.layout import candidate_layouts
    from campaign.plan.planner import PlanContext

    cfg = load_config(LLAMA).config
    ctx = PlanContext.from_config(cfg)
    timed = [ctx.quick(lay, b) for lay, b in candidate_layouts(cfg)]
    best = max((q for q in timed if q.fits), key=lambda q: q.tokens_per_s)
    top = search_layouts(cfg, top=3)[0]
    assert top.tokens_per_s == pytest.approx(best.tokens_per_s, rel=1e-9)


def test_search_notes_compare_each_plan_with_the_configs_layout():
    plans = search_layouts(load_config(DEMO).config, top=5)
    own = load_config(DEMO).config.plan
    for plan in plans:
        same = plan.layout == own.layout.model_dump() and plan.micro_batch == own.micro_batch
        assert same or "against the config's layout" in plan.notes[-1]


def test_step_lower_bound_never_exceeds_the_estimate():
    from campaign.plan.layout import candidates
    from campaign.plan.planner import PlanContext

    cfg = load_config(LLAMA).config
    ctx = PlanContext.from_config(cfg)
    for c in candidates(cfg)[::97]:
        m = ctx.micro_batches(c, c.micro_batch)
        assert ctx.steps.lower_bound_s(c, c.micro_batch, m) <= ctx.steps.estimate(c, c.micro_batch, m).step_s


def test_unfused_gradient_accumulation_costs_12_bytes_per_parameter_per_micro_batch():
    """Llama 3's FSDP accumulates fp32 gradients in a separate kernel each micro-batch (Megatron fuses it into the
    weight-gradient GEMM): 12 B per parameter of the stage per micro-batch at the memory-bound rate, in the step
    and in the bubble; it costs twice as much per GPU at TP4 as at TP8."""
    from campaign.plan.kernels import Kernels
    from campaign.plan.memory import split_layers, stage_parameters

    published = {"tp": 8, "pp": 16, "dp": 128, "cp": 1, "vpp": 8}
    unfused = _llama_step(published)
    fused = _llama_step(published, "plan.grad_accumulation_fusion=true")
    cfg = load_config(LLAMA).config
    params_gpu = stage_parameters(cfg.model, split_layers(cfg.model.layers, 16, 8), 16) / 8
    per_micro_batch = Kernels.from_accelerator(cfg.cluster.accelerator).memory_s(12.0 * params_gpu)
    m = cfg.micro_batches
    assert unfused.step_breakdown_s["compute_memory_bound"] - fused.step_breakdown_s[
        "compute_memory_bound"
    ] == (pytest.approx(m * per_micro_batch, rel=1e-9))
    added = unfused.step_time_s - fused.step_time_s
    assert added == pytest.approx((m + 15 / 8) * per_micro_batch, rel=1e-6)  # m micro-batches and the bubble
    tp4 = {"tp": 4, "pp": 16, "dp": 256, "cp": 1, "vpp": 8}
    added_tp4 = (
        _llama_step(tp4).step_time_s - _llama_step(tp4, "plan.grad_accumulation_fusion=true").step_time_s
    )
    m4 = load_config(LLAMA, ["plan.layout.tp=4", "plan.layout.dp=256"]).config.micro_batches
    assert (added_tp4 / (m4 + 15 / 8)) / (added / (m + 15 / 8)) == pytest.approx(2.0, rel=0.1)


def test_flash2_attention_runs_at_the_accelerators_flash2_rate():
    """`plan.attention_kernel: flash2` prices fused attention at the accelerator file's FlashAttention-2 rate (H100:
    0.35 of peak against 0.5 for the family's best fused kernel); nothing else changes."""
    from campaign.plan.kernels import Kernels

    acc = load_config(LLAMA).config.cluster.accelerator
    best, fa2 = Kernels.from_accelerator(acc), Kernels.from_accelerator(acc, "flash2")
    assert fa2.attention_efficiency(8192, 128) / best.attention_efficiency(8192, 128) == pytest.approx(
        0.35 / 0.5
    )
    assert fa2.gemm_efficiency(8192, 8192, 8192) == best.gemm_efficiency(8192, 8192, 8192)
    layout = {"tp": 8, "pp": 16, "dp": 8, "cp": 16, "vpp": 8}
    long_fa2 = _llama_step(layout, "model.seq_len=131072", "cluster.nodes=2048")
    long_best = _llama_step(
        layout, "model.seq_len=131072", "cluster.nodes=2048", "plan.attention_kernel=fused"
    )
    assert long_fa2.step_time_s > 1.15 * long_best.step_time_s

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
from tests.paths import DEMO, LLAMA


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
    cfg = load_config(DEMO, ["model.layers=96", "model.hidden=12288", "model.heads=96", "model.kv_heads=96",
                             "model.ffn_hidden=49152"]).config
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
    for key in ("gpus", "layout", "memory_gib_per_gpu", "step_time_s", "mfu", "tokens_per_s", "checkpoint",
                "job_mtbf_h", "expected_ettr", "expected_days", "fits", "violations"):
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
    args = {"tp": 2, "pp": 1, "dp": 64, "cp": 1, "vpp": 1, "micro_batch": 2, "micro_batches": 4, "zero_stage": 1,
            "recompute": "selective"}
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


def test_context_parallelism_needs_long_sequences():
    from campaign.plan import evaluate_layout, search_layouts
    from campaign.plan.layout import MIN_CP_TOKENS_PER_RANK

    cfg = load_config(LLAMA).config  # seq 8,192: cp=8 leaves 1,024 tokens per rank
    plan = evaluate_layout(cfg, LayoutConfig(tp=8, pp=16, dp=16, cp=8, vpp=8))
    assert not plan.fits and any("context parallelism pays off only for long sequences" in v.message
                                 for v in plan.violations)
    assert all(cfg.model.seq_len // p.layout["cp"] >= MIN_CP_TOKENS_PER_RANK for p in search_layouts(cfg, top=50))


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

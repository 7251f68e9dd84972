"""The plan calibrated on measured steps, its band, the stack it searches, and the schedule gate's draws."""

from __future__ import annotations

import pytest

from campaign.calendar.window_length import with_p90_split
from campaign.config import LayoutConfig, load_config
from campaign.errors import ConfigError
from campaign.plan import evaluate_layout, make_plan, search_layouts
from campaign.plan.calibration import (
    CALIBRATED_EXTRAPOLATION,
    FACTOR_BOUNDS,
    UNCALIBRATED_BAND,
    StackEfficiency,
    fit_stack_efficiency,
)
from campaign.plan.layout import candidates, layout_violations
from campaign.sim.replicas import step_time_factors
from campaign.window_verdict import plan_band
from tests.helpers.paths import DEMO, LLAMA


def _measured(step_s: float, nodes: int = 2, dp: int = 8, batch: int = 2097152, mb: int | None = None) -> str:
    extra = f", micro_batch: {mb}" if mb else ""
    return (
        f"plan.measured=[{{nodes: {nodes}, layout: {{tp: 2, pp: 1, dp: {dp}, cp: 1}}, "
        f"global_batch_tokens: {batch}, step_time_s: {step_s}, source: a short run, model: demo-2b{extra}}}]"
    )


def test_fit_recovers_two_factors_from_runs_of_different_communication_shares() -> None:
    splits = [(10.0, 1.0), (10.0, 5.0), (4.0, 6.0)]
    truth = StackEfficiency(compute=1.2, communication=1.5)
    measured = [truth.compute * c + truth.communication * n for c, n in splits]
    fit = fit_stack_efficiency(splits, measured)
    assert fit.compute == pytest.approx(1.2, abs=0.005)
    assert fit.communication == pytest.approx(1.5, abs=0.01)


def test_one_run_gives_equal_factors_that_reproduce_it() -> None:
    fit = fit_stack_efficiency([(8.0, 2.0)], [12.5])
    assert fit.compute == pytest.approx(fit.communication, rel=1e-3)
    assert 8.0 * fit.compute + 2.0 * fit.communication == pytest.approx(12.5, rel=1e-3)


def test_factors_stay_within_their_bounds() -> None:
    low, high = FACTOR_BOUNDS
    slow = fit_stack_efficiency([(1.0, 1.0)], [100.0])
    assert slow.compute == high and slow.communication == high
    fast = fit_stack_efficiency([(10.0, 0.0), (0.0, 10.0)], [1.0, 100.0])
    assert low <= fast.compute <= high and low <= fast.communication <= high


def test_uncalibrated_plan_states_its_basis_and_the_production_band() -> None:
    plan = make_plan(load_config(DEMO).config)
    low, high = plan.step_time_range_s
    assert (low / plan.step_time_s, high / plan.step_time_s) == pytest.approx(UNCALIBRATED_BAND)
    out = plan.to_json()
    assert out["calibration"] is None and out["basis"].startswith("uncalibrated")
    assert out["step_time_range_s"] == [low, high]


def test_calibrated_plan_reproduces_its_measurement_and_narrows_the_band() -> None:
    raw = make_plan(load_config(DEMO).config)
    cfg = load_config(DEMO, [_measured(6.0)]).config
    plan = make_plan(cfg)
    assert plan.calibration is not None
    (row,) = plan.calibration.rows
    assert row.measured_s == 6.0 and row.predicted_s == pytest.approx(6.0, rel=1e-3)
    assert plan.step_time_s > raw.step_time_s  # the stack is slower than the tables
    low, high = plan.step_time_range_s
    assert low == pytest.approx(plan.step_time_s * (1 - CALIBRATED_EXTRAPOLATION), rel=1e-3)
    assert high == pytest.approx(plan.step_time_s * (1 + CALIBRATED_EXTRAPOLATION), rel=1e-3)
    assert sum(v for k, v in plan.step_breakdown_s.items() if not k.endswith(("_total", "memory_bound"))) == (
        pytest.approx(plan.step_time_s, rel=1e-9)
    )
    out = plan.to_json()
    assert set(out["calibration"]) == {"factors", "rows", "sources"}
    assert set(out["calibration"]["rows"][0]) == {"nodes", "layout", "measured_s", "predicted_s", "error"}
    assert "calibrated on 1 measured run" in out["basis"]


def test_the_config_digest_covers_the_measurements() -> None:
    a, b = load_config(DEMO, [_measured(6.0)]), load_config(DEMO, [_measured(6.1)])
    assert a.digest != b.digest != load_config(DEMO).digest


def test_a_measured_layout_that_is_not_its_node_count_names_the_entry() -> None:
    with pytest.raises(ConfigError, match=r"plan\.measured\[0\]\.layout.*2x8 = 16"):
        load_config(DEMO, [_measured(6.0, dp=4)])


def test_a_measured_batch_that_does_not_split_names_the_entry() -> None:
    with pytest.raises(ConfigError, match=r"plan\.measured\[0\]\.global_batch_tokens"):
        load_config(DEMO, [_measured(6.0, batch=4096 * 3)])


def test_stack_preset_by_name_or_with_overrides() -> None:
    cfg = load_config(DEMO, ["plan.stack=megatron-lm-2021", "plan.sequence_parallel=false"]).config
    assert not cfg.plan.stack.context_parallel and cfg.plan.stack.attention_kernels == ("materialized",)
    cfg = load_config(DEMO, ["plan.stack={preset: pytorch-fsdp, context_parallel: false}"]).config
    assert not cfg.plan.stack.context_parallel and not cfg.plan.stack.fused_grad_accumulation


def test_a_setting_the_stack_does_not_run_is_a_note() -> None:
    plan = make_plan(load_config(LLAMA, ["plan.grad_accumulation_fusion=true"]).config)
    assert any("pytorch-fsdp stack" in n and "fused gradient accumulation" in n for n in plan.notes)


def test_search_never_proposes_cp_or_interleaving_the_stack_cannot_run() -> None:
    cfg = load_config(DEMO, ["plan.stack={preset: megatron-core, context_parallel: false}"]).config
    assert all(c.cp == 1 for c in candidates(cfg))
    assert any(c.cp > 1 for c in candidates(load_config(DEMO).config))
    cfg = load_config(LLAMA, ["plan.stack={preset: pytorch-fsdp, interleaved_pipeline: false}"]).config
    assert all(c.vpp == 1 for c in candidates(cfg))
    assert all(
        p.layout["cp"] == 1
        for p in search_layouts(load_config(DEMO, ["plan.stack={context_parallel: false}"]).config, 5)
    )


def test_cp_needs_fused_attention() -> None:
    cfg = load_config(DEMO, ["plan.attention=materialized"]).config
    assert all(c.cp == 1 for c in candidates(cfg))
    rules = layout_violations(cfg, LayoutConfig(tp=2, pp=1, dp=32, cp=2), 2)
    assert any("cp=2 needs fused attention" in v.message for v in rules)


def test_the_search_ranks_by_the_calibrated_step() -> None:
    cfg = load_config(DEMO, [_measured(6.0)]).config
    (best,) = search_layouts(cfg, 1)
    raw = evaluate_layout(load_config(DEMO).config, LayoutConfig(**best.layout), best.micro_batch)
    assert best.calibration is not None and best.step_time_s > raw.step_time_s


def test_step_time_draws_are_seeded_and_inside_the_band() -> None:
    a = step_time_factors(7, (0.9, 1.3), range(200))
    assert a == step_time_factors(7, (0.9, 1.3), range(200)) != step_time_factors(8, (0.9, 1.3), range(200))
    assert min(a) >= 0.9 and max(a) <= 1.3 and max(a) - min(a) > 0.3
    assert step_time_factors(7, (1.0, 1.0), range(3)) == [1.0, 1.0, 1.0]


def test_plan_band_is_relative_to_the_step() -> None:
    plan = make_plan(load_config(DEMO).config)
    assert plan_band(plan.step_time_s, plan.step_time_range_s) == pytest.approx(UNCALIBRATED_BAND)


def test_the_p90_is_split_between_the_band_and_failures() -> None:
    from campaign.calendar.gaps import Pricing
    from campaign.calendar.window_length import assess_window_length

    day = 86_400.0
    verdict = assess_window_length(
        [1.5 * day] * 10,
        2 * day,
        4,
        Pricing(gpus_per_node=8, gpu_hour_usd=1.0, energy_usd_per_mwh=0.0, idle_node_w=0.0),
    )
    split = with_p90_split(verdict, (1.0, 1.2), [1.2] * 10, 1.0 * day, 1.5 * day)
    assert split.p90_from_plan_days == pytest.approx(0.2)
    assert split.p90_from_failures_days == pytest.approx(0.3)
    assert (
        "+0.20 days from the step-time band" in split.message and "+0.30 days from failures" in split.message
    )


def test_allocator_fragmentation_counts_what_the_caching_allocator_reserves() -> None:
    from campaign.plan.memory import MemoryModel, allocator_bytes

    assert allocator_bytes(85.0, 0.15) == pytest.approx(15.0) and allocator_bytes(85.0, 0.0) == 0.0
    base = make_plan(load_config(LLAMA).config)
    frag = make_plan(load_config(LLAMA, ["plan.allocator_fragmentation=0.15"]).config)
    b = base.memory_breakdown_gib
    transient = b["activations"] + b["activation_gradients"] + b["communication"] + b["other"]
    assert b["allocator"] == 0.0
    assert frag.memory_breakdown_gib["allocator"] == pytest.approx(transient * 0.15 / 0.85, rel=1e-9)
    assert frag.memory_gib_per_gpu == pytest.approx(sum(frag.memory_breakdown_gib.values()), rel=1e-9)
    cfg = load_config(LLAMA).config
    mm = MemoryModel(cfg.model, zero_stage=1, recompute="selective", allocator_fragmentation=0.2)
    full = mm.estimate(tp=8, pp=16, dp=128, cp=1, vpp=8, micro_batch=1, micro_batches=16)
    assert mm.total_bytes(8, 16, 128, 1, 8, 1, 16) == pytest.approx(full.total, rel=1e-12)


def test_the_approval_request_shows_the_band_and_the_basis() -> None:
    from types import SimpleNamespace

    from campaign.approval import approval_request
    from campaign.gates import REQUIRED_GATES, plan_gates

    config = load_config(DEMO).config
    plan = make_plan(config)
    gates = {g: SimpleNamespace(passed=True, details={"summary": f"{g} figure"}) for g in REQUIRED_GATES}
    text = approval_request(config, "c" * 64, "d" * 64, gates, plan.expected_days, None, plan).markdown()
    low, high = (plan.expected_days * x for x in UNCALIBRATED_BAND)
    assert f"{plan.expected_days:.2f} days (plan; {low:.2f}-{high:.2f} days over its step-time band)" in text
    assert "| Plan basis | uncalibrated:" in text
    (schedule,) = [g for g in plan_gates(plan, []) if g.gate == "schedule"]
    assert (
        f"band {plan.step_time_range_s[0]:.3g}-{plan.step_time_range_s[1]:.3g} s, uncalibrated"
        in schedule.summary
    )

"""The window judged from seeded replicas of it: the verdict `campaign plan` prints and the `schedule` gate folds in.

It runs `campaign simulate`'s replicas 0..n-1 for the config's seed (`campaign.window.window_replicas_inputs`),
judges them by the one rule (`campaign.window_verdict.window_sufficiency`) and prices the verdict as the calendar
prices a booking (`campaign.calendar.window_length.assess_window_length`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from campaign.calendar.catalog import cluster_identity
from campaign.calendar.window_length import (
    OVERRUN,
    WindowLength,
    assess_window_length,
    with_p90_split,
    with_rate_uncertainty,
)
from campaign.config import CampaignConfig
from campaign.plan import Plan
from campaign.records import JsonRecord
from campaign.sim.replicas import simulate_batch, step_time_factors
from campaign.window import window_replicas_inputs
from campaign.window_verdict import DAY_S, empirical_quantile, plan_band, rule_threshold


def simulated_text(replicas: int, seed: int, window_s: float, band: tuple[float, float]) -> str:
    """What the window's verdict was judged from, as its message says it."""
    step = (
        "the plan's step time"
        if band == (1.0, 1.0)
        else f"a step time drawn from {band[0]:.2f}-{band[1]:.2f}x the plan's"
    )
    return (
        f"judged from {replicas} simulated replicas of the {window_s / DAY_S:g}-day window (seed {seed}, replicas "
        f"0..{replicas - 1}, each at {step})"
    )


def judge_window(config: CampaignConfig, plan: Plan, replicas: int | None = None) -> WindowLength:
    """The window judged from `gates.config.window_replicas` seeded replicas of it: exactly `campaign simulate`'s
    replicas 0..n-1 for the config's seed (`window_replicas_inputs`: the same failures and the same step time drawn
    from the plan's band, `Plan.step_time_range_s`), so the p90 covers both failures and the plan's own
    uncertainty, and `campaign simulate --replicas n` reports the same figures. `campaign plan` prints this
    verdict; the `schedule` gate folds it in."""
    n = config.gates.config.window_replicas if replicas is None else replicas
    # The same replicas as `campaign simulate`: a snapshot job trains past its target, which it reaches at the
    # commit that first holds it (the replica summary's target_reached_s; a finishing job's completion).
    inputs, band = window_replicas_inputs(config, plan)
    window_s = inputs.window_s

    def completions(horizon_s: float, rate_uncertainty: bool = True) -> list[float | None]:
        # The summary fast path (no event log, no power series): the same target time as `simulate`.
        uncertain = rate_uncertainty and inputs.rate_uncertainty
        batch = simulate_batch(
            replace(inputs, window_s=horizon_s, rate_uncertainty=uncertain), range(n), band
        )
        return [s.target_reached_s for s in batch]

    judged = completions(window_s)
    pricing = cluster_identity(config.cluster).pricing
    simulated = simulated_text(n, inputs.seed, window_s, band)
    args = (window_s, config.cluster.booked_nodes, pricing, not config.sim.stop_at_target)
    verdict = assess_window_length(judged, *args, simulated=simulated)
    p90_s = (verdict.p90_completion_days or math.inf) * DAY_S
    if verdict.verdict == "too_short" and verdict.p90_completion_days is None:
        # More than 10% unfinished: run past the window to price how much longer it would have to be.
        longer = completions(window_s * OVERRUN)
        verdict = assess_window_length(judged, *args, longer_completions_s=longer, simulated=simulated)
        p90_s = empirical_quantile([math.inf if t is None else float(t) for t in longer], 0.90)
    if inputs.rate_uncertainty and any(c.observed is not None for c in inputs.failures):
        verdict = with_rate_uncertainty(verdict, completions(window_s, rate_uncertainty=False), window_s)
    factors = step_time_factors(inputs.seed, band, range(n))
    return with_p90_split(verdict, band, factors, inputs.target_tokens / inputs.tokens_per_s, p90_s)


@dataclass(frozen=True, slots=True)
class WindowVerdict(JsonRecord):
    """The window verdict `campaign plan` states: the schedule gate's (its replicas, `basis` "replicas"), or, when
    the gate runs none (`gates.config.window_replicas` 0), the plan's own estimate with its band, labelled so."""

    verdict: str  # ok, too_short, too_long
    basis: str  # replicas, plan_estimate
    message: str
    window_days: float
    replicas: int
    p_target_in_window: float | None  # None for the plan's estimate (no replicas)
    p90_target_days: float | None
    p99_target_days: float | None
    rule: str

    # `to_json()` is `campaign plan --json`'s `window_verdict`.
    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("suffices",)

    @property
    def suffices(self) -> bool:
        return self.verdict != "too_short"


def plan_window_verdict(config: CampaignConfig, plan: Plan) -> WindowVerdict:
    """The verdict the `schedule` gate will reach on this window, by the gate's own rule: its replicas when it
    runs them (`gates.config.window_replicas` > 0 and a plan without violations), else the plan's estimate
    (expected days against the window less its margin), stated with the days at either end of the step-time band
    and labelled as the plan's estimate."""
    window_days = config.window.days
    trains_through = not config.sim.stop_at_target
    if config.gates.config.window_replicas > 0 and plan.fits:
        judged = judge_window(config, plan)
        return WindowVerdict(
            judged.verdict,
            "replicas",
            judged.message,
            window_days,
            judged.replicas,
            judged.p_target_in_window,
            judged.p90_completion_days,
            judged.p99_completion_days,
            rule_threshold(window_days, trains_through),
        )
    low, high = plan_band(plan.step_time_s, plan.step_time_range_s)
    days = plan.expected_days
    limit = window_days * (1.0 - config.gates.config.min_window_margin)
    missed = any(v.rule == "schedule" for v in plan.violations)
    why = (
        "gates.config.window_replicas is 0"
        if config.gates.config.window_replicas <= 0
        else "the plan has violations, so the gate runs no replicas"
    )
    message = (
        f"the plan's own estimate, not replicas ({why}): expected {days:.2f} days at ETTR "
        f"{plan.expected_ettr:.3f} ({days * low:.2f}-{days * high:.2f} days across the step-time band "
        f"{low:.2f}-{high:.2f}x) against {limit:.2f} days (the {window_days:g}-day window less its margin)"
    )
    return WindowVerdict(
        "too_short" if missed else "ok",
        "plan_estimate",
        message,
        window_days,
        0,
        None,
        None,
        None,
        f"expected days <= {limit:g} (window less gates.config.min_window_margin)",
    )


def plan_json_with_verdict(plan: Plan, verdict: WindowVerdict | None) -> dict[str, Any]:
    """`campaign plan --json` with the window verdict: a verdict other than ok is a schedule violation, so `fits`
    is false (the exit code stays 0: a schedule miss is an answer, not a layout that cannot run)."""
    plan_json = plan.to_json()
    if verdict is None:
        return {**plan_json, "window_verdict": None}
    violations = list(plan_json["violations"])
    if verdict.verdict != "ok" and verdict.basis == "replicas":  # the plan's estimate is already a violation
        violations.append(f"schedule: {verdict.message}")
    return {
        **plan_json,
        "violations": violations,
        "fits": bool(plan_json["fits"]) and verdict.verdict == "ok",
        "window_verdict": verdict.to_json(),
    }

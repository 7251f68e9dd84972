"""The window judged from seeded replicas of it: the verdict `campaign plan` prints and the `schedule` gate folds in.

It runs `campaign simulate`'s replicas 0..n-1 for the config's seed (`campaign.window.window_replicas_inputs`),
judges them by the one rule (`campaign.window_verdict.window_sufficiency`) and prices the verdict as the calendar
prices a booking (`campaign.calendar.window_length.assess_window_length`).
"""

from __future__ import annotations

import math
from dataclasses import replace

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
from campaign.sim.replicas import simulate_batch, step_time_factors
from campaign.window import window_replicas_inputs
from campaign.window_verdict import DAY_S, empirical_quantile


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
        return [s["target_reached_s"] for s in batch]

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

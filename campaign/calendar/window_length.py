"""The window length as a decision with a price, judged from simulated replicas of the window.

What is judged is when each replica's committed tokens first reach `plan.target_tokens` (`target_reached_s` of the
replica summary): for a window that stops at the target this is its completion; a snapshot window trains on, but
reaches its target all the same. `campaign.window_verdict.window_sufficiency` is the one rule `campaign plan`,
`campaign simulate`, its sweep ranking, the reports and the `schedule` gate read, so they agree on whether a window
suffices; this module prices that verdict (`campaign.window.judge_window` runs the replicas and calls it).
A window shorter than the campaign's p90 completion time leaves more than one chance in ten of not finishing;
one longer than its p99 books capacity the job will almost surely release unused (the idle tail after an early
finish, a gap on the cluster's calendar). Percentiles are empirical (inverted CDF) over the replicas, a replica
that does not finish counting as later than the window; with fewer than 100 replicas the p99 is the slowest one.
The replicas are `campaign simulate`'s (same seed, same replica numbers), each at a step time drawn from the plan's
band (`Plan.step_time_range_s`: production runs when uncalibrated, the measured residuals when calibrated), so the
p90 covers the plan's uncertainty as well as failures (docs/plan-model.md#the-band). A too-short window is priced by how much
longer it would have to be: the replicas are run again to `OVERRUN` times its length (new draws: the simulator
draws its failures over the horizon it is given, so this second run is a separate estimate of the same law).

A snapshot window (`sim.stop_at_target: false`: the job keeps training past its target to the window's end, as
in a slice of a longer pre-training run) releases nothing after the target, so only the p90 side applies: the
target must be reached inside the window at p90.
Source: the window-length rule of docs/calendar.md; completion times from `campaign.sim.simulate_summary` replicas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from campaign.calendar.gaps import Pricing, released_capacity, released_seconds
from campaign.window_verdict import DAY_S, empirical_quantile, window_sufficiency

OVERRUN = 1.5  # replicas run to 1.5 x the window so a too-short window is priced by the time it lacks


@dataclass(frozen=True)
class WindowLength:
    window_days: float
    replicas: int
    p_target_in_window: float  # the share of replicas that reach the target inside the window
    p90_completion_days: float | None  # None: later than every horizon simulated (more than 10% unfinished)
    p99_completion_days: float | None
    expected_idle_tail_h: float  # mean time released after an early finish (0 for unfinished replicas)
    expected_idle_tail_node_hours: float
    expected_idle_tail_cost_usd: float
    shortfall_node_hours: float  # too short: the booking's nodes x (p90 - window), what lengthening costs
    shortfall_cost_usd: float
    trains_through: bool  # a snapshot window: the job trains to the window's end (no idle tail)
    verdict: str  # ok, too_short, too_long
    message: str
    # The p90 with the failure rates taken as known (their posterior draws off); None when no rate carries
    # observed failures and exposure, or when more than 10% of those replicas do not finish.
    p90_known_rates_days: float | None = None
    # The plan's step-time band each replica drew its step time from (multipliers on the plan's step time), and how
    # much of the p90 beyond the failure-free plan came from it and from the failure model (days; None if unknown).
    step_time_band: tuple[float, float] | None = None
    p90_from_plan_days: float | None = None
    p90_from_failures_days: float | None = None
    # The p10 and p50 of the day the target is reached, as the p90 (the same figures as `campaign simulate`'s).
    p10_target_days: float | None = None
    p50_target_days: float | None = None
    # What was simulated to reach this verdict (replicas, seed, horizon, step-time band), as the message says it.
    simulated: str = ""

    def to_json(self) -> dict[str, Any]:
        """The schedule gate's `window_length` details (and `campaign plan --json`'s `window_length`)."""
        return asdict(self)


def _days(seconds: float) -> str:
    return f"{seconds / DAY_S:.2f} days" if math.isfinite(seconds) else "beyond the window"


def assess_window_length(
    completions_s: Sequence[float | None],
    window_s: float,
    booked_nodes: int,
    pricing: Pricing,
    trains_through: bool = False,
    longer_completions_s: Sequence[float | None] | None = None,
    simulated: str = "",
) -> WindowLength:
    """Judge a window of `window_s` against the times replicas reach the target (None: not inside it).

    `longer_completions_s` (replicas run past the window) price a too-short window: the p90 it would need."""
    times = [math.inf if t is None or t > window_s else float(t) for t in completions_s]
    n = len(times)
    done = [t for t in times if math.isfinite(t)]
    judged = window_sufficiency(completions_s, window_s, trains_through)
    p_done = judged.p_target_in_window
    p90, p99 = (empirical_quantile(times, q) if n else math.inf for q in (0.90, 0.99))  # seconds, as judged
    # The idle tail is capacity released after an early finish, in whole seconds and priced as the calendar prices
    # the early-finish gap (campaign.calendar.gaps.released_capacity), here the mean over the replicas; a snapshot
    # job trains on, releasing nothing.
    tail_s = 0.0 if trains_through else (sum(released_seconds(window_s, t) for t in done) / n if n else 0.0)
    tail = released_capacity(tail_s, booked_nodes, pricing)
    tail_nh, tail_cost = tail.node_hours, tail.cost_usd
    days = window_s / DAY_S
    needed = p90
    if not math.isfinite(p90) and longer_completions_s:
        needed = empirical_quantile([math.inf if t is None else float(t) for t in longer_completions_s], 0.90)
    short_nh = (needed - window_s) / 3600.0 * booked_nodes if window_s < needed < math.inf else 0.0
    short_cost = pricing.cost(short_nh).cost_usd

    verdict = judged.verdict
    if verdict == "too_short":
        if window_s < needed < math.inf:
            lengthen = (
                f"lengthening it to the p90 ({_days(needed)}{'' if math.isfinite(p90) else ', from replicas run past the window'}) "
                f"books {(needed - window_s) / 3600:.1f} h x {booked_nodes} nodes = {short_nh:,.0f} "
                f"node-hours more (${short_cost:,.2f}); set window.days to at least "
                f"{math.ceil(needed / DAY_S * 100) / 100:.2f}"
            )
        else:
            lengthen = (
                f"more than 10% of the replicas had not reached the target by {OVERRUN:g} x the window "
                f"({OVERRUN * days:.2f} days, a second simulation of the same replicas to that horizon): lengthen "
                "window.days well beyond it"
            )
        message = (
            f"window of {days:.2f} days is shorter than the campaign's p90 completion time ({_days(p90)}): "
            f"{1 - p_done:.0%} of {n} replicas do not finish in it (reach the target), and such a window costs its whole "
            f"booking ({window_s / 3600 * booked_nodes:,.0f} node-hours, "
            f"${pricing.cost(window_s / 3600 * booked_nodes).cost_usd:,.2f}) without reaching "
            f"plan.target_tokens; {lengthen}, or lower plan.target_tokens"
        )
    elif verdict == "too_long":
        message = (
            f"window of {days:.2f} days is longer than the campaign's p99 completion time ({_days(p99)}): "
            f"the expected idle tail after the job finishes is {tail_s / 3600:.1f} h x {booked_nodes} "
            f"nodes = {tail_nh:,.0f} node-hours (${tail_cost:,.2f} of released capacity, the mean of {n} "
            "replicas; the run's own is in its report and on the calendar); set window.days "
            f"between {math.ceil(p90 / DAY_S * 100) / 100:.2f} and {math.floor(p99 / DAY_S * 100) / 100:.2f}"
            " (the p90 and p99), or raise plan.target_tokens"
        )
    else:
        upper = (
            "the job trains through the window (sim.stop_at_target: false), so nothing is released after "
            "the target and the p99 side does not apply"
            if trains_through
            else f"p99 ({_days(p99)})"
        )
        message = (
            f"window of {days:.2f} days lies between the p90 ({_days(p90)}) and {upper}; P(target "
            f"in window) {p_done:.0%} of {n} replicas, expected idle tail after an early finish {tail_s / 3600:.1f} h "
            f"(${tail_cost:,.2f}, the mean of {n} replicas; the run's own is in its report and on the calendar)"
        )
    if simulated:
        message = f"{simulated}: {message}"
    return WindowLength(
        days,
        n,
        p_done,
        judged.p90_target_days,
        judged.p99_target_days,
        tail_s / 3600.0,
        tail_nh,
        tail_cost,
        short_nh,
        short_cost,
        trains_through,
        verdict,
        message,
        p10_target_days=judged.p10_target_days,
        p50_target_days=judged.p50_target_days,
        simulated=simulated,
    )


def with_rate_uncertainty(
    verdict: WindowLength, known_rates_completions_s: Sequence[float | None], window_s: float
) -> WindowLength:
    """The verdict's message saying how much of its p90 comes from not knowing the fitted failure rates: the
    same replicas (same seeds) with the rates taken as known give the p90 it is compared with."""
    times = [math.inf if t is None or t > window_s else float(t) for t in known_rates_completions_s]
    known = empirical_quantile(times, 0.90) if times else math.inf
    known_days = known / DAY_S if math.isfinite(known) else None
    p90 = verdict.p90_completion_days
    if known_days is None or p90 is None:
        part = (
            f"with the fitted failure rates taken as known the p90 is {_days(known)}: the rates' uncertainty "
            "(their observed failures and exposure) is part of this verdict"
        )
    else:
        part = (
            f"{(p90 - known_days) * 24:+.1f} h of the p90 comes from not knowing the failure rates (p90 "
            f"{known_days:.2f} days with the fitted rates taken as known); more incident history narrows it"
        )
    return replace(verdict, message=f"{verdict.message}; {part}", p90_known_rates_days=known_days)


def with_p90_split(
    verdict: WindowLength,
    band: tuple[float, float],
    factors: Sequence[float],
    failure_free_s: float,
    p90_s: float,
) -> WindowLength:
    """The verdict with the share of its p90 (`p90_s`) that came from the step-time band (the failure-free time at
    the band's p90 draw, less the plan's point) and from failures (the rest of the p90 beyond the failure-free
    plan)."""
    if not math.isfinite(p90_s) or not factors:
        return replace(verdict, step_time_band=band)
    plan_s = failure_free_s * (empirical_quantile(factors, 0.90) - 1.0)
    failures_s = p90_s - failure_free_s - plan_s
    note = (
        f"; the p90 is {p90_s / DAY_S:.2f} days against {failure_free_s / DAY_S:.2f} failure-free at "
        f"the plan's step time: {plan_s / DAY_S:+.2f} days from the step-time band "
        f"({band[0]:.2f}-{band[1]:.2f}x the plan's step), {failures_s / DAY_S:+.2f} days from failures"
    )
    return replace(
        verdict,
        message=verdict.message + note,
        step_time_band=band,
        p90_from_plan_days=plan_s / DAY_S,
        p90_from_failures_days=failures_s / DAY_S,
    )

"""The window length as a decision with a price, judged from simulated replicas of the window.

A window shorter than the campaign's p90 completion time leaves more than one chance in ten of not finishing;
one longer than its p99 books capacity the job will almost surely release unused (the idle tail after an early
finish, a gap on the cluster's calendar). Percentiles are empirical over the replicas, a replica that did not
finish counting as later than the window (so p90 "beyond the window" means more than 10% did not finish); with
few replicas they are conservative (p99 of 8 replicas is the slowest one).
Source: the window-length rule of issue 12; completion times from `campaign.sim.simulate_summary` replicas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from campaign.calendar.catalog import cluster_identity
from campaign.calendar.gaps import Pricing
from campaign.config import CampaignConfig

DAY_S = 86_400.0


def empirical_quantile(values: Sequence[float], q: float) -> float:
    """The smallest value with at least a share q of the values at or below it (inverted CDF)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class WindowLength:
    window_days: float
    replicas: int
    p_complete_in_window: float
    p90_completion_days: float | None      # None: beyond the window (more than 10% did not finish)
    p99_completion_days: float | None
    expected_idle_tail_h: float            # mean time released after an early finish (0 for unfinished replicas)
    expected_idle_tail_node_hours: float
    expected_idle_tail_cost_usd: float
    verdict: str                           # ok, too_short, too_long
    message: str

    def as_details(self) -> dict[str, Any]:
        return asdict(self)


def assess_window_length(completions_s: Sequence[float | None], window_s: float, booked_nodes: int,
                         pricing: Pricing) -> WindowLength:
    """Judge a window of `window_s` against replica completion times (None: did not finish)."""
    times = [t if t is not None and t <= window_s else math.inf for t in completions_s]
    n = len(times)
    done = [t for t in times if math.isfinite(t)]
    p_done = len(done) / n if n else 0.0
    p90, p99 = empirical_quantile(times, 0.90), empirical_quantile(times, 0.99)
    tail_s = sum(window_s - t for t in done) / n if n else 0.0
    tail_nh = tail_s / 3600.0 * booked_nodes
    tail_cost = pricing.cost(tail_nh)["cost_usd"]
    days = window_s / DAY_S

    def d(x: float) -> float | None:
        return x / DAY_S if math.isfinite(x) else None

    if not p90 <= window_s:
        p90_text = "beyond the window" if not math.isfinite(p90) else f"{p90 / DAY_S:.2f} days"
        verdict = "too_short"
        message = (f"window of {days:.2f} days is shorter than the campaign's p90 completion time ({p90_text}): "
                   f"{1 - p_done:.0%} of {n} replicas did not finish in it, and a window that ends before the job "
                   f"leaves its last checkpoint's work and the booking's {window_s / 3600 * booked_nodes:,.0f} "
                   "node-hours short of the target; lengthen window.days or lower plan.target_tokens")
    elif p99 < window_s:
        verdict = "too_long"
        message = (f"window of {days:.2f} days is longer than the campaign's p99 completion time ({p99 / DAY_S:.2f} "
                   f"days): the expected idle tail after the job finishes is {tail_s / 3600:.1f} h x {booked_nodes} "
                   f"nodes = {tail_nh:,.0f} node-hours (${tail_cost:,.2f} of released capacity); shorten "
                   f"window.days towards {p99 / DAY_S:.2f}")
    else:
        verdict = "ok"
        p99_text = f"{p99 / DAY_S:.2f} days" if math.isfinite(p99) else "beyond the window"
        message = (f"window of {days:.2f} days lies between the p90 ({p90 / DAY_S:.2f} days) and p99 ({p99_text}) "
                   f"completion times; P(finish in window) {p_done:.0%}, expected idle tail "
                   f"{tail_s / 3600:.1f} h (${tail_cost:,.2f})")
    return WindowLength(days, n, p_done, d(p90), d(p99), tail_s / 3600.0, tail_nh, tail_cost, verdict, message)


def judge_window(config: CampaignConfig, plan: Any) -> WindowLength:
    """The window judged from `gates.config.window_replicas` seeded replicas of it (the config's seed)."""
    from campaign.sim import simulate_summary
    from campaign.window import window_inputs

    inputs = window_inputs(config, plan)
    # The summary fast path (no event log, no power series): the same completion time as `simulate`.
    completions = [simulate_summary(inputs, replica=i)["completion_s"]
                   for i in range(config.gates.config.window_replicas)]
    return assess_window_length(completions, config.window.days * DAY_S, config.cluster.booked_nodes,
                                cluster_identity(config.cluster).pricing)

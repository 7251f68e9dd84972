"""The window's verdict from replicas: the one rule `campaign plan`, `campaign simulate`, its sweep ranking, the
reports and the `schedule` gate read, so they agree on whether a window suffices.

What is judged is when each replica's committed tokens first reach `plan.target_tokens` (`target_reached_s` of the
replica summary): for a window that stops at the target this is its completion; a snapshot window trains on, but
reaches its target all the same. The window suffices when the p90 of that day lies inside it; a window that stops
at the target is too long when even the p99 replica reaches it before the window ends (capacity booked and
released unused). Percentiles are empirical (inverted CDF) over every replica, one that does not reach the target
inside the window counting as later than every one that does; with fewer than 100 replicas the p99 is the slowest.
This module sits below both the calendar (which prices the verdict) and the simulator (whose replicas it judges).
Source: the window-length rule of docs/calendar.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from campaign.records import JsonRecord

DAY_S = 86_400.0

SUFFICIENCY_RULE = (
    "the window suffices when at least 90% of the replicas reach the target inside it (the p90 of the day the "
    "target is reached lies inside the window); a window that stops at the target is too long when even the "
    "p99 replica reaches it before the window ends"
)
# The rule in one line, as a gate's threshold reads it.
RULE_SHORT = "p90 of the day the target is reached <= window"
RULE_SHORT_STOPPING = "p90 of the day the target is reached <= window <= p99"


def rule_threshold(window_days: float, trains_through: bool) -> str:
    """The rule as a threshold against this window (the schedule gate's table and state message)."""
    if trains_through:
        return f"{RULE_SHORT} ({window_days:g} days; a snapshot window: the p99 side does not apply)"
    return f"{RULE_SHORT_STOPPING} ({window_days:g} days)"


@dataclass(frozen=True, slots=True)
class WindowSufficiency(JsonRecord):
    """Whether the target is reached inside the window often enough: the shared verdict of every output.

    The days are empirical percentiles (inverted CDF) of the day each replica reaches the target (None: the
    percentile falls among the replicas that did not reach it inside the window); `campaign simulate`'s
    `target_days` p10/p50/p90 and `window_length` are these figures."""

    replicas: int
    reached: int  # replicas whose committed tokens reached the target inside the window
    p_target_in_window: float
    p90_target_days: float | None
    p99_target_days: float | None
    trains_through: bool
    verdict: str  # ok, too_short, too_long
    p10_target_days: float | None = None
    p50_target_days: float | None = None

    # `to_json()` is the `campaign simulate --json` `summary.window_length` object (keys: docs/design.md).
    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("suffices", "rule")

    @property
    def suffices(self) -> bool:
        return self.verdict != "too_short"

    @property
    def rule(self) -> str:
        return SUFFICIENCY_RULE


def empirical_quantile(values: Sequence[float], q: float) -> float:
    """The smallest value with at least a share q of the values at or below it (inverted CDF)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def judged_times_s(target_times_s: Sequence[float | None], window_s: float) -> list[float]:
    """Each replica's target time as the rule reads it: infinity where it was not reached inside the window."""
    return [math.inf if t is None or t > window_s else float(t) for t in target_times_s]


def days_or_none(seconds: float) -> float | None:
    return seconds / DAY_S if math.isfinite(seconds) else None


def window_sufficiency(
    target_times_s: Sequence[float | None], window_s: float, trains_through: bool
) -> WindowSufficiency:
    """The shared verdict from each replica's target time (None: not reached in the window)."""
    times = judged_times_s(target_times_s, window_s)
    n = len(times)
    reached = sum(1 for t in times if math.isfinite(t))
    p10, p50, p90, p99 = (empirical_quantile(times, q) if n else math.inf for q in (0.10, 0.50, 0.90, 0.99))
    if not p90 <= window_s:
        verdict = "too_short"
    elif p99 < window_s and not trains_through:
        verdict = "too_long"
    else:
        verdict = "ok"
    return WindowSufficiency(
        replicas=n,
        reached=reached,
        p_target_in_window=p_target_in_window(target_times_s, window_s),
        p90_target_days=days_or_none(p90),
        p99_target_days=days_or_none(p99),
        trains_through=trains_through,
        verdict=verdict,
        p10_target_days=days_or_none(p10),
        p50_target_days=days_or_none(p50),
    )


def p_target_in_window(target_times_s: Sequence[float | None], window_s: float) -> float:
    """P(target in window): the share of replicas whose committed tokens reached the target inside the window."""
    times = judged_times_s(target_times_s, window_s)
    return sum(1 for t in times if math.isfinite(t)) / len(times) if times else 0.0


def plan_band(step_time_s: float, step_time_range_s: Sequence[float]) -> tuple[float, float]:
    """The plan's step-time range as multipliers on its step time ((1, 1) for a plan without one)."""
    low, high = (float(x) for x in step_time_range_s) if len(step_time_range_s) == 2 else (0.0, 0.0)
    return (low / step_time_s, high / step_time_s) if low > 0 and high > 0 and step_time_s > 0 else (1.0, 1.0)

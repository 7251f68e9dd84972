"""The first, quadratic implementation of `earliest_fit` and `least_idle_fit` (campaign/calendar/timeline.py before
the sweep): each candidate start re-checked with `blocking`, O(n) candidates x O(n log n) each. Kept as the
reference the fast sweep must agree with exactly (tests/unit/test_calendar_fit.py) and as the baseline of
benchmarks/calendar/bench_fit.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from campaign.calendar.timeline import Booking, Placement, _events, _holding, blocking, placement, utc_seconds


def earliest_fit_quadratic(
    bookings: Sequence[Booking], nodes: int, duration: timedelta, capacity: int, not_before: datetime
) -> datetime:
    not_before = utc_seconds(not_before)
    candidates = sorted(
        {not_before} | {b.held_until for b in _holding(bookings) if b.held_until > not_before}
    )
    for start in candidates:
        if not blocking(bookings, start, start + duration, nodes, capacity):
            return start
    raise AssertionError("unreachable: the cluster is free after its last booking")


def least_idle_fit_quadratic(
    bookings: Sequence[Booking], nodes: int, duration: timedelta, capacity: int, not_before: datetime
) -> Placement:
    not_before = utc_seconds(not_before)
    held = _holding(bookings)
    candidates = {not_before} | {b.held_until for b in held} | {b.start - duration for b in held}
    best: Placement | None = None
    events = _events(bookings)
    for start in sorted(t for t in candidates if t >= not_before):
        if blocking(bookings, start, start + duration, nodes, capacity):
            continue
        p = placement(bookings, start, nodes, duration, not_before, events)
        if best is None or p.stranded_node_seconds < best.stranded_node_seconds:
            best = p
    if best is None:
        best = placement(
            bookings,
            earliest_fit_quadratic(bookings, nodes, duration, capacity, not_before),
            nodes,
            duration,
            not_before,
        )
    return best

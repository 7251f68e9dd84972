"""The cluster's capacity over time: bookings as a step function of nodes in use, the idle gaps it leaves, and
where a new booking fits.

A booking holds `nodes` over [start, end) (an executed booking only until its actual end: the rest of its window
is released capacity, an "early finish" gap). Bookings may overlap in time while their nodes fit the cluster's
total. Times are whole seconds (UTC), so node-seconds are exact integers and busy + idle = total x horizon exactly.
Pure functions over plain dataclasses: no database, no clock.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

# Statuses that hold capacity: "held" is a tentative hold while a person decides whether to book it (made "booked"
# on a yes, "cancelled" on a no, a timeout or a cancelled run); "cancelled" holds none.
HELD = "held"
HOLDING = ("booked", "executed", HELD)
CAMPAIGN, MAINTENANCE = "campaign", "maintenance"


def utc_seconds(moment: datetime) -> datetime:
    """`moment` in UTC, truncated to a whole second (a naive time is taken as UTC)."""
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.replace(microsecond=0)


def ceil_minute(moment: datetime) -> datetime:
    """`moment` rounded up to the next whole minute (UTC)."""
    moment = utc_seconds(moment)
    return moment if moment.second == 0 else moment.replace(second=0) + timedelta(minutes=1)


ALIGN_S = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}


def ceil_aligned(moment: datetime, align: str = "second") -> datetime:
    """`moment` rounded up to the next whole second, minute, hour or day (midnight) of UTC."""
    moment = utc_seconds(moment)
    step = ALIGN_S[align]
    epoch_s = int(moment.timestamp())
    return moment + timedelta(seconds=-epoch_s % step)


def floor_aligned(moment: datetime, align: str = "second") -> datetime:
    """`moment` rounded down to a whole second, minute, hour or day (midnight) of UTC."""
    up = ceil_aligned(moment, align)
    return up if up == utc_seconds(moment) else up - timedelta(seconds=ALIGN_S[align])


@dataclass(frozen=True)
class Booking:
    booking_id: str
    commitment_id: str
    kind: str  # campaign or maintenance
    campaign: str
    nodes: int
    start: datetime
    end: datetime  # the booked end
    status: str = "booked"  # held, booked, executed, cancelled
    actual_end: datetime | None = None
    workspace: str | None = None
    config_digest: str | None = None
    data_digest: str | None = None
    note: str = ""
    created_at: datetime | None = None

    @property
    def holds(self) -> bool:
        return self.status in HOLDING

    @property
    def held_until(self) -> datetime:
        """End of the capacity it holds: the actual end once executed (never past the booked end)."""
        if self.actual_end is not None:
            return min(self.actual_end, self.end)
        return self.end

    @property
    def released_early(self) -> bool:
        return self.holds and self.actual_end is not None and self.actual_end < self.end

    def describe(self) -> str:
        what = (
            f"maintenance {self.commitment_id}"
            if self.kind == MAINTENANCE
            else f"commitment {self.commitment_id} of campaign {self.campaign}"
        )
        tentative = ", held while its approval is pending" if self.status == HELD else ""
        return (
            f"{what} ({self.nodes} nodes, {self.start:%Y-%m-%d %H:%M} .. {self.held_until:%Y-%m-%d %H:%M} UTC"
            f"{tentative})"
        )


@dataclass(frozen=True)
class Segment:
    """A stretch of time with a constant number of nodes in use; `released_by` names the booking whose early
    finish freed this stretch (if any)."""

    start: datetime
    end: datetime
    used_nodes: int
    released_by: str | None = None

    @property
    def seconds(self) -> int:
        return int((self.end - self.start).total_seconds())


def _holding(bookings: Iterable[Booking]) -> list[Booking]:
    return [b for b in bookings if b.holds and b.held_until > b.start]


def segments(bookings: Sequence[Booking], start: datetime, end: datetime) -> list[Segment]:
    """[start, end) cut wherever the nodes in use (or the reason a stretch is free) change; adjacent stretches
    alike are merged. Covers the interval exactly. A sweep over the bookings' edges: O(n log n)."""
    start, end = utc_seconds(start), utc_seconds(end)
    cuts = {start, end}
    deltas: dict[datetime, int] = defaultdict(int)
    opens: dict[datetime, list[str]] = defaultdict(list)
    closes: dict[datetime, list[str]] = defaultdict(list)
    for b in _holding(bookings):
        s, e = max(b.start, start), min(b.held_until, end)
        if s < e:
            deltas[s] += b.nodes
            deltas[e] -= b.nodes
            cuts.update((s, e))
    for b in bookings:
        if b.released_early:
            s, e = max(b.held_until, start), min(b.end, end)
            if s < e:
                opens[s].append(b.commitment_id)
                closes[e].append(b.commitment_id)
                cuts.update((s, e))
    times = sorted(cuts)
    out: list[Segment] = []
    used = 0
    released: list[str] = []
    for t0, t1 in itertools.pairwise(times):
        used += deltas.get(t0, 0)
        for cid in closes.get(t0, ()):
            released.remove(cid)
        released.extend(opens.get(t0, ()))
        label = released[0] if released else None
        if out and out[-1].used_nodes == used and out[-1].released_by == label:
            out[-1] = Segment(out[-1].start, t1, used, label)
        else:
            out.append(Segment(t0, t1, used, label))
    return out


def peak_nodes(bookings: Sequence[Booking], start: datetime, end: datetime) -> int:
    """The most nodes in use at any moment of [start, end)."""
    return max((s.used_nodes for s in segments(bookings, start, end)), default=0)


def blocking(
    bookings: Sequence[Booking], start: datetime, end: datetime, nodes: int, capacity: int
) -> list[Booking]:
    """The bookings that hold the capacity a new booking of `nodes` over [start, end) needs ([] if it fits):
    those in use at the first moment where it would not fit."""
    near = [b for b in _holding(bookings) if b.start < end and b.held_until > start]
    for seg in segments(near, start, end):
        if seg.used_nodes + nodes > capacity:
            return [b for b in near if b.start <= seg.start and b.held_until >= seg.end]
    return []


class FreeStarts:
    """Where a booking of `nodes` for `duration` fits among `bookings`: built once by a sweep (O(n log n)),
    asked per start (O(log n)).

    Usage is a step function; every stretch [a, b) where more than capacity - nodes are in use rules out the starts
    in the open interval (a - duration, b) (a window [s, s + duration) meets [a, b) exactly then). The ruled-out
    intervals are merged, sorted by their left end, so a start fits unless the last interval opening before it
    is still open at it. The same answer as asking `blocking` at each start, without its O(n) per start."""

    def __init__(self, bookings: Sequence[Booking], nodes: int, duration: timedelta, capacity: int) -> None:
        if nodes > capacity:
            raise ValueError(f"a booking of {nodes} nodes cannot fit a cluster of {capacity} nodes")
        deltas: dict[datetime, int] = defaultdict(int)
        for b in _holding(bookings):
            deltas[b.start] += b.nodes
            deltas[b.held_until] -= b.nodes
        times = sorted(deltas)
        limit = capacity - nodes
        self.lefts: list[datetime] = []
        self.rights: list[datetime] = []
        used = 0
        for t0, t1 in itertools.pairwise(times):
            used += deltas[t0]
            if used <= limit:
                continue
            left = t0 - duration
            if self.rights and left < self.rights[-1]:  # overlaps the previous one (both open): merge
                self.rights[-1] = max(self.rights[-1], t1)
            else:
                self.lefts.append(left)
                self.rights.append(t1)

    def fits(self, start: datetime) -> bool:
        i = bisect.bisect_left(self.lefts, start) - 1  # the last ruled-out interval opening before start
        return i < 0 or self.rights[i] <= start


def earliest_fit(
    bookings: Sequence[Booking],
    nodes: int,
    duration: timedelta,
    capacity: int,
    not_before: datetime,
    align: str = "second",
) -> datetime:
    """The earliest start at or after `not_before`, on a whole `align` (second, minute, hour, day) of UTC, where
    `nodes` fit for `duration` (nodes <= capacity).

    Usage only falls when a booking ends, so the answer is `not_before` or the end of a booking, rounded up to the
    alignment (between such an end c and the earliest aligned fit s, every booking in use is still in use at s, so
    the first aligned moment after c fits too); after the last booking ends the cluster is free, so there always is
    one. O(n log n)."""
    not_before = ceil_aligned(not_before, align)
    ahead = [b for b in _holding(bookings) if b.held_until > not_before]  # only these can meet a later window
    if nodes > capacity:
        raise ValueError(f"a booking of {nodes} nodes cannot fit a cluster of {capacity} nodes")
    if not blocking(ahead, not_before, not_before + duration, nodes, capacity):
        return not_before  # the common case, in one O(n) pass; otherwise the sweep
    free = FreeStarts(ahead, nodes, duration, capacity)
    candidates = sorted({not_before} | {ceil_aligned(b.held_until, align) for b in ahead})
    for start in candidates:
        if free.fits(start):
            return start
    raise AssertionError("unreachable: the cluster is free after its last booking")  # pragma: no cover


@dataclass(frozen=True)
class Placement:
    """A start proposed for a new booking, with the idle stretches it leaves next to its neighbours."""

    start: datetime
    end: datetime
    lead_s: int  # idle time between the last change on the calendar (or `not_before`) and the start
    trail_s: int  # idle time between the end and the next change on the calendar (0 if none follows)
    nodes: int
    reason: str = ""
    blockers: tuple[str, ...] = field(default_factory=tuple)

    @property
    def stranded_node_seconds(self) -> int:
        """Idle capacity of the booking's size left beside it: (lead + trail) x nodes."""
        return (self.lead_s + self.trail_s) * self.nodes


def _events(bookings: Sequence[Booking]) -> list[datetime]:
    return sorted({t for b in _holding(bookings) for t in (b.start, b.held_until)})


def placement(
    bookings: Sequence[Booking],
    start: datetime,
    nodes: int,
    duration: timedelta,
    not_before: datetime,
    events: list[datetime] | None = None,
) -> Placement:
    """A start with the idle stretches it leaves: back to the last change on the calendar (or `not_before`) and on
    to the next one. `events` is `_events(bookings)` when the caller already has it."""
    start = utc_seconds(start)
    end = start + duration
    events = _events(bookings) if events is None else events
    i = bisect.bisect_right(events, start)
    j = bisect.bisect_left(events, end)
    lead = start - max(utc_seconds(not_before), events[i - 1]) if i else start - utc_seconds(not_before)
    trail = (events[j] - end) if j < len(events) else timedelta(0)
    return Placement(start, end, max(0, int(lead.total_seconds())), int(trail.total_seconds()), nodes)


def least_idle_fit(
    bookings: Sequence[Booking],
    nodes: int,
    duration: timedelta,
    capacity: int,
    not_before: datetime,
    align: str = "second",
) -> Placement:
    """The fitting start on a whole `align` of UTC that strands the least idle capacity beside existing bookings
    (ties: the earliest).

    Candidates are `not_before`, every booking's end (start right after it) and every booking's start minus the
    duration (end right before it): a placement that touches its neighbours leaves no stretch between them. Each is
    moved onto the alignment (an end rounded up, a start-before rounded down), the same grid `earliest_fit` searches,
    so the least idle start is never earlier than the earliest start that fits.
    O(n log n): each candidate is checked against `FreeStarts` and placed by bisection."""
    origin = utc_seconds(
        not_before
    )  # the idle stretch before a start is measured from here, as `placement` does
    not_before = ceil_aligned(not_before, align)
    held = _holding(bookings)
    free = FreeStarts([b for b in held if b.held_until > not_before], nodes, duration, capacity)
    candidates = (
        {not_before}
        | {ceil_aligned(b.held_until, align) for b in held}
        | {floor_aligned(b.start - duration, align) for b in held}
    )
    best: Placement | None = None
    events = _events(held)
    for start in sorted(t for t in candidates if t >= not_before):
        if not free.fits(start):
            continue
        p = placement(held, start, nodes, duration, origin, events)
        if best is None or p.stranded_node_seconds < best.stranded_node_seconds:
            best = p
    assert best is not None, "unreachable: the cluster is free after its last booking"
    return best

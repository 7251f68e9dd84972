"""Idle capacity priced as the defect it is: every gap on the cluster's calendar with its idle node-hours and cost.

An idle node still costs its GPU-hours (the cluster is paid for whether or not it computes) and draws idle power.
Cost of a gap = idle node-hours x GPUs per node x GPU-hour price + idle node-hours x idle node power (GPUs at
their idle draw plus the node overhead, times PUE) x energy price. The idle power model is the simulator's
(`campaign.sim.power`: idle GPUs at `accelerator.idle_w`, node overhead on, facility = IT x PUE).
Prices change (a new contract, a new energy tariff): each booking records the prices its config states, and a
price holds from the moment it was recorded until the next one. A gap is priced at the price in force over it (cut
where the price changes), so a later booking at a new price re-prices the future, never the past.
Source: the idle-hardware-as-loss framing of the project brief; prices and power from the cluster config.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from campaign.calendar.report_records import (
    BookingRow,
    CalendarReport,
    CalendarTotals,
    Gap,
    Horizon,
    IdleCost,
    PriceChange,
    PriceRow,
    ReleasedCapacity,
)
from campaign.calendar.timeline import MAINTENANCE, Booking, segments, utc_seconds

SECONDS_PER_HOUR = 3600


@dataclass(frozen=True)
class Pricing:
    gpus_per_node: int
    gpu_hour_usd: float
    energy_usd_per_mwh: float
    idle_node_w: float  # facility watts of one idle node (PUE included)

    @property
    def idle_node_hour_usd(self) -> float:
        return self.gpus_per_node * self.gpu_hour_usd + self.idle_node_w / 1e6 * self.energy_usd_per_mwh

    def cost(self, idle_node_hours: float) -> IdleCost:
        """The cost of idle node-hours, to the cent: GPU-hours and idle energy, and their sum."""
        gpu = idle_node_hours * self.gpus_per_node * self.gpu_hour_usd
        energy = idle_node_hours * self.idle_node_w / 1e6 * self.energy_usd_per_mwh
        return IdleCost(round(gpu, 2), round(energy, 2), round(gpu + energy, 2))

    def shown(self) -> PriceRow:
        """The price as the calendar report shows it, with what an idle node-hour costs."""
        return PriceRow(
            self.gpus_per_node,
            self.gpu_hour_usd,
            self.energy_usd_per_mwh,
            self.idle_node_w,
            self.idle_node_hour_usd,
        )


def released_seconds(window_s: float, completion_s: float | None) -> int:
    """Whole seconds of a window released after an early finish: from the job's end, rounded up to the second as
    the calendar records it (`record-actual-end`), to the window's end; 0 when the job did not finish."""
    if completion_s is None:
        return 0
    return max(0, round(window_s) - math.ceil(completion_s))


def released_capacity(released_s: float, nodes: int, pricing: Pricing) -> ReleasedCapacity:
    """The idle tail after an early finish, priced as the calendar prices its early-finish gap: the booking's nodes
    idle for `released_s` (GPU-hours at the GPU-hour price plus idle power at the energy price). The one
    definition the report, the `schedule` gate and the calendar show."""
    node_hours = released_s / SECONDS_PER_HOUR * nodes
    cost = pricing.cost(node_hours)
    return ReleasedCapacity(
        released_s / SECONDS_PER_HOUR, node_hours, cost.gpu_usd, cost.energy_usd, cost.cost_usd
    )


def idle_node_w(gpus_per_node: int, idle_w: float, node_overhead_w: float, pue: float) -> float:
    """Facility watts of one idle node: its GPUs at idle, the node overhead, times PUE."""
    return (gpus_per_node * idle_w + node_overhead_w) * pue


def _iso(moment: datetime) -> str:
    return utc_seconds(moment).isoformat().replace("+00:00", "Z")


def _hours(seconds: int) -> float:
    return seconds / SECONDS_PER_HOUR


PriceHistory = Sequence[tuple[datetime, Pricing]]


def price_at(history: PriceHistory, moment: datetime, default: Pricing) -> Pricing:
    """The price in force at `moment`: the newest recorded at or before it (before the first, the first)."""
    current = history[0][1] if history else default
    for valid_from, pricing in history:
        if valid_from > moment:
            break
        current = pricing
    return current


def calendar_report(
    cluster: str,
    capacity: int,
    pricing: Pricing,
    bookings: Sequence[Booking],
    start: datetime,
    end: datetime,
    history: PriceHistory = (),
) -> CalendarReport:
    """Bookings, gaps and totals over the horizon [start, end) (`to_json()`: the report's JSON).

    `pricing` is the newest price (shown as `prices`); `history` (valid_from, pricing), oldest first, prices each
    gap at the price in force over it; without it every gap is priced at `pricing`. Node-seconds are whole numbers,
    so busy + idle node-seconds = capacity x horizon seconds exactly; the hours shown are those integers / 3600."""
    start, end = utc_seconds(start), utc_seconds(end)
    horizon_s = int((end - start).total_seconds())
    history = sorted(((utc_seconds(t), p) for t, p in history), key=lambda row: row[0])
    changes = [t for t, _ in history[1:] if start < t < end]
    segs = segments(bookings, start, end)
    gaps = []
    busy_ns = 0
    idle_ns_by_price: dict[Pricing, int] = {}
    maintenance_ns = sum(
        s.used_nodes * s.seconds for s in segments([b for b in bookings if b.kind == MAINTENANCE], start, end)
    )
    for seg in segs:
        busy_ns += seg.used_nodes * seg.seconds
        idle = capacity - seg.used_nodes
        if idle <= 0 or seg.seconds <= 0:
            continue
        cuts = [seg.start, *(t for t in changes if seg.start < t < seg.end), seg.end]
        for t0, t1 in itertools.pairwise(cuts):
            seconds = int((t1 - t0).total_seconds())
            price = price_at(history, t0, pricing)
            idle_ns_by_price[price] = idle_ns_by_price.get(price, 0) + idle * seconds
            idle_nh = _hours(idle * seconds)
            cost = price.cost(idle_nh)
            gaps.append(
                Gap(
                    start=_iso(t0),
                    end=_iso(t1),
                    hours=_hours(seconds),
                    idle_nodes=idle,
                    idle_node_hours=idle_nh,
                    gpu_usd=cost.gpu_usd,
                    energy_usd=cost.energy_usd,
                    cost_usd=cost.cost_usd,
                    kind="early_finish" if seg.released_by else "unbooked",
                    released_by=seg.released_by,
                    gpu_hour_usd=price.gpu_hour_usd,
                    idle_node_hour_usd=price.idle_node_hour_usd,
                )
            )
    total_ns = capacity * horizon_s
    idle_ns = total_ns - busy_ns
    costs = [p.cost(_hours(ns)) for p, ns in idle_ns_by_price.items()]
    shown = [b for b in bookings if b.start < end and max(b.end, b.held_until) > start]
    return CalendarReport(
        cluster=cluster,
        horizon=Horizon(_iso(start), _iso(end), _hours(horizon_s)),
        prices=pricing.shown(),
        price_history=[
            PriceChange(
                _iso(t),
                p.gpus_per_node,
                p.gpu_hour_usd,
                p.energy_usd_per_mwh,
                p.idle_node_w,
                p.idle_node_hour_usd,
            )
            for t, p in history
        ],
        bookings=[_booking_row(b) for b in sorted(shown, key=lambda b: (b.start, b.commitment_id))],
        gaps=gaps,
        totals=CalendarTotals(
            cluster_nodes=capacity,
            horizon_node_hours=_hours(total_ns),
            busy_node_hours=_hours(busy_ns),
            maintenance_node_hours=_hours(maintenance_ns),
            idle_node_hours=_hours(idle_ns),
            idle_cost_usd=round(sum(c.cost_usd for c in costs), 2),
            idle_gpu_cost_usd=round(sum(c.gpu_usd for c in costs), 2),
            idle_energy_cost_usd=round(sum(c.energy_usd for c in costs), 2),
            early_finish_node_hours=_hours(
                sum(
                    (capacity - s.used_nodes) * s.seconds
                    for s in segs
                    if s.released_by and s.used_nodes < capacity
                )
            ),
            utilisation=busy_ns / total_ns if total_ns else 0.0,
            n_gaps=len(gaps),
        ),
    )


def _booking_row(b: Booking) -> BookingRow:
    return BookingRow(
        commitment_id=b.commitment_id,
        booking_id=b.booking_id,
        kind=b.kind,
        campaign=b.campaign,
        start=_iso(b.start),
        end=_iso(b.end),
        nodes=b.nodes,
        status=b.status,
        actual_end=_iso(b.actual_end) if b.actual_end else None,
        workspace=b.workspace,
        note=b.note or None,
    )

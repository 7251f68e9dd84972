"""The calendar's figures as typed records: what idle capacity costs, the calendar report (bookings, priced gaps and
totals over a horizon) and the proposals for a booking. `to_json()` gives the objects `campaign calendar show|propose
--json` print and the report file beside the calendar holds; `from_json()` reads a report back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from campaign.records import JsonRecord


@dataclass(frozen=True, slots=True)
class IdleCost(JsonRecord):
    """The cost of idle node-hours, to the cent: the GPU-hours, the idle energy, and their sum (USD)."""

    gpu_usd: float
    energy_usd: float
    cost_usd: float


@dataclass(frozen=True, slots=True)
class ReleasedCapacity(JsonRecord):
    """The idle tail after an early finish, priced as the calendar prices its early-finish gap."""

    hours: float
    node_hours: float
    gpu_usd: float
    energy_usd: float
    cost_usd: float


@dataclass(frozen=True, slots=True)
class Horizon(JsonRecord):
    start: str  # ISO 8601, UTC, "Z"
    end: str
    hours: float


@dataclass(frozen=True, slots=True)
class PriceRow(JsonRecord):
    """The newest price as the report shows it, with what an idle node-hour costs at it."""

    gpus_per_node: int
    gpu_hour_usd: float
    energy_usd_per_mwh: float
    idle_node_w: float  # facility watts of one idle node (PUE included)
    idle_node_hour_usd: float


@dataclass(frozen=True, slots=True)
class PriceChange(JsonRecord):
    """A price of the calendar's history and the moment it came into force."""

    valid_from: str
    gpus_per_node: int
    gpu_hour_usd: float
    energy_usd_per_mwh: float
    idle_node_w: float
    idle_node_hour_usd: float


@dataclass(frozen=True, slots=True)
class BookingRow(JsonRecord):
    """One booking on the calendar as the report lists it."""

    commitment_id: str
    booking_id: str
    kind: str
    campaign: str
    start: str
    end: str
    nodes: int
    status: str
    actual_end: str | None  # where a job finished early and gave its tail back
    workspace: str | None
    note: str | None


@dataclass(frozen=True, slots=True)
class Gap(JsonRecord):
    """One idle stretch of the calendar, cut where the price changes, with what it costs at the price over it."""

    start: str
    end: str
    hours: float
    idle_nodes: int
    idle_node_hours: float
    gpu_usd: float
    energy_usd: float
    cost_usd: float
    kind: str  # early_finish (a booking released its tail) or unbooked
    released_by: str | None  # the booking that finished early
    gpu_hour_usd: float
    idle_node_hour_usd: float


@dataclass(frozen=True, slots=True)
class CalendarTotals(JsonRecord):
    """The horizon's totals: node-hours busy, in maintenance and idle, what the idle ones cost, and utilisation."""

    cluster_nodes: int
    horizon_node_hours: float
    busy_node_hours: float
    maintenance_node_hours: float
    idle_node_hours: float
    idle_cost_usd: float
    idle_gpu_cost_usd: float
    idle_energy_cost_usd: float
    early_finish_node_hours: float
    utilisation: float
    n_gaps: int


@dataclass(frozen=True, slots=True)
class CalendarReport(JsonRecord):
    """Bookings, gaps and totals of a cluster's calendar over a horizon (`gaps.calendar_report`); `calendar` is
    the calendar file it was read from, `gantt_png` the chart drawn from it (each once known)."""

    cluster: str
    horizon: Horizon
    prices: PriceRow
    price_history: list[PriceChange]
    bookings: list[BookingRow]
    gaps: list[Gap]
    totals: CalendarTotals
    calendar: str | None = None
    gantt_png: str | None = None

    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"calendar", "gantt_png"})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CalendarReport:
        """A report as `to_json()` wrote it (the calendar-report flow's result, the file beside the calendar)."""
        return cls(
            cluster=data["cluster"],
            horizon=Horizon(**data["horizon"]),
            prices=PriceRow(**data["prices"]),
            price_history=[PriceChange(**p) for p in data["price_history"]],
            bookings=[BookingRow(**b) for b in data["bookings"]],
            gaps=[Gap(**g) for g in data["gaps"]],
            totals=CalendarTotals(**data["totals"]),
            calendar=data.get("calendar"),
            gantt_png=data.get("gantt_png"),
        )


@dataclass(frozen=True, slots=True)
class PlacementRow(JsonRecord):
    """A start a booking could take, and the idle stretch of its size it leaves beside its neighbours, priced."""

    start: str
    end: str
    nodes: int
    idle_before_h: float
    idle_after_h: float
    gap_idle_node_hours: float
    gap_cost_usd: float


@dataclass(frozen=True, slots=True)
class RequestedStart(JsonRecord):
    """The configured `window.start`: auto (commit books the earliest), or a fixed start, whether it is past and
    whether it fits (`held_by`: the bookings in its way; only for a fixed start)."""

    auto: bool
    start: str
    in_past: bool
    fits: bool
    held_by: list[str] | None = None

    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"held_by"})


@dataclass(frozen=True, slots=True)
class Proposals(JsonRecord):
    """Where a booking could go (`proposals.propose`): the earliest start that fits, the least idle one, and the
    configured start's verdict."""

    cluster: str
    calendar: str
    cluster_nodes: int
    nodes: int
    hours: float
    not_before: str
    earliest: PlacementRow
    least_idle: PlacementRow
    align: str
    requested: RequestedStart

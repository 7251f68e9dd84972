"""Where a campaign could go on its cluster's calendar: the earliest start where it fits, and the start that
strands the least idle capacity beside existing bookings, each with the cost of the idle stretch it leaves."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from campaign.calendar.catalog import CalendarState
from campaign.calendar.gaps import SECONDS_PER_HOUR
from campaign.calendar.timeline import (
    Placement,
    ceil_minute,
    earliest_fit,
    least_idle_fit,
    placement,
    utc_seconds,
)
from campaign.errors import ConfigError


def _iso(moment: datetime) -> str:
    return utc_seconds(moment).isoformat().replace("+00:00", "Z")


def _placement_json(p: Placement, state: CalendarState) -> dict[str, Any]:
    idle_nh = p.stranded_node_seconds / SECONDS_PER_HOUR
    return {
        "start": _iso(p.start),
        "end": _iso(p.end),
        "nodes": p.nodes,
        "idle_before_h": p.lead_s / SECONDS_PER_HOUR,
        "idle_after_h": p.trail_s / SECONDS_PER_HOUR,
        "gap_idle_node_hours": idle_nh,
        "gap_cost_usd": state.pricing.cost(idle_nh)["cost_usd"],
    }


def propose(
    state: CalendarState,
    nodes: int,
    duration: timedelta,
    now: datetime,
    requested: datetime | None = None,
    align: str = "minute",
) -> dict[str, Any]:
    """The proposals for booking `nodes` for `duration` no earlier than now (rounded up to the minute): the earliest
    start (on a whole `align` of UTC, as `window.start: auto` books it) and the least idle one.

    The gap a start creates is the idle stretch of the booking's size between it and its neighbours on the
    calendar: from the last change before it (or now) to its start, and from its end to the next change."""
    if nodes > state.total_nodes:
        raise ConfigError(
            f"a booking of {nodes} nodes is larger than the cluster '{state.cluster}' "
            f"({state.total_nodes} nodes)",
            where=str(state.path),
            fix=f"book at most {state.total_nodes} nodes (cluster.nodes + cluster.spare_nodes)",
        )
    not_before = ceil_minute(now)
    first = earliest_fit(state.bookings, nodes, duration, state.total_nodes, not_before, align)
    earliest = placement(state.bookings, first, nodes, duration, not_before)
    tight = least_idle_fit(state.bookings, nodes, duration, state.total_nodes, not_before)
    out = {
        "cluster": state.cluster,
        "calendar": str(state.path),
        "cluster_nodes": state.total_nodes,
        "nodes": nodes,
        "hours": duration.total_seconds() / SECONDS_PER_HOUR,
        "not_before": _iso(not_before),
        "earliest": _placement_json(earliest, state),
        "least_idle": _placement_json(tight, state),
    }
    if requested is not None:
        from campaign.calendar.timeline import blocking

        start = utc_seconds(requested)
        holders = blocking(state.bookings, start, start + duration, nodes, state.total_nodes)
        out["requested"] = {
            "start": _iso(start),
            "in_past": start < utc_seconds(now),
            "fits": not holders,
            "held_by": [b.commitment_id for b in holders],
        }
    return out

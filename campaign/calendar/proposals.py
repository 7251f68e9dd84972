"""Where a campaign could go on its cluster's calendar: the earliest start where it fits, and the start that
strands the least idle capacity beside existing bookings, each with the cost of the idle stretch it leaves."""

from __future__ import annotations

from datetime import datetime, timedelta

from campaign.calendar.catalog import CalendarState
from campaign.calendar.gaps import SECONDS_PER_HOUR
from campaign.calendar.report_records import PlacementRow, Proposals, RequestedStart
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


def _placement_row(p: Placement, state: CalendarState) -> PlacementRow:
    idle_nh = p.stranded_node_seconds / SECONDS_PER_HOUR
    return PlacementRow(
        start=_iso(p.start),
        end=_iso(p.end),
        nodes=p.nodes,
        idle_before_h=p.lead_s / SECONDS_PER_HOUR,
        idle_after_h=p.trail_s / SECONDS_PER_HOUR,
        gap_idle_node_hours=idle_nh,
        gap_cost_usd=state.pricing.cost(idle_nh).cost_usd,
    )


def propose(
    state: CalendarState,
    nodes: int,
    duration: timedelta,
    now: datetime,
    requested: datetime | None = None,
    align: str = "minute",
) -> Proposals:
    """The proposals for booking `nodes` for `duration` no earlier than now (rounded up to the minute): the earliest
    start and the least idle one, both on a whole `align` of UTC (as `window.start: auto` books it), so the least
    idle is never before the earliest; and whether the configured start fits (`requested`: a fixed start, or
    `auto`, which commit resolves to the earliest).

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
    tight = least_idle_fit(state.bookings, nodes, duration, state.total_nodes, not_before, align)
    if requested is None:  # window.start: auto: commit books the earliest start that fits
        verdict = RequestedStart(auto=True, start=_iso(earliest.start), in_past=False, fits=True)
    else:
        from campaign.calendar.timeline import blocking

        start = utc_seconds(requested)
        holders = blocking(state.bookings, start, start + duration, nodes, state.total_nodes)
        verdict = RequestedStart(
            auto=False,
            start=_iso(start),
            in_past=start < utc_seconds(now),
            fits=not holders,
            held_by=[b.commitment_id for b in holders],
        )
    return Proposals(
        cluster=state.cluster,
        calendar=str(state.path),
        cluster_nodes=state.total_nodes,
        nodes=nodes,
        hours=duration.total_seconds() / SECONDS_PER_HOUR,
        not_before=_iso(not_before),
        earliest=_placement_row(earliest, state),
        least_idle=_placement_row(tight, state),
        align=align,
        requested=verdict,
    )


def proposal_text(out: Proposals) -> str:
    """The proposals as `campaign calendar propose` prints them: the configured start first (does it fit?), then
    the earliest and the least idle start on the same alignment (the least idle never before the earliest)."""
    q = out.requested
    if q.auto:
        verdict = f"auto: commit books the earliest start that fits, {q.start}"
    elif q.in_past:
        verdict = f"{q.start}: in the past; set window.start to a later time, or auto"
    elif q.fits:
        verdict = f"{q.start}: fits"
    else:
        verdict = (
            f"{q.start}: does not fit (held by {', '.join(q.held_by or [])}); the earliest start that fits is "
            f"{out.earliest.start}"
        )
    lines = [
        f"cluster {out.cluster} ({out.cluster_nodes} nodes): {out.nodes} nodes for {out.hours:g} h, "
        f"starts on a whole {out.align} of UTC (window.align)",
        f"  window.start in the config  {verdict}",
    ]
    same = out.least_idle.start == out.earliest.start
    for p, label, is_least_idle in (
        (out.earliest, "earliest start that fits", False),
        (out.least_idle, "least idle start that fits", True),
    ):
        lines.append(
            f"  {label:27s} {p.start} .. {p.end}  strands {p.gap_idle_node_hours:,.1f} idle node-h "
            f"(${p.gap_cost_usd:,.2f})" + (" (the same start)" if is_least_idle and same else "")
        )
    return "\n".join(lines)

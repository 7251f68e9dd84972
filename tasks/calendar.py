"""Calendar tasks: read the cluster's calendar, price its gaps, draw it, publish it; book, release, close out."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from campaign import calendar as cal
from campaign import store
from campaign.calendar.horizon import report_files
from campaign.calendar.recorded import calendar_report_of, gantt_chart
from campaign.calendar.summary import calendar_markdown
from campaign.config import LoadedConfig
from campaign.errors import Refused
from campaign.files import write_output
from tasks.artifacts import calendar_key


def calendar_of(loaded: LoadedConfig, ws: store.Workspace, override: str | None = None) -> Path:
    """The calendar of this campaign's cluster, beside its workspace (or --calendar / CAMPAIGN_CALENDAR)."""
    return cal.calendar_path(loaded.config.cluster.name, ws.root, override)


@task(name="calendar-report", cache_policy=None)
def report_calendar(path: Path, start: str | None, end: str | None, now: datetime) -> dict[str, Any]:
    """The calendar's bookings, gaps and totals over the horizon; the Gantt PNG and JSON beside the calendar file;
    a Prefect artifact."""
    report = calendar_report_of(path, start, end, now)
    png, report_json = report_files(path)
    chart = gantt_chart(report, png)  # drawn only when what it shows changed
    report = replace(report, gantt_png=str(png))
    out = report.to_json()
    write_output(report_json, json.dumps(out, indent=2, sort_keys=True, default=str) + "\n")
    totals = report.totals
    create_markdown_artifact(
        key=calendar_key(report.cluster),
        markdown=calendar_markdown(report, chart, str(png)),
        description=f"calendar of cluster {report.cluster}",
    )
    if report.gaps:
        create_table_artifact(
            key=calendar_key(report.cluster, "gaps"),
            table=out["gaps"],
            description=f"idle gaps of cluster {report.cluster}, priced",
        )
    get_run_logger().info(
        "calendar %s: %d bookings, %d gaps, utilisation %.1f%%, idle cost $%.2f",
        report.cluster,
        len(report.bookings),
        len(report.gaps),
        totals.utilisation * 100,
        totals.idle_cost_usd,
    )
    return out


def _book(
    ws: store.Workspace,
    loaded: LoadedConfig,
    data_digest: str,
    now: datetime,
    hold: bool,
    commitment_id: str | None,
) -> cal.Booking:
    from tasks.commit import commitment_id_for

    config = loaded.config
    window = config.window
    path = calendar_of(loaded, ws)
    booking = cal.book(
        path,
        cal.cluster_identity(config.cluster),
        cal.BookingRequest(
            commitment_id=commitment_id or commitment_id_for(ws, loaded.digest, data_digest),
            campaign=config.name,
            nodes=config.cluster.booked_nodes,
            duration=timedelta(seconds=round(window.days * 86_400)),
            start=window.fixed_start,
            align=window.align,
            workspace=str(ws.root),
            config_digest=loaded.digest,
            data_digest=data_digest,
        ),
        now,
        hold=hold,
    )
    get_run_logger().info(
        "calendar %s: %s %s %d nodes %s .. %s (booking %s)",
        path.name,
        booking.commitment_id,
        "holds, until the approval is answered," if booking.status == cal.HELD else "holds",
        booking.nodes,
        booking.start,
        booking.end,
        booking.booking_id,
    )
    return booking


@task(name="book-calendar", cache_policy=None)
def book_calendar(
    ws: store.Workspace,
    loaded: LoadedConfig,
    data_digest: str,
    now: datetime,
    commitment_id: str | None = None,
) -> cal.Booking:
    """Book the window on the cluster's calendar (one short locked transaction), or refuse naming what holds
    the capacity and the earliest start where the campaign fits. The workspace's commitment for these digests
    keeps its id; booking over this commitment's hold books exactly the held dates and nodes."""
    return _book(ws, loaded, data_digest, now, False, commitment_id)


@task(name="hold-calendar", cache_policy=None)
def hold_calendar(ws: store.Workspace, loaded: LoadedConfig, data_digest: str, now: datetime) -> cal.Booking:
    """Before asking for approval: a tentative hold on the calendar for the window (`window.start: auto` resolved
    to the earliest start that fits), so the approver sees real dates and nobody else takes them meanwhile."""
    return _book(ws, loaded, data_digest, now, True, None)


@task(name="confirm-hold", cache_policy=None)
def confirm_hold(ws: store.Workspace, loaded: LoadedConfig, hold: cal.Booking, now: datetime) -> cal.Booking:
    """A yes books exactly the hold the approver saw (its dates and nodes), or refuses if it was released."""
    booking = cal.confirm_hold(calendar_of(loaded, ws), hold.booking_id, now)
    get_run_logger().info(
        "calendar: the hold %s is booked: %s holds %d nodes %s .. %s",
        booking.booking_id,
        booking.commitment_id,
        booking.nodes,
        booking.start,
        booking.end,
    )
    return booking


@task(name="release-hold", cache_policy=None)
def release_hold(
    ws: store.Workspace, loaded: LoadedConfig, hold: cal.Booking, reason: str, now: datetime
) -> None:
    """The approval was not given (a no, a timeout, a cancelled or failed run): the hold's capacity goes back."""
    released = cal.release_hold(calendar_of(loaded, ws), hold.commitment_id, reason, now)
    if released is not None and released.status == "cancelled":
        get_run_logger().info("calendar: hold %s released (%s)", hold.booking_id, reason)


@task(name="check-booking", cache_policy=None)
def check_booking(path: Path, loaded: LoadedConfig, commitment_id: str) -> cal.Booking:
    """The booking that holds this commitment's capacity, or refuse (cancelled, or never booked)."""
    state = cal.read_calendar(path, cal.cluster_identity(loaded.config.cluster))
    booking = cal.find_booking(state, commitment_id)
    if booking is None:
        raise Refused(
            f"commitment {commitment_id} has no booking on the calendar of cluster '{state.cluster}'",
            where=str(path),
            fix="run `campaign commit` again: it books the committed window",
        )
    if booking.status == "cancelled":
        raise Refused(
            f"commitment {commitment_id} was cancelled on the calendar ({booking.note}); execute does "
            "not run a cancelled window",
            where=str(path),
            fix="commit a new window (change window.start or the config, validate and commit)",
        )
    return booking


@task(name="record-actual-end", cache_policy=None)
def record_actual_end(
    path: Path, loaded: LoadedConfig, booking: cal.Booking, completion_s: float | None, now: datetime
) -> cal.Booking:
    """The job's real end on the calendar: a job that finished early releases the rest of its window."""
    end = (
        booking.end if completion_s is None else booking.start + timedelta(seconds=int(-(-completion_s // 1)))
    )
    updated = cal.record_actual_end(
        path, cal.cluster_identity(loaded.config.cluster), booking.commitment_id, end, now
    )
    released_h = (updated.end - updated.held_until).total_seconds() / 3600
    get_run_logger().info(
        "calendar: %s ended %s; %.1f h of its window released",
        updated.commitment_id,
        updated.held_until,
        released_h,
    )
    return updated

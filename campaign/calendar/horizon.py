"""Which calendar a command means, and the horizon it looks at: parsed from the user's words, checked, in UTC."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from campaign.calendar.catalog import (
    CALENDAR_ENV,
    DEFAULT_WORKSPACES,
    CalendarState,
    calendar_path,
    calendars_in,
)
from campaign.calendar.timeline import utc_seconds
from campaign.errors import ConfigError

DEFAULT_EMPTY_DAYS = 7


def parse_moment(text: str, where: str) -> datetime:
    """An ISO 8601 date or date-time (UTC if it names no zone), to the second."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(
            f"{text!r} is not a date",
            where=where,
            fix="give an ISO 8601 date or date-time, e.g. 2027-01-04 or 2027-01-04T06:00:00Z",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if not 2000 <= moment.astimezone(UTC).year < 2100:
        raise ConfigError(
            f"{text!r} is outside the years 2000-2099", where=where, fix="give a date in 2000-2099"
        )
    return utc_seconds(moment)


def horizon(
    state: CalendarState, now: datetime, start: str | None, end: str | None
) -> tuple[datetime, datetime]:
    """[start, end) from --from/--to; by default from the first booking (or now) to the last booked end (or a week
    on). An end at or before its start is bad input naming both."""
    held = [b for b in state.bookings if b.status != "cancelled"]
    t0 = (
        parse_moment(start, "--from") if start else (min(b.start for b in held) if held else utc_seconds(now))
    )
    if end:
        t1 = parse_moment(end, "--to")
    else:
        last = max((b.end for b in held if b.end > t0), default=None)
        t1 = last if last is not None else t0 + timedelta(days=DEFAULT_EMPTY_DAYS)
    if t1 <= t0:
        raise ConfigError(
            f"the horizon ends ({t1.isoformat()}) before or when it starts ({t0.isoformat()})",
            where="--to" if end else "--from",
            fix="give --to after --from (e.g. --from 2027-01-01 --to 2027-02-01)",
        )
    return t0, t1


def locate_calendar(cluster: str | None, calendar: str | None, workspaces: str | None) -> Path:
    """The calendar a command without a campaign file means: --calendar (or CAMPAIGN_CALENDAR), else
    calendars/<--cluster>.duckdb in the workspaces folder, else the only calendar there."""
    chosen = calendar or os.environ.get(CALENDAR_ENV) or None
    if chosen and not Path(chosen).is_dir():
        return Path(chosen).expanduser().resolve()
    folder = Path(chosen) if chosen else Path(workspaces or DEFAULT_WORKSPACES) / "calendars"
    if cluster:
        return calendar_path(
            cluster,
            override=folder if chosen else None,
            workspace_root=None if chosen else folder.parent / "_",
        )
    found = calendars_in(folder)
    if len(found) == 1:
        return found[0].resolve()
    names = ", ".join(p.stem for p in found) or "none"
    raise ConfigError(
        f"cannot tell which cluster's calendar to use in {folder}/ (found: {names})",
        where="--cluster",
        fix="pass --cluster NAME (or --calendar PATH)",
    )


def report_files(path: Path) -> tuple[Path, Path]:
    """The Gantt PNG and the report JSON `calendar show` writes beside the calendar file `path`."""
    return path.with_name(f"{path.stem}-gantt.png"), path.with_name(f"{path.stem}-report.json")

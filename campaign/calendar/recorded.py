"""The calendar report as files beside the calendar (`<stem>-report.json`, `<stem>-gantt.png`), and when the ones
there still stand: an unchanged report is read back, and its chart is not redrawn (campaign/reuse.py)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from campaign.calendar import calendar_report, read_calendar
from campaign.calendar.horizon import horizon, report_files
from campaign.calendar.report_records import CalendarReport
from campaign.files import write_output
from campaign.reuse import code_version


def chart_note(path: Path) -> Path:
    """Beside the Gantt PNG of the calendar `path`: the digest of what it was drawn from."""
    return report_files(path)[0].with_suffix(".inputs")


def calendar_report_of(path: Path, start: str | None, end: str | None, now: datetime) -> CalendarReport:
    """The calendar's bookings, gaps and totals over the horizon (no file written)."""
    state = read_calendar(path)
    t0, t1 = horizon(state, now, start, end)
    report = calendar_report(
        state.cluster, state.total_nodes, state.pricing, state.bookings, t0, t1, state.price_history
    )
    return replace(report, calendar=str(path))


def _calendar_of(report: CalendarReport) -> Path:
    if report.calendar is None:
        raise ValueError("a calendar report read from no calendar file (calendar_report_of names it)")
    return Path(report.calendar)


def chart_digest(report: CalendarReport) -> str:
    """What the Gantt chart is drawn from: the report (without the chart's own path) and the code version."""
    shown = replace(report, gantt_png=None).to_json()
    return hashlib.sha256(
        f"{code_version()}\n{json.dumps(shown, sort_keys=True, default=str)}".encode()
    ).hexdigest()


def gantt_chart(report: CalendarReport, png: Path) -> bytes:
    """The Gantt PNG of `report`, drawn only when what it shows changed (`chart_digest`, noted beside it); an
    unchanged chart is read back."""
    noted = chart_note(_calendar_of(report))
    digest = chart_digest(report)
    try:
        if noted.read_text(encoding="utf-8").strip() == digest:
            return png.read_bytes()
    except OSError:
        pass
    from campaign.calendar.gantt import gantt_png  # matplotlib: only when a chart is drawn

    chart = gantt_png(report)
    write_output(png, chart)
    write_output(noted, digest + "\n")
    return chart


def recorded_report(report: CalendarReport) -> CalendarReport | None:
    """The report recorded beside the calendar when it is this very report with its chart drawn from it (so a
    command can print it without drawing or publishing it again), with its chart's path; else None."""
    png, report_json = report_files(_calendar_of(report))
    noted = chart_note(_calendar_of(report))
    try:
        recorded = json.loads(report_json.read_text(encoding="utf-8"))
        drawn_from = noted.read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        return None
    drawn = replace(report, gantt_png=str(png))
    if (
        recorded != json.loads(json.dumps(drawn.to_json(), default=str))
        or drawn_from != chart_digest(report)
        or not png.is_file()
    ):
        return None
    return drawn

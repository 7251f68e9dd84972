"""The calendar as Markdown for the Prefect UI: the headline totals, the Gantt chart embedded as a PNG data URI
(Prefect renders Markdown artifacts, images included, inside the UI; a file path would show nothing there), the
bookings and every gap with its price and cost."""

from __future__ import annotations

import base64

from campaign.calendar.report_records import CalendarReport


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def calendar_markdown(report: CalendarReport, png: bytes, png_path: str) -> str:
    """Markdown of `calendar_report(...)` with its chart `png` embedded (`png_path`: the same file on disk)."""
    totals, h = report.totals, report.horizon
    lines = [
        f"# Cluster {report.cluster}: {h.start} .. {h.end}",
        "",
        (
            f"* {totals.cluster_nodes} nodes over {h.hours:.1f} h: utilisation **{totals.utilisation:.1%}**"
            f", busy {totals.busy_node_hours:,.1f} node-h, idle {totals.idle_node_hours:,.1f} node-h costing "
            f"**${totals.idle_cost_usd:,.2f}** (early finishes {totals.early_finish_node_hours:,.1f} node-h)"
        ),
        (
            f"* prices: ${report.prices.gpu_hour_usd:,.2f} per GPU-hour, an idle node-hour "
            f"${report.prices.idle_node_hour_usd:,.2f}"
            + (
                f" ({len(report.price_history)} price changes on record; each gap at the price in force over it)"
                if len(report.price_history) > 1
                else ""
            )
        ),
        "",
        (
            f"![Gantt chart of cluster {report.cluster}: capacity in nodes over time, gaps shaded with "
            f"their cost]({png_data_uri(png)})"
        ),
        "",
        f"Chart file: `{png_path}`",
        "",
        "## Bookings",
        "",
        "| booking | campaign | start | end | nodes | status |",
        "| --- | --- | --- | --- | ---: | --- |",
    ]
    lines += [
        f"| {b.commitment_id} | {b.campaign} | {b.start} | {b.actual_end or b.end} | {b.nodes} | {b.status} |"
        for b in report.bookings
    ] or ["| (none) | | | | | |"]
    lines += [
        "",
        "## Idle gaps",
        "",
        "| start | end | idle nodes | idle node-h | USD per GPU-h | cost USD | kind |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    lines += [
        f"| {g.start} | {g.end} | {g.idle_nodes} | {g.idle_node_hours:,.1f} | "
        f"{g.gpu_hour_usd:,.2f} | {g.cost_usd:,.2f} | "
        f"{'early finish of ' + g.released_by if g.released_by else g.kind} |"
        for g in report.gaps
    ]
    return "\n".join(lines) + "\n"

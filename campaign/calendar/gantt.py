"""The calendar as a picture: capacity (nodes) up the y axis, time along x, each booking a coloured block of its
nodes, and every idle gap shaded with what it costs."""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any

import matplotlib

matplotlib.use("Agg")
import itertools

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from campaign.calendar.report_records import CalendarReport


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text)


def gantt_png(report: CalendarReport) -> bytes:
    """PNG bytes of `calendar_report(...)`: bookings stacked by start in each stretch, gaps hatched above them."""
    fig = gantt_figure(report)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def gantt_figure(report: CalendarReport) -> Figure:
    """The chart of `gantt_png`, as a matplotlib figure (the caller closes it)."""
    capacity = report.totals.cluster_nodes
    fig, axes = plt.subplots(figsize=(11, 4.2))
    # matplotlib takes datetime x values through its units registry; its stubs type x as numbers only.
    ax: Any = axes
    cmap = plt.get_cmap("tab20")
    colours = [cmap(i) for i in range(cmap.N)]
    holding = [b for b in report.bookings if b.status != "cancelled"]
    colour_of = {b.booking_id: colours[i % len(colours)] for i, b in enumerate(holding)}
    h0, h1 = _t(report.horizon.start), _t(report.horizon.end)
    labelled: set[str] = set()
    # Each stretch between two changes: the bookings in use stacked from the floor, in the order they start.
    cuts = sorted(
        {h0, h1} | {t for b in holding for t in (_t(b.start), _t(b.actual_end or b.end)) if h0 < t < h1}
    )
    for t0, t1 in itertools.pairwise(cuts):
        floor = 0
        for b in holding:
            if _t(b.start) <= t0 and _t(b.actual_end or b.end) >= t1:
                hatch = "//" if b.kind == "maintenance" else ".." if b.status == "held" else None
                label = None
                if b.booking_id not in labelled:
                    held = ", held for approval" if b.status == "held" else ""
                    label = f"{b.commitment_id} ({b.campaign}, {b.nodes} nodes{held})"
                    labelled.add(b.booking_id)
                ax.bar(
                    t0,
                    b.nodes,
                    width=t1 - t0,
                    bottom=floor,
                    align="edge",
                    color=colour_of[b.booking_id],
                    edgecolor="white",
                    linewidth=0.3,
                    hatch=hatch,
                    label=label,
                )
                floor += b.nodes
    for gap in report.gaps:
        g0, g1 = _t(gap.start), _t(gap.end)
        used = capacity - gap.idle_nodes
        ax.bar(
            g0,
            gap.idle_nodes,
            width=g1 - g0,
            bottom=used,
            align="edge",
            color="#f4cccc" if gap.kind == "unbooked" else "#fce5cd",
            edgecolor="#cc0000",
            linewidth=0.4,
        )
        if (g1 - g0).total_seconds() >= 0.06 * (h1 - h0).total_seconds():
            ax.text(
                g0 + (g1 - g0) / 2,
                used + gap.idle_nodes / 2,
                f"${gap.cost_usd:,.0f}" + ("\nearly finish" if gap.kind == "early_finish" else ""),
                ha="center",
                va="center",
                fontsize=7,
                color="#990000",
            )
    ax.axhline(capacity, color="black", lw=0.8, ls="--")
    ax.set_ylim(0, capacity * 1.08)
    # Nodes are whole: no 2.5-node ticks on a small cluster.
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(h0, h1)
    ax.set_ylabel("nodes")
    totals = report.totals
    ax.set_title(
        f"Cluster {report.cluster}: {capacity} nodes, utilisation {totals.utilisation:.1%}, "
        f"idle {totals.idle_node_hours:,.0f} node-h = ${totals.idle_cost_usd:,.0f}",
        fontsize=10,
    )
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    fig.autofmt_xdate()
    if labelled:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.grid(alpha=0.25)
    return fig

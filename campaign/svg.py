"""matplotlib as campaign's pages draw with it: the Agg backend, the house style, and one figure saved as SVG
text (`Figure`) for report.html, the Markdown summaries and the Prefect artifacts. Every report's plots start here."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

plt.rcParams.update(
    {
        "svg.fonttype": "none",
        "svg.hashsalt": "campaign",
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
)


@dataclass(frozen=True)
class Figure:
    """One figure as SVG text: inlined in report.html, and a base64 data URI in the Markdown summary (the Prefect UI
    shows SVG data URIs in a markdown artifact: `benchmarks/analyse/prefect_ui_images.py` checks it)."""

    name: str
    svg: str


def svg_figure(name: str, fig: Any) -> Figure:
    """Save one figure as SVG, cropped to its tight bounding box. Drawn once: one format serves both the page and
    the Prefect artifact (a second PNG rendering cost more than the SVG itself)."""
    bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.05)
    svg = io.StringIO()
    fig.savefig(svg, format="svg", bbox_inches=bbox, dpi=110, metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = svg.getvalue()
    return Figure(name, text[text.index("<svg") :])

"""The report's figures laid out so a reader sees everything: no legend on the data, no axis label under another
panel, no marker cut in half by the axis. Measured on the matplotlib figures themselves (their drawn extents)."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from campaign.analysis import plots
from campaign.analysis.result import FailureRow
from campaign.failures import report as failures_report
from campaign.failures.fit import FittedRate


@pytest.fixture
def drawn(monkeypatch) -> list:
    """The matplotlib figures the report's functions draw, kept open and drawn (instead of saved as SVG)."""
    figures: list = []

    def keep(name, fig):
        fig.canvas.draw()
        figures.append(fig)
        return plots.Figure(name, "")

    monkeypatch.setattr(plots, "_figure", keep)
    monkeypatch.setattr(failures_report, "_figure", keep)
    yield figures
    for fig in figures:
        plots.plt.close(fig)


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _timeline_inputs():
    day = 86_400.0
    kinds = ["start", "failure", "restart_end", "checkpoint_end", "failure", "planned_start", "window_end"]
    times = [0.0, 0.05 * day, 0.07 * day, 0.3 * day, 0.45 * day, 1.2 * day, 2 * day]
    events = pd.DataFrame(
        {
            "t_s": times,
            "kind": kinds,
            "category": [None, "faulty_gpu", None, None, "software_bug", None, None],
            "tokens_trained": np.linspace(0, 4.3e11, len(times)),
        }
    )
    # Only the figures the timeline reads (a WindowFigures holds them among the rest).
    result = SimpleNamespace(
        window_days=2.0,
        planned=SimpleNamespace(tokens_per_s=3.5e6, expected_ettr=0.95),
        tokens_target=4.3e11,
        failures=[SimpleNamespace(category="faulty_gpu"), SimpleNamespace(category="software_bug")],
        spares=SimpleNamespace(spare_nodes=3),
        completion_days=1.5,
    )
    return events, result


def test_the_timeline_legends_sit_beside_the_panels_not_on_the_lines(drawn) -> None:
    plots.timeline(*_timeline_inputs())
    (fig,) = drawn
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        assert not _overlap(legend.get_window_extent(renderer), ax.get_window_extent(renderer)), (
            ax.get_ylabel()
        )


def _failure_rows():
    return [
        FailureRow(
            category="faulty_gpu",
            expected=1.2,
            interval_lo=0,
            interval_hi=4,
            observed=1,
            is_within=True,
        ),
        FailureRow(
            category="host_maintenance",
            expected=0.4,
            interval_lo=0,
            interval_hi=2,
            observed=0,
            is_within=True,
        ),
        FailureRow(
            category="network",
            expected=0.3,
            interval_lo=0,
            interval_hi=4,
            observed=3,
            is_within=False,
        ),
    ]


def test_an_observed_zero_shows_its_whole_dot_and_the_legend_covers_no_range(drawn) -> None:
    plots.failures(_failure_rows())
    (fig,) = drawn
    (ax,) = fig.axes
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    dots = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(dots) == 3
    for dot in dots:
        x, _ = ax.transData.transform((dot.get_xdata()[0], dot.get_ydata()[0]))
        radius = dot.get_markersize() / 72 * fig.dpi / 2
        assert frame.x0 <= x - radius and x + radius <= frame.x1, (dot.get_xdata(), x, radius, frame)
    assert not _overlap(ax.get_legend().get_window_extent(renderer), frame)


def test_each_fitted_rate_panels_axis_label_sits_above_the_next_panel(drawn) -> None:
    categories = [
        FittedRate("gpu", "gpu", 40, 1e6, 0.08, (0.06, 0.11), "per_gpu_year"),
        FittedRate("nic", "gpu", 12, 1e6, 0.02, (0.01, 0.04), "per_gpu_year"),
        FittedRate("host", "node", 9, 1e5, 3.1, (1.4, 5.9), "per_1k_node_days"),
        FittedRate("job", "job", 5, 1e3, 0.004, (0.001, 0.009), "per_job_hour"),
    ]
    failures_report.rates_figure(categories)
    (fig,) = drawn
    renderer = fig.canvas.get_renderer()
    assert len(fig.axes) == 3
    for upper, lower in zip(fig.axes, fig.axes[1:], strict=False):
        label = upper.xaxis.label.get_window_extent(renderer)
        assert "GPU-year" in upper.get_xlabel() or "node-days" in upper.get_xlabel()
        below = lower.get_tightbbox(renderer)
        assert label.y0 > below.y1, (upper.get_xlabel(), label, below)

"""The report's figures, drawn with matplotlib and returned as SVG text (inlined in report.html, a data URI in the
Markdown summary).

matplotlib, not Altair + vl-convert: it is already a dependency, draws offline with no JavaScript or bundled
browser engine, writes compact SVG to inline in the page, and gives the fine control a dense timeline needs (event
markers, shaded spans, twin panels). Dense series are decimated to the figure's pixels before drawing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, MaxNLocator

from campaign.figures import num, token_unit
from campaign.svg import Figure, plt
from campaign.svg import svg_figure as _figure

if TYPE_CHECKING:
    from campaign.analysis.result import FailureRow, WindowFigures, ZoomPanel

_TAB10 = plt.get_cmap("tab10")
CATEGORY_COLOURS = [_TAB10(i)[:3] for i in range(_TAB10.N)]
# Dense series are cut to what the figure can show before they are drawn: a 10-inch figure at 110 dpi is about
# 1,100 pixels wide, so a step line keeps at most four points per pixel column (first, lowest, highest, last) and
# a row of markers one per column. A 54-day window's ~36,000 events draw as a few thousand points.
PIXELS = 1_200
# Above this many points after decimation, a layer goes into the SVG as one embedded bitmap (axes, labels and text
# stay vector), so a long window does not write megabytes of vector paths.
DENSE = 2_000
BUCKET_COLOURS = {
    "productive": "#2a9d4b",
    "checkpoint": "#8fb3d9",
    "lost_rework": "#d62728",
    "restart": "#ff7f0e",
    "waiting": "#9467bd",
    "idle_spares": "#b0b0b0",
    "idle_released": "#d9d9d9",
}


def decimate_steps(
    x: np.ndarray, y: np.ndarray, x_max: float, columns: int = PIXELS
) -> tuple[np.ndarray, np.ndarray]:
    """At most four points per pixel column of a step series (the first, lowest, highest and last in the column),
    in time order: the drawn line is the same as with every point, and a drop inside a column still shows."""
    if len(x) <= 4 * columns:
        return x, y
    col = np.minimum((x / max(x_max, 1e-12) * columns).astype(np.int64), columns - 1)  # x is in time order
    starts = np.flatnonzero(np.diff(col, prepend=-1))
    ends = np.append(starts[1:], len(x)) - 1
    by_value = np.lexsort((y, col))  # within each column, lowest first and highest last
    keep = np.unique(np.concatenate([starts, ends, by_value[starts], by_value[ends]]))
    return x[keep], y[keep]


def one_per_column(x: np.ndarray, x_max: float, columns: int = PIXELS) -> np.ndarray:
    """Marker positions with at most one per pixel column (markers closer than a pixel draw as one)."""
    if len(x) <= columns:
        return x
    col = np.minimum((x / max(x_max, 1e-12) * columns).astype(np.int64), columns - 1)
    _, first = np.unique(col, return_index=True)
    return x[np.sort(first)]


def ticks(ax: Any, x: np.ndarray, y0: float, y1: float, **style: Any) -> None:
    """Vertical ticks at `x` from `y0` to `y1` (fractions of the axes' height) drawn as one path broken by NaNs:
    one artist however many ticks, and about 20 bytes each in the SVG (a marker per tick costs several times that
    to draw and to store)."""
    xs = np.repeat(np.asarray(x, dtype=float), 3)
    ys = np.tile([y0, y1, np.nan], len(x))
    xs[2::3] = np.nan
    ax.plot(xs, ys, transform=ax.get_xaxis_transform(), **style)


def _events(events: pd.DataFrame, kind: str) -> pd.DataFrame:
    return events[events["kind"] == kind]


def timeline(events: pd.DataFrame, result: WindowFigures) -> Figure:
    """Tokens against the plan, interruptions by category, checkpoints, waiting and spares in use, by day."""
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 4.6), sharex=True, height_ratios=[3, 1])
    day = (events["t_s"] / 86400.0).to_numpy()
    end_day = result.window_days
    tokens = events["tokens_trained"].to_numpy(dtype=float)
    # A step plot needs only the rows where the value changes (and the last one), and no more than the pixels show.
    keep = np.append(np.diff(tokens, prepend=np.nan) != 0, True)[: len(tokens)]
    keep[-1:] = True
    x, y = decimate_steps(day[keep], tokens[keep], end_day)
    scale, unit = token_unit(result.tokens_target)  # the run's own size: B for a campaign, K for a rehearsal
    ax.step(
        x,
        y / scale,
        where="post",
        lw=1.2,
        color="#1f4e79",
        label=f"tokens kept ({unit})",
        rasterized=len(x) > DENSE,
    )
    plan = result.planned
    if plan.tokens_per_s and plan.expected_ettr:
        t = np.linspace(0, end_day, 200)
        planned = np.minimum(plan.tokens_per_s * plan.expected_ettr * t * 86400.0, result.tokens_target)
        ax.plot(t, planned / scale, ls="--", color="grey", lw=1, label="plan (expected ETTR)")
    ax.axhline(result.tokens_target / scale, color="black", lw=0.6, ls=":", label="target")
    categories = [row.category for row in result.failures] or sorted(
        _events(events, "failure")["category"].unique()
    )
    for i, name in enumerate(categories):
        hits = _events(events, "failure")
        hits = hits[hits["category"] == name]
        if len(hits):
            ax.vlines(
                hits["t_s"] / 86400.0,
                0,
                1,
                transform=ax.get_xaxis_transform(),
                lw=0.8,
                color=CATEGORY_COLOURS[i % 10],
                alpha=0.8,
                label=f"failure: {name} ({len(hits)})",
                rasterized=len(hits) > DENSE,
            )
    planned_stops = _events(events, "planned_start")
    if len(planned_stops):
        ax.vlines(
            planned_stops["t_s"] / 86400.0,
            0,
            1,
            transform=ax.get_xaxis_transform(),
            lw=0.8,
            ls="--",
            color="black",
            alpha=0.6,
            label=f"planned maintenance ({len(planned_stops)})",
            rasterized=len(planned_stops) > DENSE,
        )
    _shade(ax, events, "waiting_start", "waiting_end", "#9467bd", "waiting for a spare")
    ckpt = (_events(events, "checkpoint_end")["t_s"] / 86400.0).to_numpy()
    ticks(
        ax,
        one_per_column(ckpt, end_day),
        0.0,
        0.04,
        color="#8fb3d9",
        lw=1,
        label=f"checkpoints ({len(ckpt)})",
    )
    if result.completion_days:
        ax.axvline(result.completion_days, color="#2a9d4b", lw=1.2)
        ax.axvspan(result.completion_days, end_day, color="#d9d9d9", alpha=0.5, label="released early")
    ax.set_ylabel(f"tokens trained ({unit})")
    ax.set_title("Window timeline")
    # Beside the panel, not on it: the failure lines and the target run the whole height and width.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=7, frameon=False)
    ax.grid(alpha=0.25)
    swaps = (events["kind"] == "spare_swap").astype(int) - (events["kind"] == "repair_done").astype(int)
    spare_nodes = result.spares.spare_nodes
    in_use = np.clip(
        swaps.cumsum().to_numpy(dtype=float), 0, spare_nodes if spare_nodes is not None else None
    )
    changed = np.append(np.diff(in_use, prepend=np.nan) != 0, True)[: len(in_use)]
    changed[-1:] = True
    x, y = decimate_steps(day[changed], in_use[changed], end_day)
    ax2.step(x, y, where="post", color="#555555", lw=1, rasterized=len(x) > DENSE)
    if spare_nodes is not None:
        ax2.axhline(spare_nodes, color="#d62728", lw=0.8, ls=":", label=f"spare pool ({spare_nodes})")
        ax2.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=7, frameon=False)
    ax2.yaxis.set_major_locator(
        MaxNLocator(nbins=4, integer=True)
    )  # a short panel: a few ticks stay readable
    ax2.set_ylabel("spares in use")
    _time_axis(ax2, end_day)
    ax2.set_xlim(0, end_day)
    ax2.grid(alpha=0.25)
    return _figure("timeline", fig)


def _time_axis(ax: Any, end_day: float) -> None:
    """The x axis (in days) read at the window's own scale: days, or hours or minutes for a short real run."""
    from matplotlib.ticker import FuncFormatter

    if end_day >= 1.0:
        ax.set_xlabel("day of window")
        return
    factor, unit = (24.0, "hours") if end_day * 24.0 >= 1.0 else (1440.0, "minutes")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v * factor:g}"))
    ax.set_xlabel(f"{unit} into the window")


def _shade(ax: Any, events: pd.DataFrame, start: str, end: str, colour: str, label: str) -> None:
    opened, first = None, True
    sub = events[events["kind"].isin((start, end, "window_end"))]
    for t, kind in zip(sub["t_s"].tolist(), sub["kind"].tolist(), strict=True):
        if kind == start and opened is None:
            opened = t
        elif kind != start and opened is not None:
            ax.axvspan(
                opened / 86400.0, t / 86400.0, color=colour, alpha=0.25, label=label if first else None
            )
            opened, first = None, False


def waterfall(buckets: dict[str, float], window_gpu_h: float) -> Figure:
    """From every GPU-hour of the window down to the productive ones, one bucket at a time."""
    steps = ["idle_released", "idle_spares", "waiting", "restart", "lost_rework", "checkpoint"]
    labels = ["window\n(job + spares)"] + [s.replace("_", " ") for s in steps] + ["productive"]
    fig, ax = plt.subplots(figsize=(10, 3.4))
    level = window_gpu_h
    ax.bar(0, level, color="#1f4e79")
    # Labels at the run's own scale: a small run's GPU-hours in two significant digits, never a row of "0".
    ax.text(0, level, num(level, 0), ha="center", va="bottom", fontsize=8)
    for i, key in enumerate(steps, start=1):
        value = buckets[key]
        ax.bar(i, value, bottom=level - value, color=BUCKET_COLOURS[key])
        ax.text(i, level, f"-{num(value, 0)}" if value else "0", ha="center", va="bottom", fontsize=8)
        level -= value
    ax.bar(len(steps) + 1, buckets["productive"], color=BUCKET_COLOURS["productive"])
    ax.text(
        len(steps) + 1,
        buckets["productive"],
        num(buckets["productive"], 0),
        ha="center",
        va="bottom",
        fontsize=8,
    )
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(0, window_gpu_h * 1.1)  # room for the value labels under the title
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))  # no "1e7" offset over the title
    ax.set_ylabel("GPU-hours")
    ax.set_title("Goodput waterfall: where the window's GPU-hours went (grey = not a loss of the job)")
    ax.grid(alpha=0.25, axis="y")
    return _figure("waterfall", fig)


def failures(rows: list[FailureRow]) -> Figure:
    """Observed count per category against the expected mean and its 95% Poisson range."""
    fig, ax = plt.subplots(figsize=(10, max(2.2, 0.42 * len(rows) + 1.2)))
    y = np.arange(len(rows))
    for i, row in enumerate(rows):
        if row.expected is not None and row.interval_lo is not None and row.interval_hi is not None:
            ax.plot(
                [row.interval_lo, row.interval_hi],
                [i, i],
                color="#8fb3d9",
                lw=6,
                solid_capstyle="butt",
                label="95% Poisson range of the plan" if i == 0 else None,
            )
            ax.plot(row.expected, i, "|", color="#1f4e79", ms=14, mew=2, label="expected" if i == 0 else None)
        colour = "#2a9d4b" if row.is_within in (True, None) else "#d62728"
        ax.plot(row.observed, i, "o", color=colour, ms=7, label="observed" if i == 0 else None)
    ax.set_yticks(y, [r.category for r in rows] or [])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    # A little room left of 0, so an observed 0 shows its whole dot instead of half of it on the axis.
    right = max([1.0, *(v for r in rows for v in (r.observed, r.interval_hi) if v is not None)])
    ax.set_xlim(left=-0.03 * right)
    ax.set_xlabel("unexpected interruptions (count)")
    ax.set_title("Failures by category: observed against the plan's expectation")
    ax.grid(alpha=0.25, axis="x")
    if rows:
        # beside the panel: a wide range on the top row would run under a legend inside it
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=7, frameon=False)
    return _figure("failures", fig)


def checkpoint_cost(used_s: float, best_s: float, overhead: Any) -> Figure:
    """Expected wall time per unit of work against the interval, with the used interval and the optimum."""
    fig, ax = plt.subplots(figsize=(10, 2.8))
    grid = np.geomspace(max(best_s / 8, 1.0), best_s * 8, 200)
    ax.plot(grid, [(overhead(t) - 1) * 100 for t in grid], color="#1f4e79")
    ax.axvline(best_s, color="#2a9d4b", ls="--", label=f"optimum for observed MTBF: {best_s:,.0f} s")
    ax.axvline(used_s, color="#d62728", label=f"used: {used_s:,.0f} s")
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint interval (s, log scale)")
    ax.set_ylabel("overhead (% of work)")
    ax.set_title("Checkpoint interval: expected overhead (Daly) at the observed MTBF")
    ax.legend(fontsize=7, frameon=False)
    ax.grid(alpha=0.25)
    return _figure("checkpoint", fig)


def power_band(band: pd.DataFrame, events: pd.DataFrame, window_days: float) -> Figure:
    """Per-minute facility power over the whole window as a min-mean-max band (one bin per pixel column, aggregated
    in DuckDB: `power_band.sql`), with failures and checkpoints marked."""
    fig, ax = plt.subplots(figsize=(10, 3))
    x = band["day"].to_numpy()
    lo, mean, hi = (band[c].to_numpy() for c in ("min_mw", "mean_mw", "max_mw"))
    ax.fill_between(
        x,
        lo,
        hi,
        step="post",
        color="#8fb3d9",
        alpha=0.7,
        label="per-minute min-max",
        rasterized=len(x) > DENSE,
    )
    ax.step(x, mean, where="post", color="#1f4e79", lw=0.8, label="mean", rasterized=len(x) > DENSE)
    top = float(hi.max()) if len(x) else 0.0
    fail = one_per_column((_events(events, "failure")["t_s"] / 86400.0).to_numpy(), window_days)
    ax.plot(
        fail,
        np.full(len(fail), top),
        "v",
        color="#d62728",
        ms=5,
        label="failure",
        rasterized=len(fail) > DENSE,
    )
    ckpt = one_per_column((_events(events, "checkpoint_start")["t_s"] / 86400.0).to_numpy(), window_days)
    ticks(ax, ckpt, 0.0, 0.05, color="#555555", lw=0.8, label="checkpoint")
    ax.set_xlim(0, window_days)
    ax.set_xlabel("day of window")
    ax.set_ylabel("facility power (MW)")
    ax.set_title("Facility power over the window (per-minute band)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7, ncols=4, frameon=False)
    ax.grid(alpha=0.25)
    return _figure("power", fig)


def power_zoom(panels: list[ZoomPanel]) -> Figure:
    """Per-second power around chosen moments, with the swing (max - min) and the steepest ramp marked."""
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(10, 2.8), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=False):
        t, mw = panel.t_s, panel.power_mw
        ax.plot(t - panel.centre_s, mw, color="#1f4e79", lw=1)
        ax.axvline(0, color="#d62728", lw=0.8, ls=":")
        ax.axhline(mw.max(), color="grey", lw=0.6, ls="--")
        ax.axhline(mw.min(), color="grey", lw=0.6, ls="--")
        k = int(np.argmax(np.abs(np.diff(mw)))) if len(mw) > 1 else 0
        ax.plot(t[k : k + 2] - panel.centre_s, mw[k : k + 2], color="#d62728", lw=2.5)
        ax.set_title(
            f"{panel.title}\nswing {panel.swing_mw:.2f} MW, steepest ramp {panel.max_ramp_mw_per_s:.2f} MW/s",
            fontsize=8,
        )
        ax.set_xlabel("seconds from the event")
        ax.set_ylabel("MW")
        ax.grid(alpha=0.25)
    if not panels:
        axes[0][0].text(
            0.5, 0.5, "no per-second series available", ha="center", transform=axes[0][0].transAxes
        )
    return _figure("power_zoom", fig)


def _percentile_lines(ax: Any, data: np.ndarray) -> None:
    for q, style in ((10, ":"), (50, "--"), (90, ":")):
        v = float(np.percentile(data, q))
        ax.axvline(v, color="#1f4e79", lw=1, ls=style, label=f"p{q} {v:,.3g}")


def _histogram(ax: Any, data: np.ndarray) -> None:
    """Up to 40 bins as one filled outline: one path in the SVG, where a bar per bin is a patch each to lay out
    and write."""
    ax.hist(
        data,
        bins=min(40, max(5, len(data) // 4)),
        histtype="stepfilled",
        facecolor="#8fb3d9",
        edgecolor="#1f4e79",
        lw=0.6,
    )


def distribution(values: list[float], title: str, xlabel: str) -> Figure:
    """Histogram of one figure over simulate replicas, with its p10, p50 and p90."""
    fig, ax = plt.subplots(figsize=(10, 2.6))
    data = np.asarray(values, dtype=float)
    _histogram(ax, data)
    _percentile_lines(ax, data)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("replicas")
    ax.legend(fontsize=7, frameon=False)
    ax.grid(alpha=0.25, axis="y")
    return _figure(title, fig)


def completion_distribution(days: list[float | None], window_days: float) -> Figure:
    """When the replicas finish: a histogram of the completion day of those that finished, and the share of all
    replicas finished by each day (an ECDF that stops at P(finish inside the window); unfinished ones never get
    there), with the window's end marked."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 2.9))
    done = np.sort(np.asarray([d for d in days if d is not None], dtype=float))
    n = len(days)
    p = len(done) / n if n else 0.0
    if len(done):
        _histogram(ax, done)
        _percentile_lines(ax, done)
        ax.legend(fontsize=7, frameon=False, loc="best")
    else:
        ax.text(
            0.5, 0.5, "no replica reached the target inside the window", ha="center", transform=ax.transAxes
        )
    ax.axvline(window_days, color="#d62728", lw=1.2)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"Day the target is reached ({len(done):,} of {n:,} replicas reached it)", fontsize=9)
    ax.set_xlabel("day of window")
    ax.set_ylabel("replicas")
    x = np.concatenate([[0.0], done, [window_days]])
    y = np.concatenate([[0.0], np.arange(1, len(done) + 1) / max(n, 1), [p]])
    ax2.step(x, y, where="post", color="#1f4e79", lw=1.4)
    ax2.axvline(window_days, color="#d62728", lw=1.2, label=f"window ends (day {window_days:,.1f})")
    ax2.axhline(p, color="#2a9d4b", lw=1, ls="--", label=f"P(target inside the window) = {p:.1%}")
    ax2.set_ylim(0, 1.02)
    ax2.set_xlim(
        min(x[1] if len(done) else 0.0, window_days) * 0.98 if len(done) else 0.0, window_days * 1.01
    )
    ax2.set_title("Share of replicas that reached the target by each day (ECDF)", fontsize=9)
    ax2.set_xlabel("day of window")
    ax2.set_ylabel("reached the target")
    ax2.legend(fontsize=7, frameon=False, loc="lower right")
    ax2.grid(alpha=0.25)
    return _figure("completion", fig)


def interruption_distribution(unexpected: list[int], planned: list[int]) -> Figure:
    """Unexpected and planned interruptions per replica, side by side: one bar per count."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.6))
    for ax, values, colour, label in (
        (axes[0], unexpected, "#d62728", "unexpected"),
        (axes[1], planned, "#555555", "planned maintenance"),
    ):
        data = np.asarray(values, dtype=np.int64)
        if len(data):
            # One step per count, centred on it, as one filled outline: a long window's replicas spread over a
            # hundred counts or more, and a bar each was most of this figure's cost.
            counts = np.bincount(data - data.min())
            edges = np.arange(data.min(), data.max() + 2) - 0.5
            ax.stairs(counts, edges, fill=True, facecolor=colour, edgecolor=colour, alpha=0.7)
            ax.set_title(f"{label} interruptions per replica (mean {data.mean():,.1f})", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("interruptions in the window (count)")
        ax.set_ylabel("replicas")
        ax.grid(alpha=0.25, axis="y")
    return _figure("interruptions", fig)

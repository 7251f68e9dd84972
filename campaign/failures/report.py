"""A fitted failure profile as a page a person reads: the rates with their intervals by category, the job MTTF
against job size with the log's own sizes as observed points, and the lemon nodes against what they should have
had. Figures drawn with the report's matplotlib style (campaign.analysis.plots) and inlined as SVG.
Source: docs/failures.md.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence

import numpy as np
from matplotlib.ticker import FuncFormatter

from campaign.failures.fit import CategoryFit, FailureFit, FittedRate
from campaign.svg import Figure, plt
from campaign.svg import svg_figure as _figure

UNIT_LABEL = {
    "per_gpu_year": "failures per GPU-year",
    "per_1k_node_days": "failures per 1,000 node-days",
    "per_job_hour": "failures per job-hour",
}


def rates_figure(categories: Sequence[CategoryFit | FittedRate]) -> Figure:
    """Each seen category's rate and 95% interval, one panel per unit (rates in different units never share an
    axis)."""
    seen = [c for c in categories if c.count]
    units = [u for u in UNIT_LABEL if any(c.unit == u for c in seen)] or ["per_gpu_year"]
    heights = [max(1, sum(c.unit == u for c in seen)) for u in units]
    fig, axes = plt.subplots(
        len(units),
        1,
        figsize=(9, 0.38 * sum(heights) + 1.1 * len(units)),
        height_ratios=heights,
        squeeze=False,
        layout="constrained",  # each panel's axis label gets its own room, never under the next panel
    )
    for ax, unit in zip(axes[:, 0], units, strict=True):
        rows = [c for c in seen if c.unit == unit]
        y = np.arange(len(rows))
        for i, c in enumerate(rows):
            ax.plot(c.ci95, [i, i], color="#8fb3d9", lw=6, solid_capstyle="butt")
            ax.plot(c.rate, i, "o", color="#1f4e79", ms=6)
        ax.set_yticks(y, [f"{c.name} ({c.count:,})" for c in rows] or [])
        ax.set_xlim(left=0)
        ax.set_xlabel(f"{UNIT_LABEL[unit]}: fitted rate and exact 95% interval")
        ax.grid(alpha=0.25, axis="x")
    axes[0, 0].set_title("Failure rates by category (failures seen in brackets)")
    engine = fig.get_layout_engine()
    if engine is not None:  # laid out before the SVG is cropped to the figure's extent
        engine.execute(fig)
    return _figure("failure-rates", fig)


def mttf_figure(fit: FailureFit) -> Figure:
    """Predicted job MTTF against job size with its 95% band, and the MTTF observed at each size in the log."""
    fig, ax = plt.subplots(figsize=(9, 3.6))
    predicted = fit.mttf_curve_h
    if predicted:
        g = [p.gpus for p in predicted]
        ax.fill_between(
            g,
            [p.ci95[0] for p in predicted],
            [p.ci95[1] for p in predicted],
            color="#8fb3d9",
            alpha=0.6,
            label="predicted, 95% interval",
        )
        ax.plot(g, [p.mttf_h for p in predicted], "-", color="#1f4e79", label="predicted")
    # (GPUs, MTTF, interval) of each size that failed at all; no upper bound: the bar stops at the point
    seen = [(o.gpus, o.mttf_h, o.ci95) for o in fit.observed_mttf_h if o.mttf_h is not None]
    if seen:
        lo = [m - ci[0] for _, m, ci in seen]
        hi = [(ci[1] or m) - m for _, m, ci in seen]
        ax.errorbar(
            [g for g, _, _ in seen],
            [m for _, m, _ in seen],
            yerr=[lo, hi],
            fmt="o",
            color="#d62728",
            ms=5,
            capsize=3,
            label="observed in the log",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("job size (GPUs)")
    ax.set_ylabel("job MTTF (h)")
    ax.set_title("Mean time to failure of a job against its size")
    ax.grid(alpha=0.25, which="both")
    ax.legend(fontsize=7, frameon=False)
    return _figure("job-mttf", fig)


def lemons_figure(fit: FailureFit) -> Figure:
    """Each lemon node's failures against the failures the other nodes' mean gives it."""
    lemons = fit.lemon_nodes
    fig, ax = plt.subplots(figsize=(9, max(1.6, 0.38 * len(lemons) + 1.1)))
    y = np.arange(len(lemons))
    ax.barh(y, [n.failures for n in lemons], color="#d62728")
    ax.plot([n.expected for n in lemons], y, "|", color="#1f4e79", ms=14, mew=2)
    ax.set_yticks(y, [f"{n.node} (p {n.p_value:.1g})" for n in lemons] or [])
    ax.set_xlabel("failures on the node (bar) and the other nodes' mean (tick)")
    ax.set_title(f"Lemon nodes: {len(lemons)} of {fit.nodes:,} (p-values corrected for the number of nodes)")
    ax.grid(alpha=0.25, axis="x")
    return _figure("lemon-nodes", fig)


def fit_report_html(fit: FailureFit, title: str) -> str:
    """One self-contained page: the exposure, the categories' table, the three figures and the notes."""
    e = fit.exposure
    rows = "\n".join(
        f"<tr><td>{html.escape(c.name)}</td><td>{c.scope}</td><td>{c.count:,}</td><td>{c.rate:.4g}</td>"
        f"<td>{c.ci95[0]:.4g} .. {c.ci95[1]:.4g}</td><td>{c.unit}</td>"
        f"<td>{html.escape(c.evidence.verdict)}</td><td>{html.escape(c.interarrival.verdict)}</td></tr>"
        for c in fit.categories
    )
    figures = "\n".join(
        f'<div class="figure">{f.svg}</div>'
        for f in (rates_figure(fit.categories), mttf_figure(fit), lemons_figure(fit))
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in fit.notes)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;font-size:14px}}
table{{border-collapse:collapse}}td,th{{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}}</style>
</head><body>
<h1>{html.escape(title)}</h1>
<p>{fit.incidents:,} incidents in {fit.jobs:,} jobs: {e.gpu_hours:,.0f} GPU-hours, {e.job_hours:,.0f}
job-hours, {e.node_days:,.0f} node-days. How each figure is made: docs/failures.md.</p>
<table><tr><th>category</th><th>scope</th><th>count</th><th>rate</th><th>95% interval</th><th>unit</th>
<th>scope evidence</th><th>arrivals</th></tr>
{rows}
</table>
{figures}
<ul>{notes}</ul>
</body></html>
"""


def fit_report_markdown(fit: FailureFit, title: str) -> str:
    """The same as Markdown for a Prefect artifact: the table, the figures as SVG data URIs, the lemon nodes and
    the MTTF by size."""
    e = fit.exposure
    lines = [
        f"# {title}",
        "",
        f"{fit.incidents:,} incidents in {fit.jobs:,} jobs: {e.gpu_hours:,.0f} GPU-hours, "
        f"{e.job_hours:,.0f} job-hours, {e.node_days:,.0f} node-days (docs/failures.md).",
        "",
        "| category | scope | count | rate | 95% interval | unit | scope evidence |",
        "| --- | --- | ---: | ---: | --- | --- | --- |",
    ]
    lines += [
        f"| {c.name} | {c.scope} | {c.count:,} | {c.rate:.4g} | {c.ci95[0]:.4g} .. {c.ci95[1]:.4g} "
        f"| {c.unit} | {c.evidence.verdict} |"
        for c in fit.categories
    ]
    lines += ["", "| job GPUs | MTTF h | 95% interval |", "| ---: | ---: | --- |"]
    lines += [f"| {m.gpus:,} | {m.mttf_h:.2f} | {m.ci95[0]:.2f} .. {m.ci95[1]:.2f} |" for m in fit.job_mttf_h]
    lines += ["", f"Lemon nodes: {len(fit.lemon_nodes)} of {fit.nodes:,}."]
    lines += [
        f"- {n.node}: {n.failures} failures, the other nodes' mean {n.expected:.2f} (p {n.p_value:.2g})"
        for n in fit.lemon_nodes
    ]
    if fit.cluster_lemons is not None:
        cl = fit.cluster_lemons
        lines += [
            "",
            f"As a config: `cluster.lemons: {{count: {cl.count}, factor: {cl.factor:.3g}}}`, with the fitted "
            f"gpu- and node-scope rates divided by {cl.healthy_divisor:.4g} (the healthy nodes' rates).",
        ]
    lines.append("")
    for figure in (rates_figure(fit.categories), mttf_figure(fit), lemons_figure(fit)):
        data = base64.b64encode(figure.svg.encode()).decode()
        lines += [f"![{figure.name}](data:image/svg+xml;base64,{data})", ""]
    return "\n".join(lines)

"""The report of an executed window: Markdown and HTML with PNG plots, written atomically."""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from campaign.files import atomic_write_bytes, atomic_write_text
from campaign.goodput import BUCKET_KEYS, buckets_sum_gpu_h


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def plot_power(power: pd.DataFrame) -> bytes:
    fig, ax = plt.subplots(figsize=(9, 3))
    ax.plot(power["day"], power["power_mw"], lw=0.6)
    ax.set_xlabel("day of window")
    ax.set_ylabel("facility power (MW)")
    ax.set_title("Facility power draw")
    ax.grid(alpha=0.3)
    return _png(fig)


def plot_tokens(tokens: pd.DataFrame, target: float) -> bytes:
    fig, ax = plt.subplots(figsize=(9, 3))
    ax.step(tokens["day"], tokens["tokens_trained"] / 1e9, where="post", lw=0.8)
    ax.axhline(target / 1e9, color="grey", ls="--", lw=0.8, label="target")
    ax.set_xlabel("day of window")
    ax.set_ylabel("tokens trained (B)")
    ax.set_title("Training progress (drops are work lost to failures)")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    return _png(fig)


def plot_goodput(breakdown: dict[str, float]) -> bytes:
    fig, ax = plt.subplots(figsize=(9, 2.8))
    names = [n for n in BUCKET_KEYS if n in breakdown]  # idle is idle_spares + idle_released: not twice
    ax.barh(names, [breakdown[n] for n in names])
    ax.set_xlabel("GPU-hours")
    ax.set_title("Where the window's GPU-hours went")
    ax.grid(alpha=0.3, axis="x")
    return _png(fig)


def plot_failures(by_category: dict[str, int]) -> bytes:
    fig, ax = plt.subplots(figsize=(9, max(2.0, 0.35 * len(by_category) + 1)))
    items = sorted(by_category.items(), key=lambda kv: kv[1])
    ax.barh([k for k, _ in items] or ["(none)"], [v for _, v in items] or [0])
    ax.set_xlabel("unexpected interruptions")
    ax.set_title("Failures by category")
    return _png(fig)


def render_markdown(result: dict[str, Any]) -> str:
    g = result["goodput_breakdown_gpu_h"]
    total = buckets_sum_gpu_h(g)
    p = result["power_mw"]
    lines = [
        f"# Campaign window report: {result['commitment_id']}",
        "",
        (f"Window {result['window']['start']} to {result['window']['end']} ({result['window']['hours']:.1f} h); "
        f"config `{result['config_digest'][:12]}`, data `{result['data_digest'][:12]}`, seed {result['seed']}."),
        "",
        "## Outcome",
        "",
        f"* Effective training time ratio (ETTR, {result['ettr_definition']}): **{result['ettr']:.3f}**",
        (f"* Window utilisation ({result['window_utilisation_definition']}): "
         f"**{result['window_utilisation']:.3f}**"),
        _against_plan(result),
        f"* Tokens trained: **{result['tokens_trained']:.4g}** of {result['tokens_target']:.4g} target"
        + (f", finished on day {result['completion_days']:.2f}" if result["completed"] else " (not finished)"),
        f"* Unexpected interruptions: **{result['interruptions']['unexpected']}**, planned: "
        f"{result['interruptions']['planned']}; observed job MTBF "
        + (f"{result['observed_job_mtbf_h']:.2f} h" if result["observed_job_mtbf_h"] else "n/a (no failures)")
        + (f" (planned {result['planned_job_mtbf_h']:.2f} h)" if result.get("planned_job_mtbf_h") else ""),
        f"* Checkpoint interval used {result['checkpoint_interval_s']['used']:.0f} s, Young/Daly optimum "
        f"{result['checkpoint_interval_s']['optimal']:.0f} s" if result["checkpoint_interval_s"].get("optimal")
        else f"* Checkpoint interval used {result['checkpoint_interval_s']['used']:.0f} s",
        "",
        "## Goodput (GPU-hours)",
        "",
        "| bucket | GPU-hours | share |",
        "| --- | ---: | ---: |",
        *[f"| {k} | {g[k]:,.1f} | {g[k] / total:.1%} |" for k in BUCKET_KEYS],
        f"| **total** | {total:,.1f} | 100% |",
        "",
        f"`idle` = idle_spares + idle_released = {g['idle']:,.1f} GPU-hours.",
        "",
        "![goodput](goodput.png)",
        "",
        "## Failures by category",
        "",
        "| category | count |",
        "| --- | ---: |",
        *[f"| {k} | {v} |" for k, v in result["interruptions"]["by_category"].items()],
        "",
        "![failures](failures.png)",
        "",
        "## Power and energy",
        "",
        (f"* Facility power: peak {p['peak']:.2f} MW, mean {p['mean']:.2f} MW, min {p['min']:.2f} MW; "
        f"largest ramp {p['max_ramp_mw_per_s']:.2f} MW/s"),
        f"* Energy: {result['energy_mwh']:,.1f} MWh",
        "",
        "![power](power.png)",
        "",
        "## Cost (USD)",
        "",
        *[f"* {k}: ${v:,.0f}" for k, v in result["cost_usd"].items()],
        "",
        "## Progress",
        "",
        "![tokens](tokens.png)",
        "",
    ]
    return "\n".join(lines)


def _against_plan(result: dict[str, Any]) -> str:
    planned = result.get("planned") or {}
    if planned.get("expected_ettr") is None:
        return "* Against the plan: not recorded"
    text = (f"* Against the plan: ETTR {result['ettr']:.3f} (plan expected "
            f"{planned['expected_ettr']:.3f})")
    if result.get("completion_days") is not None and planned.get("expected_days") is not None:
        text += f"; done on day {result['completion_days']:.2f} (plan expected {planned['expected_days']:.2f})"
    return text


def write_report(report_dir: Path, result: dict[str, Any], power: pd.DataFrame, tokens: pd.DataFrame,
                 rehearsal: dict[str, Any] | None = None) -> Path:
    """Write report.md, report.html and the PNG plots under report_dir; returns the Markdown path.

    `rehearsal` is the rehearsal gate's `result.json` (details and curves), if the workspace has one."""
    atomic_write_bytes(report_dir / "power.png", plot_power(power))
    atomic_write_bytes(report_dir / "tokens.png", plot_tokens(tokens, result["tokens_target"]))
    atomic_write_bytes(report_dir / "goodput.png", plot_goodput(result["goodput_breakdown_gpu_h"]))
    atomic_write_bytes(report_dir / "failures.png", plot_failures(result["interruptions"]["by_category"]))
    markdown = render_markdown(result)
    if rehearsal is not None:
        from campaign.rehearsal.plot import plot_loss_curve

        atomic_write_bytes(report_dir / "rehearsal.png", plot_loss_curve(rehearsal["curves"], rehearsal["details"]))
        markdown += "\n".join(["## Rehearsal (the small-scale training gate of the latest validate)", "",
                               _rehearsal_line(rehearsal["details"], rehearsal.get("timings") or {}), "",
                               "![rehearsal](rehearsal.png)", ""])
    atomic_write_text(report_dir / "report.html", _html(markdown))
    return atomic_write_text(report_dir / "report.md", markdown)


def _rehearsal_line(d: dict[str, Any], timings: dict[str, float]) -> str:
    if not d.get("passed"):
        return "* Failed: " + "; ".join(d.get("problems") or ["(no reason recorded)"])
    return (f"* Loss {d['loss_first_tenth']:.3f} -> {d['loss_last_tenth']:.3f} (drop {d['loss_drop']:.2f}), held-out "
            f"{d['heldout_first']:.3f} -> {d['heldout_last']:.3f}; killed at step {d['killed_at_step']}, resumed at "
            f"{d['resumed_step']}: {d['restore_check']}; {timings.get('tokens_per_s', float('nan')):,.0f} tokens/s")


def _html(markdown: str) -> str:
    """A plain HTML rendering of the report's Markdown (headings, lists, tables, images)."""
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>campaign report</title>",
           ("<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:2px 8px}</style></head><body>")]
    in_list = in_table = False
    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set("".join(cells)) <= set("-: "):
                continue
            if not in_table:
                out.append("<table>")
                in_table = True
            out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        if line.startswith("* "):
            if not in_list:
                out.append("<ul>")
                in_list = True
            out.append(f"<li>{html.escape(line[2:])}</li>")
            continue
        if in_list:
            out.append("</ul>")
            in_list = False
        if line.startswith("!["):
            src = line[line.index("(") + 1:-1]
            out.append(f"<img src='{html.escape(src)}' alt='{html.escape(src)}'>")
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{html.escape(line[level:].strip())}</h{level}>")
        elif line:
            out.append(f"<p>{html.escape(line)}</p>")
    out.append("</table>" if in_table else "")
    out.append("</ul>" if in_list else "")
    out.append("</body></html>")
    return "\n".join(out)

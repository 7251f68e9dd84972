"""The report of an executed window: a self-contained report.html (Jinja2 template, figures as inline SVG) and a
report.md summary whose figures are PNG data URIs (so they show in the Prefect UI), both written atomically."""

from __future__ import annotations

import base64
import math
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd

from campaign.analysis import plots
from campaign.analysis.power_detail import zoom, zoom_moments
from campaign.analysis.statistics import checkpoint_overhead
from campaign.files import atomic_write_text

BUCKETS = (("productive", "productive training", "useful"), ("checkpoint", "checkpoint writes", "planned overhead"),
           ("lost_rework", "lost rework", "lost"), ("restart", "detection and restart", "lost"),
           ("waiting", "waiting (spare or maintenance)", "lost"),
           ("idle_spares", "spares standing by", "insurance, not lost"),
           ("idle_released", "released early", "capacity back to the cluster, not lost"))


def num(value: Any, digits: int = 0) -> str:
    """A number with thousands separators, or n/a."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def pct(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value * 100:.{digits}f}%"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("campaign.analysis", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined,
                             trim_blocks=False, lstrip_blocks=False, keep_trailing_newline=True)
    env.filters["num"] = num
    env.filters["pct"] = pct
    return env


def css() -> str:
    return resources.files("campaign.analysis").joinpath("templates/base.css").read_text(encoding="utf-8")


def window_figures(result: dict[str, Any], events: pd.DataFrame, power: pd.DataFrame,
                   one_second: np.ndarray | None) -> dict[str, plots.Figure]:
    """Every figure of the window report."""
    figs = {
        "timeline": plots.timeline(events, result),
        "waterfall": plots.waterfall(result["goodput_breakdown_gpu_h"], result["window_gpu_h"]),
        "failures": plots.failures(result["failures"]),
        "power": plots.power_band(power, events),
    }
    ck = result["checkpoint"]
    if ck.get("optimal_for_observed_mtbf_s"):
        mtbf_s = result["observed_job_mtbf_h"] * 3600.0
        figs["checkpoint"] = plots.checkpoint_cost(
            ck["used_s"], ck["optimal_for_observed_mtbf_s"],
            lambda t: checkpoint_overhead(t, ck["write_s"], ck["mean_restart_s"], mtbf_s))
    panels = [zoom(one_second, t, title) for t, title in zoom_moments(events)] if one_second is not None else []
    result["power_zoom"] = [{k: p[k] for k in ("title", "centre_s", "swing_mw", "max_ramp_mw_per_s")}
                            for p in panels]
    figs["power_zoom"] = plots.power_zoom(panels)
    return figs


def render_html(result: dict[str, Any], figures: dict[str, plots.Figure], zoom_note: str = "",
                rehearsal: dict[str, Any] | None = None) -> str:
    return environment().get_template("report.html.j2").render(
        r=result, figures={k: f.svg for k, f in figures.items()} | {"checkpoint": figures.get("checkpoint") and
                                                                   figures["checkpoint"].svg},
        buckets=BUCKETS, css=css(), zoom_note=zoom_note, rehearsal=rehearsal)


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_markdown(result: dict[str, Any], figures: dict[str, plots.Figure],
                    rehearsal: dict[str, Any] | None = None) -> str:
    """The summary for the Prefect UI and report.md: headline with definitions, recommendations, tables, figures."""
    return environment().get_template("summary.md.j2").render(
        r=result, images={k: data_uri(f.png) for k, f in figures.items() if f.png}, buckets=BUCKETS,
        rehearsal=rehearsal)


def rehearsal_section(rehearsal: dict[str, Any] | None) -> dict[str, Any] | None:
    """The rehearsal gate's loss curve (PNG data URI, drawn by campaign.rehearsal.plot) and its one-line verdict."""
    if rehearsal is None:
        return None
    from campaign.rehearsal.plot import plot_loss_curve

    d, timings = rehearsal.get("details") or {}, rehearsal.get("timings") or {}
    if not d.get("passed"):
        line = "failed: " + "; ".join(d.get("problems") or ["(no reason recorded)"])
    else:
        line = (f"loss {d['loss_first_tenth']:.3f} -> {d['loss_last_tenth']:.3f} (drop {d['loss_drop']:.2f}), "
                f"held-out {d['heldout_first']:.3f} -> {d['heldout_last']:.3f}; killed at step {d['killed_at_step']}, "
                f"resumed at {d['resumed_step']}: {d['restore_check']}; "
                f"{num(timings.get('tokens_per_s'))} tokens/s")
    return {"line": line, "image": data_uri(plot_loss_curve(rehearsal.get("curves") or {}, d))}


def write_report(report_dir: Path, result: dict[str, Any], events: pd.DataFrame, power: pd.DataFrame,
                 one_second: np.ndarray | None, zoom_note: str = "",
                 rehearsal: dict[str, Any] | None = None) -> tuple[Path, Path, str]:
    """Write report.html and report.md; returns their paths and the Markdown (for the artifact).

    `rehearsal` is the rehearsal gate's `result.json` (details and curves), if the workspace has one."""
    figures = window_figures(result, events, power, one_second)
    section = rehearsal_section(rehearsal)
    html = render_html(result, figures, zoom_note, section)
    markdown = render_markdown(result, figures, section)
    html_path = atomic_write_text(report_dir / "report.html", html)
    md_path = atomic_write_text(report_dir / "report.md", markdown)
    return html_path, md_path, markdown

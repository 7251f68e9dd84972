"""The report of an executed window: a self-contained report.html (Jinja2 template, figures as inline SVG) and a
report.md summary whose figures are SVG data URIs (the Prefect UI shows them), both written atomically."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import markupsafe
import numpy as np
import pandas as pd

from campaign.analysis.band import figure_text, scale_text
from campaign.analysis.power_detail import zoom, zoom_moments
from campaign.analysis.report_inputs import ReportInputs
from campaign.analysis.statistics import checkpoint_overhead
from campaign.figures import md_cell, num, pct, tokens, tokens_b, when_in_window
from campaign.files import atomic_write_text
from campaign.goodput import BUCKETS

if TYPE_CHECKING:
    from campaign.analysis.plots import Figure
    from campaign.analysis.result import WindowAnalysis
    from campaign.failures.fit import FittedRate


@dataclass(frozen=True, slots=True)
class RehearsalSection:
    """The rehearsal gate's part of the report: its one-line verdict and its loss curve (a PNG data URI)."""

    line: str
    image: str


def _is_html(name: str | None) -> bool:
    return name is not None and ".html" in name


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("campaign.analysis", "templates"),
        # HTML is escaped; Markdown is not (an apostrophe stays one: Markdown cells escape with `md`)
        autoescape=_is_html,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
        keep_trailing_newline=True,
    )
    env.filters["num"] = num
    env.filters["pct"] = pct
    env.filters["md"] = lambda text: markupsafe.Markup(md_cell(text))  # already escaped for Markdown and HTML
    env.filters["tokens_b"] = tokens_b
    env.filters["tokens"] = tokens
    env.filters["when_in_window"] = when_in_window
    env.filters["band_value"] = lambda value, figure: figure_text(figure, value)
    env.filters["band_scale"] = lambda m: scale_text(m["job_nodes"], m["spare_nodes"], m["world_sizes"])
    return env


def css() -> markupsafe.Markup:
    """The pages' shared style sheet, marked safe: escaped, its quotes (`"Segoe UI"`) would break the rules."""
    return markupsafe.Markup(
        resources.files("campaign.analysis").joinpath("templates/base.css").read_text(encoding="utf-8")
    )


def window_figures(
    result: WindowAnalysis, events: pd.DataFrame, power_band: pd.DataFrame, one_second: np.ndarray | None
) -> tuple[dict[str, Figure], WindowAnalysis]:
    """Every figure of the window report (`power_band`: per-bin min/mean/max, `report_inputs.power_band`), and the
    analysis with the zoom panels' figures (`power_zoom`)."""
    from campaign.analysis import plots  # matplotlib loads only when a report is drawn

    r = result.figures
    figs = {
        "timeline": plots.timeline(events, r),
        "waterfall": plots.waterfall(r.goodput_breakdown_gpu_h, r.window_gpu_h),
        "failures": plots.failures(r.failures),
        "power": plots.power_band(power_band, events, r.window_days),
    }
    ck = r.checkpoint
    if ck.optimal_for_observed_mtbf_s and r.observed_job_mtbf_h is not None:
        mtbf_s = r.observed_job_mtbf_h * 3600.0
        write_s, restart_s = ck.write_s or 0.0, ck.mean_restart_s or 0.0  # both set wherever the optimum is
        figs["checkpoint"] = plots.checkpoint_cost(
            ck.used_s,
            ck.optimal_for_observed_mtbf_s,
            lambda t: checkpoint_overhead(t, write_s, restart_s, mtbf_s),
        )
    panels = (
        [zoom(one_second, t, title) for t, title in zoom_moments(events)] if one_second is not None else []
    )
    figs["power_zoom"] = plots.power_zoom(panels)
    return figs, replace(result, power_zoom=panels)


def render_html(
    result: WindowAnalysis,
    figures: dict[str, Figure],
    zoom_note: str = "",
    rehearsal: RehearsalSection | None = None,
) -> str:
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            r=result.to_json(),
            figures={k: f.svg for k, f in figures.items()}
            | {"checkpoint": figures.get("checkpoint") and figures["checkpoint"].svg},
            buckets=BUCKETS,
            css=css(),
            zoom_note=zoom_note,
            rehearsal=rehearsal,
        )
    )


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def svg_data_uri(svg: str) -> str:
    """An SVG figure as a base64 data URI (shown by the Prefect UI's markdown renderer and by Markdown viewers)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def render_markdown(
    result: WindowAnalysis, figures: dict[str, Figure], rehearsal: RehearsalSection | None = None
) -> str:
    """The summary for the Prefect UI and report.md: headline with definitions, recommendations, tables, figures."""
    return (
        environment()
        .get_template("summary.md.j2")
        .render(
            r=result.to_json(),
            images={k: svg_data_uri(f.svg) for k, f in figures.items()},
            buckets=BUCKETS,
            rehearsal=rehearsal,
        )
    )


def rehearsal_section(rehearsal: dict[str, Any] | None) -> RehearsalSection | None:
    """The rehearsal gate's loss curve (PNG data URI, drawn by campaign.rehearsal.plot) and its one-line verdict,
    from its result.json as read (`rehearsal`: the JSON object, or None without one)."""
    if rehearsal is None:
        return None
    from campaign.rehearsal.plot import plot_loss_curve

    d, timings = rehearsal.get("details") or {}, rehearsal.get("timings") or {}
    if not d.get("passed"):
        line = "failed: " + "; ".join(d.get("problems") or ["(no reason recorded)"])
    else:
        line = (
            f"loss {d['loss_first_tenth']:.3f} -> {d['loss_last_tenth']:.3f} (drop {d['loss_drop']:.2f}), "
            f"held-out {d['heldout_first']:.3f} -> {d['heldout_last']:.3f}; killed at step {d['killed_at_step']}, "
            f"resumed at {d['resumed_step']}: {d['restore_check']}; "
            f"{num(timings.get('tokens_per_s'))} tokens/s"
        )
    return RehearsalSection(line, data_uri(plot_loss_curve(rehearsal.get("curves") or {}, d)))


def fitted_rates(config_json: str | None) -> list[FittedRate]:
    """The committed config's failure rates fitted from an incident log, each with its exact 95% interval
    (docs/failures.md); empty when no category carries `observed` counts or no whole config was recorded."""
    import pydantic

    from campaign.config import CampaignConfig
    from campaign.failures.profile import observed_rates

    if not config_json:
        return []
    try:
        cluster = CampaignConfig.model_validate(json.loads(config_json)).cluster
    except (pydantic.ValidationError, ValueError):  # a partial record: no fitted rates to show
        return []
    return observed_rates(cluster.failures)


def write_report(report_dir: Path, inputs: ReportInputs) -> tuple[Path, Path, str]:
    """Write report.html and report.md from `gather_report_inputs`; returns their paths and the Markdown (for the
    artifact). Sets `inputs.result` to the analysis as drawn: with `power_zoom` (the zoom panels' figures) and
    `fitted_rates`."""
    figures, drawn = window_figures(inputs.result, inputs.events, inputs.power_band, inputs.one_second)
    drawn = replace(drawn, fitted_rates=fitted_rates(inputs.config_json))
    if drawn.fitted_rates:
        from campaign.failures.report import rates_figure

        figures["fitted_rates"] = rates_figure(drawn.fitted_rates)
    inputs.result = drawn
    section = rehearsal_section(inputs.rehearsal)
    html = render_html(drawn, figures, inputs.zoom_note, section)
    markdown = render_markdown(drawn, figures, section)
    html_path = atomic_write_text(report_dir / "report.html", html)
    md_path = atomic_write_text(report_dir / "report.md", markdown)
    return html_path, md_path, markdown

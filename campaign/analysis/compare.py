"""Runs side by side: executed windows (workspaces) and what-if runs (`campaign simulate --json` files) in one table,
one JSON and one self-contained HTML page, with every figure that differs from the first run highlighted.

A simulate file is the user's: every figure read from it is checked (a number, finite, in range) and a bad one is
named with its field. The output folder is campaign's own: a new or empty folder gets a marker, and a folder that
holds anything else without that marker is refused, as `--workspace` refuses one."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from campaign import goodput
from campaign.analysis.analysis import analyse_window, analysis_workspace
from campaign.analysis.report import css, environment
from campaign.errors import ConfigError, DataError
from campaign.figures import md_cell, num
from campaign.files import (
    FileTooLarge,
    NotRegularFile,
    atomic_write_json,
    atomic_write_text,
    check_output_dir,
    read_bounded,
)

# Two figures differ when they differ in their first SIGNIFICANT digits (or one is missing): equal up to float
# noise is equal. A differing pair is shown with as many decimals as it takes to see the difference.
SIGNIFICANT = 9
MAX_DECIMALS = 9
COMPARE_MARKER = ".campaign-compare"
MAX_SIMULATE_JSON_BYTES = 256 << 20  # 100,000 replicas' values are about 10 MB

# (key path, label, unit, digits) for executed windows and simulate runs (p50 of the replicas).
WINDOW_METRICS = (
    ("ettr", "ETTR while the job ran", "", 3),
    ("window_utilisation", "window utilisation", "", 3),
    ("tokens_trained", "tokens trained", "B", 1),
    ("completion_days", "finished on day", "d", 2),
    ("interruptions.unexpected", "unexpected interruptions", "", 0),
    ("interruptions.planned", "planned interruptions", "", 0),
    ("observed_job_mtbf_h", "observed job MTBF", "h", 2),
    ("checkpoint_interval_s.used", "checkpoint interval", "s", 0),
    ("cost_usd.lost", "lost to failures", "USD", 0),
    ("released_early_h", "released early", "h", 1),
    ("power_mw.peak", "peak power", "MW", 3),
    ("power_mw.max_ramp_mw_per_s", "steepest ramp", "MW/s", 3),
    ("energy_mwh", "energy", "MWh", 1),
    ("cost_usd.energy", "energy cost", "USD", 0),
)
SIMULATE_METRICS = (
    ("summary.ettr.p50", "ETTR (p50 of replicas)", "", 3),
    ("summary.ettr.p10", "ETTR p10", "", 3),
    ("summary.ettr.p90", "ETTR p90", "", 3),
    ("summary.completion_days.p50", "finished on day (p50)", "d", 2),
    ("summary.completion_days.p90", "finished on day (p90)", "d", 2),
    ("summary.target_days.p90", "target reached on day (p90)", "d", 2),
    ("summary.p_target_in_window", "P(target reached inside the window)", "", 2),
    ("summary.interruptions_unexpected.mean", "unexpected interruptions (mean)", "", 1),
    ("summary.tokens_trained.p50", "tokens trained (p50)", "B", 1),
    ("summary.power_mw.peak", "peak power", "MW", 3),
    ("summary.energy_mwh", "energy (mean)", "MWh", 1),
)


def check_targets(targets: list[str]) -> None:
    """Each target must be a workspace with an executed window or a `campaign simulate --json` file (exit 2)."""
    if len(targets) < 2:
        raise ConfigError(
            "--compare needs at least two runs",
            where="--compare",
            fix="pass two or more workspaces or simulate JSON files: --compare W1 W2",
        )
    for target in targets:
        path = Path(target)
        if path.is_dir():
            analysis_workspace(path)
        elif (
            path.exists()
        ):  # a file, or a FIFO or a device: _read_simulate says which it is, without blocking
            _read_simulate(path)
        else:
            raise ConfigError(
                "no such workspace or simulate JSON file",
                where=target,
                fix="pass the folder a campaign ran in, or a file from `campaign simulate --json > run.json`",
            )


def _read_simulate(path: Path) -> dict[str, Any]:
    fix = "pass a file written by `campaign simulate CONFIG --json > run.json`"
    try:
        data = json.loads(read_bounded(path, MAX_SIMULATE_JSON_BYTES).decode("utf-8"))
    except (NotRegularFile, FileTooLarge) as exc:
        raise DataError(f"not a simulate JSON file: {exc.strerror}", where=str(path), fix=fix) from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise DataError(f"not a readable JSON file ({reason})", where=str(path), fix=fix) from None
    if not isinstance(data, dict) or not isinstance(data.get("summary"), dict) or "replicas" not in data:
        raise DataError(
            "not the output of `campaign simulate --json` (no 'replicas' and 'summary')",
            where=str(path),
            fix=fix,
        )
    _check_simulate_figures(data, path)
    return data


# Every figure of a simulate file that compare reads, with its range ((low, high); None: unbounded).
_SPREAD_KEYS = ("ettr", "completion_days", "target_days", "interruptions_unexpected", "tokens_trained")
_SIMULATE_FIELDS: dict[str, tuple[float | None, float | None]] = {
    "replicas": (1, None),
    "window_days": (0, None),
    "summary.window_days": (0, None),
    "summary.p_complete_in_window": (0, 1),
    "summary.p_target_in_window": (0, 1),
    "summary.power_mw.peak": (0, None),
    "summary.energy_mwh": (0, None),
    **{f"summary.{key}.{stat}": (0, None) for key in _SPREAD_KEYS for stat in ("mean", "p10", "p50", "p90")},
}


def _check_simulate_figures(data: dict[str, Any], path: Path) -> None:
    """Every figure compare reads from a simulate file is a finite number in its range, or absent (null): a
    tampered or damaged file is named with its field instead of reaching the table or a plot."""
    fix = "restore the file from `campaign simulate CONFIG --json > run.json`; compare reads it as written"
    for dotted, (low, high) in _SIMULATE_FIELDS.items():
        _check_number(_lookup(data, dotted, path, fix), dotted, low, high, path, fix)
    replica_values = data.get("replica_values")
    if replica_values is None:
        return
    if not isinstance(replica_values, dict):
        raise DataError("field replica_values is not a mapping", where=str(path), fix=fix)
    for key in _SPREAD_KEYS:
        values = replica_values.get(key)
        if values is None:
            continue
        if not isinstance(values, list):
            raise DataError(f"field replica_values.{key} is not a list", where=str(path), fix=fix)
        for i, value in enumerate(values):
            _check_number(value, f"replica_values.{key}[{i}]", 0, None, path, fix)


def _lookup(data: dict[str, Any], dotted: str, path: Path, fix: str) -> Any:
    value: Any = data
    parts = dotted.split(".")
    for depth, part in enumerate(parts):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise DataError(
                f"field {'.'.join(parts[:depth])} is {_shown(value)}, not a mapping", where=str(path), fix=fix
            )
        value = value.get(part)
    return value


def _check_number(
    value: Any, dotted: str, low: float | None, high: float | None, path: Path, fix: str
) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(f"field {dotted} is {_shown(value)}, not a number", where=str(path), fix=fix)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise DataError(f"field {dotted} is {_shown(value)}, not a finite number", where=str(path), fix=fix)
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"from {low:g} to {high:g}" if high is not None else f"at least {low:g}"
        raise DataError(f"field {dotted} is {number:g}; it must be {bounds}", where=str(path), fix=fix)


def _shown(value: Any) -> str:
    text = (
        repr(value)
        if not isinstance(value, int) or abs(value) < 10**30
        else f"an integer of {len(str(abs(value)))} digits"
    )
    return text if len(text) <= 60 else text[:57] + "..."


def load_run(target: str) -> dict[str, Any]:
    """One run's figures: an executed window (read-only) or a simulate result."""
    path = Path(target)
    if path.exists() and not path.is_dir():
        return {"target": target, "kind": "simulate", "name": path.stem, "data": _read_simulate(path)}
    from campaign.store import catalog

    ws = analysis_workspace(path)
    with catalog(ws, read_only=True) as con:
        result = analyse_window(con, str(ws.catalog_path))
    return {"target": target, "kind": "window", "name": ws.root.name, "data": result.to_json()}


def _get(data: dict[str, Any], dotted: str) -> float | None:
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _differs(first: float | None, other: float | None) -> bool:
    """The two figures differ (in their first SIGNIFICANT digits), or exactly one is missing."""
    if first is None or other is None:
        return first is not other
    return f"{first:.{SIGNIFICANT}g}" != f"{other:.{SIGNIFICANT}g}"


def shown_digits(values: list[float | None], differs: list[bool], digits: int) -> int:
    """Decimals to show a row with: its usual `digits`, or more until each value that differs from the first reads
    differently from it (up to MAX_DECIMALS)."""
    first = values[0]
    if first is None:
        return digits
    pairs = [v for v, d in zip(values, differs, strict=True) if d and v is not None]
    while digits < MAX_DECIMALS and any(num(v, digits) == num(first, digits) for v in pairs):
        digits += 1
    return digits


def comparison_table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per figure: its value in each run and whether each differs from the first run."""
    kinds = {r["kind"] for r in runs}
    metrics: tuple[tuple[str, str, str, int], ...] = (
        WINDOW_METRICS if kinds == {"window"} else SIMULATE_METRICS if kinds == {"simulate"} else ()
    )
    if not metrics:  # a mix: figures both kinds have, windows read as one replica
        metrics = (
            ("ettr", "ETTR", "", 3),
            ("completion_days", "finished on day", "d", 2),
            ("interruptions.unexpected", "unexpected interruptions", "", 1),
            ("energy_mwh", "energy", "MWh", 1),
        )
    rows = []
    for key, label, unit, digits in metrics:
        values = [_value(r, key) for r in runs]
        scale = 1e9 if unit == "B" else 1.0
        scaled = [None if v is None else v / scale for v in values]
        differs = [False] + [_differs(values[0], v) for v in values[1:]]
        rows.append(
            {
                "key": key,
                "label": label,
                "unit": unit,
                "digits": shown_digits(scaled, differs, digits),
                "values": scaled,
                "differs": differs,
            }
        )
    return rows


def _value(run: dict[str, Any], key: str) -> float | None:
    if key == "summary.p_target_in_window" and "p_target_in_window" not in run["data"]["summary"]:
        # A file written before the figure existed: its windows stopped at the target, so finishing was reaching it.
        key = "summary.p_complete_in_window"
    if run["kind"] == "simulate" and not key.startswith("summary."):
        mapped = {
            "ettr": "summary.ettr.mean",
            "completion_days": "summary.completion_days.mean",
            "interruptions.unexpected": "summary.interruptions_unexpected.mean",
            "energy_mwh": "summary.energy_mwh",
        }[key]
        return _get(run["data"], mapped)
    return _get(run["data"], key)


def _goodput_figure(runs: list[dict[str, Any]]) -> Any:
    windows = [r for r in runs if r["kind"] == "window"]
    if not windows:
        return None
    from campaign.analysis.plots import BUCKET_COLOURS, _figure, plt  # plots sets the Agg backend first

    fig, ax = plt.subplots(figsize=(10, 0.5 * len(windows) + 1.4))
    for i, run in enumerate(windows):
        left = 0.0
        buckets = run["data"]["goodput_breakdown_gpu_h"]
        total = goodput.buckets_sum_gpu_h(buckets)
        for key in goodput.BUCKET_KEYS:
            share = buckets[key] / total if total else 0.0
            ax.barh(
                i,
                share,
                left=left,
                color=BUCKET_COLOURS[key],
                label=key.replace("_", " ") if i == 0 else None,
            )
            left += share
    ax.set_yticks(range(len(windows)), [r["name"] for r in windows])
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the window's GPU-hours (job + spares)")
    ax.set_title("Goodput side by side")
    ax.legend(fontsize=7, ncols=4, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    return _figure("goodput", fig)


def _spread_figure(runs: list[dict[str, Any]]) -> Any:
    sims = [r for r in runs if r["kind"] == "simulate"]
    if not sims:
        return None
    if all(isinstance(r["data"].get("replica_values"), dict) for r in sims):
        return _distribution_figure(sims)
    from campaign.analysis.plots import _figure, plt  # plots sets the Agg backend first

    fig, axes = plt.subplots(1, 3, figsize=(10, 0.45 * len(sims) + 1.6), sharey=True)
    for ax, (key, label) in zip(
        axes,
        (
            ("ettr", "ETTR"),
            ("completion_days", "finished on day"),
            ("interruptions_unexpected", "unexpected interruptions"),
        ),
        strict=True,
    ):
        for i, run in enumerate(sims):
            s = run["data"]["summary"].get(key) or {}
            if s.get("p10") is not None and s.get("p90") is not None:
                ax.plot([s["p10"], s["p90"]], [i, i], color="#8fb3d9", lw=6, solid_capstyle="butt")
            if s.get("p50") is not None:
                ax.plot(s["p50"], i, "o", color="#1f4e79")
        ax.set_title(f"{label} (p10-p90, p50)", fontsize=8)
        ax.grid(alpha=0.25, axis="x")
    axes[0].set_yticks(range(len(sims)), [r["name"] for r in sims])
    return _figure("spread", fig)


def _distribution_figure(sims: list[dict[str, Any]]) -> Any:
    """Simulate runs that carry their replicas' values: the share of replicas at or below each value (ECDF) of the
    completion day (unfinished replicas never get there, so each curve ends at its P(finish)), ETTR and unexpected
    interruptions, one line per run."""
    from campaign.analysis.plots import CATEGORY_COLOURS, _figure, plt  # plots sets the Agg backend first

    fig, axes = plt.subplots(1, 3, figsize=(10, 3.0))
    for ax, (key, label) in zip(
        axes,
        (
            ("completion_days", "finished on day"),
            ("ettr", "ETTR"),
            ("interruptions_unexpected", "unexpected interruptions"),
        ),
        strict=True,
    ):
        for i, run in enumerate(sims):
            raw = run["data"]["replica_values"].get(key) or []
            data = np.sort(np.array([v for v in raw if v is not None], dtype=float))
            if not len(raw) or not len(data):
                continue
            y = np.arange(1, len(data) + 1) / len(raw)
            ax.step(
                np.concatenate([[data[0]], data]),
                np.concatenate([[0.0], y]),
                where="post",
                lw=1.3,
                color=CATEGORY_COLOURS[i % 10],
                label=run["name"],
            )
        if key == "completion_days":
            days = {r["data"]["summary"].get("window_days") for r in sims} - {None}
            for d in sorted(days):
                ax.axvline(d, color="#d62728", lw=1, ls=":")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{label} (ECDF over replicas)", fontsize=8)
        ax.grid(alpha=0.25)
    axes[0].set_ylabel("share of replicas")
    axes[0].legend(fontsize=7, frameon=False, loc="upper left")
    return _figure("spread", fig)


def window_length_advice(run: dict[str, Any]) -> str | None:
    """For a simulate run: was the window too short or too long for the completion distribution?"""
    if run["kind"] != "simulate":
        return None
    s = run["data"]["summary"]
    length = s.get("window_length")
    if length:  # the schedule gate's rule (campaign.window_verdict.window_sufficiency)
        p90 = length["p90_target_days"]
        reached = f"{length['p_target_in_window']:.0%} of replicas reach the target inside the window"
        if length["verdict"] == "too_short":
            return f"too short: only {reached}" + (f"; p90 is day {p90:.1f}" if p90 is not None else "")
        if length["verdict"] == "too_long":
            return f"longer than needed: {reached}, all but 1% of them by day {length['p99_target_days']:.1f}"
        return f"fits: {reached}" + (f", 90% by day {p90:.1f}" if p90 is not None else "")
    p = s.get("p_complete_in_window")
    done = s.get("completion_days") or {}
    window_days = run["data"].get("window_days") or s.get("window_days")
    if p is None:
        return None
    if p < 0.9:
        return f"too short: only {p:.0%} of replicas finish inside the window" + (
            f"; p90 of those that finish is day {done['p90']:.1f}" if done.get("p90") is not None else ""
        )
    if window_days and done.get("p90") is not None and done["p90"] < 0.8 * window_days:
        return f"longer than needed: 90% of replicas finish by day {done['p90']:.1f} of {window_days:.1f}"
    return f"fits: {p:.0%} of replicas finish inside the window" + (
        f", 90% by day {done['p90']:.1f}" if done.get("p90") is not None else ""
    )


def render_compare(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The comparison as JSON, HTML and Markdown."""
    table = comparison_table(runs)
    for run in runs:
        run["window_advice"] = window_length_advice(run)
    figures = {k: f for k, f in (("goodput", _goodput_figure(runs)), ("spread", _spread_figure(runs))) if f}
    names = [r["name"] for r in runs]
    out_json = {
        "runs": [
            {"target": r["target"], "kind": r["kind"], "name": r["name"], "window_length": r["window_advice"]}
            for r in runs
        ],
        "metrics": table,
        "differences": [row["label"] for row in table if any(row["differs"])],
        "results": [r["data"] for r in runs],
    }
    env = environment()
    html = env.get_template("compare.html.j2").render(
        runs=runs, table=table, css=css(), figures={k: f.svg for k, f in figures.items()}
    )
    md = [
        "# Runs side by side",
        "",
        "| figure | unit | " + " | ".join(md_cell(n) for n in names) + " |",
        "| --- | --- |" + " ---: |" * len(names),
    ]
    for row in table:
        cells = [
            ("**" + num(v, row["digits"]) + "**") if d else num(v, row["digits"])
            for v, d in zip(row["values"], row["differs"], strict=True)
        ]
        md.append(f"| {row['label']} | {row['unit']} | " + " | ".join(cells) + " |")
    md += ["", "Bold: differs from the first run.", ""]
    md += [f"- {md_cell(r['name'])}: window {r['window_advice']}" for r in runs if r["window_advice"]]
    return {"json": out_json, "html": html, "markdown": "\n".join(md) + "\n"}


def compare_out_dir(out: str | Path, inputs: Mapping[str, str | Path | None] | None = None) -> Path:
    """The folder `--out` names, absolute, if campaign may write there: a new or empty folder, or one an earlier
    comparison made (it has the marker). A folder holding anything else is refused: compare never overwrites a
    user's own compare.html."""
    root = check_output_dir(out, "--out", inputs, markers=(COMPARE_MARKER,))
    return root


def write_compare(out_dir: Path, comparison: dict[str, Any]) -> tuple[Path, Path]:
    """compare.html and compare.json in campaign's own folder `out_dir` (checked again here: the flow may run
    later than the command that named it)."""
    out_dir = compare_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not (out_dir / COMPARE_MARKER).is_file():
        atomic_write_json(
            out_dir / COMPARE_MARKER,
            {"note": "campaign's own folder: `campaign analyse --compare` writes here"},
        )
    html = atomic_write_text(out_dir / "compare.html", comparison["html"])
    path_json = atomic_write_json(out_dir / "compare.json", comparison["json"])
    return html, path_json


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and not np.isnan(value)

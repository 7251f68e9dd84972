"""Runs side by side: executed windows (workspaces) and what-if runs (`campaign simulate --json` files) in one table,
one JSON and one self-contained HTML page, with every figure that differs from the first run highlighted.

A simulate file is the user's: every figure read from it is checked (a number, finite, in range) and a bad one is
named with its field. The output folder is campaign's own: a new or empty folder gets a marker, and a folder that
holds anything else without that marker is refused, as `--workspace` refuses one."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from campaign import goodput
from campaign.analysis.analysis import analyse_window, analysis_workspace
from campaign.analysis.report import css, environment
from campaign.analysis.result import WindowAnalysis
from campaign.analysis.simulate_run import SimulateRun, Spread, window_length_advice
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
from campaign.records import JsonRecord

# Two figures differ when they differ in their first SIGNIFICANT digits (or one is missing): equal up to float
# noise is equal. A differing pair is shown with as many decimals as it takes to see the difference.
SIGNIFICANT = 9
MAX_DECIMALS = 9
COMPARE_MARKER = ".campaign-compare"
MAX_SIMULATE_JSON_BYTES = 256 << 20  # 100,000 replicas' values are about 10 MB

# (attribute path, label, unit, digits) for executed windows (of the analysis' figures, analysis.json's keys) and
# simulate runs (of the result, `campaign simulate --json`'s keys; p50 of the replicas).
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
# A mix of windows and simulate runs: figures both kinds have, windows read as one replica, simulate runs by mean.
MIXED_METRICS = (
    ("ettr", "ETTR", "", 3),
    ("completion_days", "finished on day", "d", 2),
    ("interruptions.unexpected", "unexpected interruptions", "", 1),
    ("energy_mwh", "energy", "MWh", 1),
)
_MIXED_SIMULATE = {
    "ettr": "summary.ettr.mean",
    "completion_days": "summary.completion_days.mean",
    "interruptions.unexpected": "summary.interruptions_unexpected.mean",
    "energy_mwh": "summary.energy_mwh",
}


@dataclass(frozen=True, slots=True)
class CompareRun:
    """One run of a comparison: an executed window's analysis or a simulate result, as `target` named it."""

    target: str
    name: str
    window: WindowAnalysis | None = None
    simulate: SimulateRun | None = None

    @property
    def kind(self) -> Literal["window", "simulate"]:
        return "window" if self.window is not None else "simulate"

    @property
    def window_advice(self) -> str | None:
        """For a simulate run: was the window too short or too long for the completion distribution?"""
        return window_length_advice(self.simulate) if self.simulate is not None else None

    def result_json(self) -> dict[str, Any]:
        """The run's own JSON: analysis.json of a window, the simulate file as it was read."""
        if self.window is not None:
            return self.window.to_json()
        assert self.simulate is not None  # a run is one or the other
        return self.simulate.data


@dataclass(frozen=True, slots=True)
class CompareRow(JsonRecord):
    """One figure across the runs: its value in each (scaled to `unit`, None: n/a) and whether each differs from
    the first run's, shown with `digits` decimals."""

    key: str
    label: str
    unit: str
    digits: int
    values: list[float | None]
    differs: list[bool]


@dataclass(frozen=True, slots=True)
class Comparison:
    """Runs side by side: the table, the self-contained page and the Markdown; `to_json()` is compare.json."""

    runs: list[CompareRun]
    table: list[CompareRow]
    html: str
    markdown: str

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": [
                {"target": r.target, "kind": r.kind, "name": r.name, "window_length": r.window_advice}
                for r in self.runs
            ],
            "metrics": [row.to_json() for row in self.table],
            "differences": [row.label for row in self.table if any(row.differs)],
            "results": [r.result_json() for r in self.runs],
        }


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


def _read_simulate(path: Path) -> SimulateRun:
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
    return SimulateRun.from_json(data)


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


def load_run(target: str) -> CompareRun:
    """One run's figures: an executed window (read-only) or a simulate result."""
    path = Path(target)
    if path.exists() and not path.is_dir():
        return CompareRun(target, path.stem, simulate=_read_simulate(path))
    from campaign.store import catalog

    ws = analysis_workspace(path)
    with catalog(ws, read_only=True) as con:
        result = analyse_window(con, str(ws.catalog_path))
    return CompareRun(target, ws.root.name, window=result)


def _get(record: object, dotted: str) -> float | None:
    """The figure at an attribute path of a record (None where a record on the way is missing)."""
    value = record
    for part in dotted.split("."):
        value = getattr(value, part, None)
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


def comparison_table(runs: list[CompareRun]) -> list[CompareRow]:
    """One row per figure: its value in each run and whether each differs from the first run."""
    kinds = {r.kind for r in runs}
    metrics = (
        WINDOW_METRICS
        if kinds == {"window"}
        else SIMULATE_METRICS
        if kinds == {"simulate"}
        else MIXED_METRICS
    )
    rows = []
    for key, label, unit, digits in metrics:
        values = [_value(r, key) for r in runs]
        scale = 1e9 if unit == "B" else 1.0
        scaled = [None if v is None else v / scale for v in values]
        differs = [False] + [_differs(values[0], v) for v in values[1:]]
        rows.append(CompareRow(key, label, unit, shown_digits(scaled, differs, digits), scaled, differs))
    return rows


def _value(run: CompareRun, key: str) -> float | None:
    if run.window is not None:
        return _get(run.window.figures, key)
    return _get(run.simulate, _MIXED_SIMULATE.get(key, key))


def _goodput_figure(runs: list[CompareRun]) -> Any:
    windows = [r.window for r in runs if r.window is not None]
    if not windows:
        return None
    from campaign.analysis.plots import BUCKET_COLOURS, _figure, plt  # plots sets the Agg backend first

    fig, ax = plt.subplots(figsize=(10, 0.5 * len(windows) + 1.4))
    for i, window in enumerate(windows):
        left = 0.0
        buckets = window.figures.goodput_breakdown_gpu_h
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
    ax.set_yticks(range(len(windows)), [r.name for r in runs if r.window is not None])
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the window's GPU-hours (job + spares)")
    ax.set_title("Goodput side by side")
    ax.legend(fontsize=7, ncols=4, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    return _figure("goodput", fig)


def _spread_figure(runs: list[CompareRun]) -> Any:
    named = [(r.name, r.simulate) for r in runs if r.simulate is not None]
    if not named:
        return None
    if all(sim.replica_values is not None for _, sim in named):
        return _distribution_figure(named)
    from campaign.analysis.plots import _figure, plt  # plots sets the Agg backend first

    fig, axes = plt.subplots(1, 3, figsize=(10, 0.45 * len(named) + 1.6), sharey=True)
    for ax, (key, label) in zip(
        axes,
        (
            ("ettr", "ETTR"),
            ("completion_days", "finished on day"),
            ("interruptions_unexpected", "unexpected interruptions"),
        ),
        strict=True,
    ):
        for i, (_, sim) in enumerate(named):
            s = getattr(sim.summary, key) or Spread()
            if s.p10 is not None and s.p90 is not None:
                ax.plot([s.p10, s.p90], [i, i], color="#8fb3d9", lw=6, solid_capstyle="butt")
            if s.p50 is not None:
                ax.plot(s.p50, i, "o", color="#1f4e79")
        ax.set_title(f"{label} (p10-p90, p50)", fontsize=8)
        ax.grid(alpha=0.25, axis="x")
    axes[0].set_yticks(range(len(named)), [name for name, _ in named])
    return _figure("spread", fig)


def _distribution_figure(sims: list[tuple[str, SimulateRun]]) -> Any:
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
        for i, (name, sim) in enumerate(sims):
            assert sim.replica_values is not None  # drawn only when every run carries them
            raw: list[Any] = getattr(sim.replica_values, key)
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
                label=name,
            )
        if key == "completion_days":
            days = {d for _, sim in sims if (d := sim.summary.window_days) is not None}
            for d in sorted(days):
                ax.axvline(d, color="#d62728", lw=1, ls=":")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{label} (ECDF over replicas)", fontsize=8)
        ax.grid(alpha=0.25)
    axes[0].set_ylabel("share of replicas")
    axes[0].legend(fontsize=7, frameon=False, loc="upper left")
    return _figure("spread", fig)


def render_compare(runs: list[CompareRun]) -> Comparison:
    """The comparison as JSON (`Comparison.to_json()`), HTML and Markdown."""
    table = comparison_table(runs)
    figures = {k: f for k, f in (("goodput", _goodput_figure(runs)), ("spread", _spread_figure(runs))) if f}
    names = [r.name for r in runs]
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
            ("**" + num(v, row.digits) + "**") if d else num(v, row.digits)
            for v, d in zip(row.values, row.differs, strict=True)
        ]
        md.append(f"| {row.label} | {row.unit} | " + " | ".join(cells) + " |")
    md += ["", "Bold: differs from the first run.", ""]
    md += [f"- {md_cell(r.name)}: window {r.window_advice}" for r in runs if r.window_advice]
    return Comparison(runs, table, html, "\n".join(md) + "\n")


def compare_out_dir(out: str | Path, inputs: Mapping[str, str | Path | None] | None = None) -> Path:
    """The folder `--out` names, absolute, if campaign may write there: a new or empty folder, or one an earlier
    comparison made (it has the marker). A folder holding anything else is refused: compare never overwrites a
    user's own compare.html."""
    root = check_output_dir(out, "--out", inputs, markers=(COMPARE_MARKER,))
    return root


def write_compare(out_dir: Path, comparison: Comparison) -> tuple[Path, Path]:
    """compare.html and compare.json in campaign's own folder `out_dir` (checked again here: the flow may run
    later than the command that named it)."""
    out_dir = compare_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not (out_dir / COMPARE_MARKER).is_file():
        atomic_write_json(
            out_dir / COMPARE_MARKER,
            {"note": "campaign's own folder: `campaign analyse --compare` writes here"},
        )
    html = atomic_write_text(out_dir / "compare.html", comparison.html)
    path_json = atomic_write_json(out_dir / "compare.json", comparison.to_json())
    return html, path_json


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and not np.isnan(value)

"""A run campaign did not launch, read back as a measured run: its metrics file (the trainer contract's lines,
each step and checkpoint line with a wall-clock `time` in Unix seconds, or Megatron-LM's or TorchTitan's own log,
each line with its timestamp, or NeMo's TensorBoard event files, each step with its event's time:
campaign.plan.trainer_logs.timed_records) and, optionally, an incident log's
incidents file (`time,category[,node]`, CSV or Parquet, as `campaign failures fit` reads it, docs/failures.md).

A restart is where the metrics say so: a `resumed` event, or a step number that goes back. Each restart is a
failure at the last line before it, of the category of the last incident between that start's first line and
the next start's first line (`unclassified` when the log has none there). The run's window is its first line to
its last; the rest is `campaign.execution.measured`, so the report has the keys of any other window.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any, Unpack

import pandas as pd

from campaign.errors import DataError
from campaign.execution.journal import Journal, JournalEvent, JournalStep
from campaign.execution.journal_lines import EventKeys
from campaign.files import check_regular
from campaign.plan.tensorboard_events import is_event_path
from campaign.plan.trainer_logs import TimedLine, timed_records
from campaign.rehearsal.contract import MetricsError, parse_metrics_record

UNCLASSIFIED = "unclassified"
MAX_PROBLEMS = 10


def _framework_rows(path: Path, rows: list[TimedLine] | None) -> list[TimedLine]:
    if not rows or not any(r.kind == "step" for r in rows):
        raise DataError("the log has no step line", where=str(path), fix="give the run's training log")
    return rows


def read_timed_metrics(path: Path) -> list[TimedLine]:
    """The step, checkpoint and resumed lines of a metrics file with their times, in file order; every bad line
    is reported at once (DataError, exit 2) with its line number."""
    if is_event_path(path):  # NeMo's TensorBoard event files: a binary file, or the folder holding them
        return _framework_rows(path, timed_records(path))
    try:
        check_regular(path)
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(
            f"cannot read the metrics file ({exc.strerror or exc})",
            where=str(path),
            fix="pass the run's metrics file (one JSON object per line, docs/execution.md)",
        ) from exc
    framework = timed_records(path)  # Megatron-LM's or TorchTitan's own log, as its lines time it
    if framework is not None:
        return _framework_rows(path, framework)
    rows: list[TimedLine] = []
    problems: list[str] = []
    for line_no, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            parsed = parse_metrics_record(line)
        except MetricsError as exc:
            problems.append(f"{path}:{line_no}: {exc}")
            continue
        if parsed.kind == "heldout":
            continue
        if parsed.time is None:
            problems.append(f"{path}:{line_no}: no 'time' (Unix seconds) on a step or event line")
            continue
        kind = "step" if parsed.kind == "loss" else parsed.kind
        rows.append(TimedLine(parsed.time, kind, parsed.step, parsed.tokens))
    if problems:
        more = f" (and {len(problems) - MAX_PROBLEMS} more)" if len(problems) > MAX_PROBLEMS else ""
        raise DataError(
            f"{len(problems)} metrics line(s) cannot be read: " + "; ".join(problems[:MAX_PROBLEMS]) + more,
            where=problems[0].split(": ")[0],
            fix='write each line as {"step": k, "loss": x, "time": unix_seconds} (checkpoint and resumed events '
            "with a time too)",
        )
    if not any(r.kind == "step" for r in rows):
        raise DataError(
            "the metrics file has no step line",
            where=str(path),
            fix='each training step appends {"step": k, "loss": x, "time": unix_seconds}',
        )
    return rows


def read_incidents(path: Path) -> pd.DataFrame:
    """time (UTC seconds), category, node of each incident; a bad row is named with its line (DataError)."""
    try:
        check_regular(path)
        frame = (
            pd.read_parquet(path)
            if path.suffix.lower() in (".parquet", ".pq")
            else pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
        )
    except Exception as exc:  # pandas and pyarrow raise many kinds for an unreadable file
        raise DataError(
            f"cannot read the incidents file: {exc}",
            where=str(path),
            fix="pass the incident log's incidents file: CSV with a header `time,category,node` or Parquet",
        ) from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in ("time", "category") if c not in frame.columns]
    if missing:
        raise DataError(
            f"the incidents file has no column {', '.join(missing)}",
            where=f"{path}:1",
            fix="give the header time,category (node and job_id optional; docs/failures.md)",
        )
    times = pd.to_datetime(frame["time"].astype(str).str.strip(), format="ISO8601", utc=True, errors="coerce")
    bad = [int(i) for i in frame.index[times.isna()]]
    if bad:
        raise DataError(
            f"{len(bad)} incident time(s) are not ISO 8601: line(s) {', '.join(str(i + 2) for i in bad[:10])}",
            where=f"{path}:{bad[0] + 2}",
            fix="write times as ISO 8601, e.g. 2026-11-03T14:05:00Z",
        )
    return pd.DataFrame(
        {
            "t": (times - pd.Timestamp(0, tz="UTC")).dt.total_seconds(),
            "category": frame["category"].astype(str).str.strip(),
            "node": frame["node"].astype(str).str.strip() if "node" in frame.columns else "",
        }
    ).sort_values("t", kind="stable")


def journal_from_metrics(rows: list[TimedLine], incidents: pd.DataFrame | None) -> tuple[Journal, int, int]:
    """The run as a journal (in memory), its last step and its tokens per step (0 when the lines give none)."""
    t0 = min(r.t for r in rows)
    journal = Journal(Path("."))
    nodes: list[str] = []

    def event(
        t: float, kind: str, attempt: int, scope: str = "", detail: str = "", **keys: Unpack[EventKeys]
    ) -> None:
        journal.events.append(
            JournalEvent(
                len(journal.events),
                t - t0,
                kind,
                "",
                scope,
                -1,
                0.0,
                detail,
                attempt,
                **keys,
                line_keys=tuple(keys),
            )
        )

    event(t0, "job_start", 0, detail="read from a metrics file", started_at=t0)
    attempt, last_step, starts, last_line = 0, 0, [t0], t0
    for r in rows:
        restart = r.kind == "resumed" or (r.kind == "step" and r.step <= last_step and last_step > 0)
        if restart:
            event(last_line, "failure", attempt, scope="job", step=last_step)
            event(r.t, "detected", attempt, scope="job")
            attempt += 1
            starts.append(r.t)
            event(r.t, "restart_start", attempt)
            last_step = r.step if r.kind == "resumed" else r.step - 1
        if r.kind == "step":
            journal.steps.append(JournalStep(r.t - t0, r.step, attempt))
            last_step = r.step
        elif r.kind == "checkpoint":
            event(r.t, "checkpoint_end", attempt, detail=f"step={r.step}", step=r.step)
        last_line = r.t
    starts.append(float("inf"))
    failures = [i for i, e in enumerate(journal.events) if e.kind == "failure"]
    detections = [i for i, e in enumerate(journal.events) if e.kind == "detected"]
    for at, seen in zip(failures, detections, strict=True):  # the category from the log, where it has one
        failure, a = journal.events[at], journal.events[at].attempt
        inside = (
            incidents[(incidents["t"] >= starts[a]) & (incidents["t"] <= starts[a + 1])]
            if incidents is not None
            else None
        )
        if inside is not None and len(inside):
            hit = inside.iloc[-1]
            name = str(hit["node"])
            if name and name not in nodes:
                nodes.append(name)
            failure = replace(
                failure,
                category=str(hit["category"]),
                node=nodes.index(name) if name else -1,
                detail=f"organic: incident log, node {name or 'not given'}",
            )
        else:
            failure = replace(
                failure, category=UNCLASSIFIED, detail="organic: a restart with no incident logged"
            )
        journal.events[at] = failure
        journal.events[seen] = replace(journal.events[seen], category=failure.category, node=failure.node)
    final = max(s.step for s in journal.steps)
    event(last_line, "job_complete", attempt=attempt)
    event(last_line, "window_end", attempt=attempt, detail="the metrics file ends")
    tokens = [r.tokens for r in rows if r.kind == "step" and r.tokens]
    return journal, final, int(statistics.median(tokens)) if tokens else 0


def external_report_inputs(metrics: Path, incidents: Path | None, gpu_hour_usd: float = 0.0) -> Any:
    """The report's inputs (campaign.analysis.report_inputs.ReportInputs) for a run read from its files: the same
    figures and keys as an executed window's, titled as measured, with no commitment, data or gates."""
    from campaign.analysis.analysis import (
        as_measured,
        measured_note,
        window_figures,
        with_band,
        with_recommendations,
    )
    from campaign.analysis.band import replica_band
    from campaign.analysis.report_inputs import ReportInputs
    from campaign.analysis.result import DataSection, WindowAnalysis, WindowSpan
    from campaign.execution.measured import measured_summary
    from campaign.sim.summary import RunSource

    rows = read_timed_metrics(metrics)
    journal, final, tokens = journal_from_metrics(rows, read_incidents(incidents) if incidents else None)
    ckpts = sorted({e.at_step for e in journal.kinds("checkpoint_end")})
    every = int(statistics.median(b - a for a, b in itertools.pairwise(ckpts))) if len(ckpts) > 1 else 0
    summary = measured_summary(journal, final, tokens, every, 0, gpu_hour_usd)
    source = RunSource(str(metrics), str(incidents) if incidents else None)
    summary = replace(summary, measured=replace(summary.measured_run(), source=source))
    events = journal.frame()
    figures = window_figures(summary, events, None, None)
    start = summary.measured_run().started_at or ""  # always set: the first line's time
    result = WindowAnalysis(
        figures=figures,
        commitment_id="external",
        replica=-1,
        seed=0,
        window=WindowSpan(start, _iso(rows, summary.window_s), summary.window_s / 3600.0),
        simulated=False,
        title="Measured run report",
        simulation_note=measured_note(summary),
        config_digest="",
        data_digest="",
        data=DataSection(mixture=[], rejections=[]),
        gates=[],
        plan_expected_ettr=None,
        plan_expected_ettr_basis=None,
    )
    result = with_band(as_measured(result, summary.measured_run()), replica_band(summary, events, None))
    result = with_recommendations(result)
    band = pd.DataFrame({"day": [], "min_mw": [], "mean_mw": [], "max_mw": []})
    return ReportInputs(
        result, events, band, None, "power is not metered on a measured run", None, summary, None
    )


def _iso(rows: list[TimedLine], window_s: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(min(r.t for r in rows) + window_s, UTC).isoformat(timespec="milliseconds")

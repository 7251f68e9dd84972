"""The incident log: jobs (the exposure) and incidents (what failed, when, in which job, on which node).

Two files, CSV or Parquet (docs/failures.md): jobs `job_id,start,end,gpus`, one row per job or job segment, and
incidents `time,job_id,category,node`. Every bad row is reported with its file and line (a CSV's header is line
1; a Parquet row is named by its row number) and the fix, all at once in one DataError (exit 2); none is
dropped. Times are ISO 8601; a time without an offset is read as UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from campaign.errors import DataError
from campaign.files import check_regular

JOB_COLUMNS = ("job_id", "start", "end", "gpus")
INCIDENT_COLUMNS = ("time", "job_id", "category", "node")
MAX_REPORTED = 20  # bad rows listed in one error; the rest are counted
MAX_GPUS = 10_000_000


@dataclass(frozen=True)
class IncidentLog:
    """A validated log. `jobs`: job_id, start_h, end_h, gpus, hours, line (one row per segment, sorted by job
    and start). `incidents`: time_h, job_id, category, node ("" when none), segment (row of `jobs`), line.
    Times are hours since `origin` (the first segment's start)."""

    jobs: pd.DataFrame
    incidents: pd.DataFrame
    origin: pd.Timestamp
    jobs_path: str
    incidents_path: str


def category_key(name: str) -> str:
    """The name a free-text category is matched by: lower case, runs of spaces, dashes and slashes as `_`."""
    return re.sub(r"[\s\-/+.]+", "_", name.strip().lower()).strip("_")


def _read_table(path: Path, columns: tuple[str, ...], what: str) -> tuple[pd.DataFrame, bool]:
    """The file's rows as strings (CSV) or as stored (Parquet), and whether it is Parquet."""
    try:
        check_regular(path)  # a FIFO or a device would block or never end: refused before it is opened
    except OSError as exc:
        problem = (
            "does not exist" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc.strerror})"
        )
        raise DataError(
            f"the {what} file {problem}",
            where=str(path),
            fix=f"pass the {what} log as a regular CSV or Parquet file (docs/failures.md)",
        ) from exc
    is_parquet = path.suffix.lower() in (".parquet", ".pq")
    try:
        if is_parquet:
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except Exception as exc:  # pandas and pyarrow raise many kinds for an unreadable file
        raise DataError(
            f"cannot read the {what} file: {exc}",
            where=str(path),
            fix="write it as a CSV with a header line, or as Parquet (docs/failures.md)",
        ) from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in columns if c not in frame.columns and not (c == "node" and what == "incidents")]
    if missing:
        raise DataError(
            f"the {what} file has no column {', '.join(missing)} (it has {', '.join(frame.columns) or 'none'})",
            where=f"{path}:1",
            fix=f"give the header {','.join(columns)}",
        )
    return frame, is_parquet


def _lines(n: int, is_parquet: bool) -> np.ndarray:
    """Where each row is for a person: the CSV line (header is line 1) or the Parquet row number."""
    return np.arange(n) + (0 if is_parquet else 2)


def _where(path: Path, line: int, is_parquet: bool) -> str:
    return f"{path}: row {line}" if is_parquet else f"{path}:{line}"


def _times(values: pd.Series) -> pd.Series:
    """ISO 8601 times as UTC timestamps (no offset: UTC); NaT where unparsable."""
    if pd.api.types.is_datetime64_any_dtype(values):
        out = pd.to_datetime(values)
        out = out.dt.tz_localize("UTC") if out.dt.tz is None else out.dt.tz_convert("UTC")
    else:
        text = values.astype(str).str.strip()
        out = pd.to_datetime(text, format="ISO8601", utc=True, errors="coerce")
    # One resolution for every column: pandas infers it per column, and a join needs them equal.
    return out.dt.as_unit("us")


def read_incident_log(jobs_path: str | Path, incidents_path: str | Path) -> IncidentLog:
    """Read and check both files; raise one DataError naming every bad row (file:line, what, the fix)."""
    jpath, ipath = Path(jobs_path), Path(incidents_path)
    jobs_raw, j_parquet = _read_table(jpath, JOB_COLUMNS, "jobs")
    inc_raw, i_parquet = _read_table(ipath, INCIDENT_COLUMNS, "incidents")
    problems: list[tuple[str, str]] = []  # (where, what and the fix)

    # --- jobs
    j_line = _lines(len(jobs_raw), j_parquet)
    job_id = jobs_raw["job_id"].astype(str).str.strip()
    start, end = _times(jobs_raw["start"]), _times(jobs_raw["end"])
    gpus = pd.to_numeric(jobs_raw["gpus"], errors="coerce")

    def bad_jobs(mask: np.ndarray, message: str) -> None:
        for line in j_line[mask]:
            problems.append((_where(jpath, int(line), j_parquet), message))

    bad_jobs((job_id == "").to_numpy(), "job_id is empty; give every job or segment its job's id")
    bad_jobs(start.isna().to_numpy(), "start is not an ISO 8601 time; write e.g. 2026-03-01T08:00:00Z")
    bad_jobs(end.isna().to_numpy(), "end is not an ISO 8601 time; write e.g. 2026-03-01T20:00:00Z")
    whole = gpus.notna() & (gpus == np.floor(gpus.fillna(0))) & (gpus >= 1) & (gpus <= MAX_GPUS)
    bad_jobs(
        (~whole).to_numpy(), f"gpus is not a whole number from 1 to {MAX_GPUS:,}; give the job's GPU count"
    )
    times_ok = start.notna() & end.notna()
    bad_jobs(
        (times_ok & (end <= start)).to_numpy(),
        "end is not after start; swap them, or drop a segment that held no time",
    )
    jobs = pd.DataFrame(
        {"job_id": job_id, "start": start, "end": end, "gpus": gpus, "line": j_line}
    ).sort_values(["job_id", "start"], kind="stable")
    ok = jobs["start"].notna() & jobs["end"].notna()
    same_job = jobs["job_id"].eq(jobs["job_id"].shift()) & ok & ok.shift(fill_value=False)
    overlap = same_job & (jobs["start"] < jobs["end"].shift())
    for line, prev in zip(jobs["line"][overlap], jobs["line"].shift()[overlap], strict=True):
        problems.append(
            (
                _where(jpath, int(line), j_parquet),
                f"this segment overlaps the same job's segment at line {int(prev)}, which would count its "
                "exposure twice; make the segments of one job disjoint",
            )
        )

    # --- incidents
    i_line = _lines(len(inc_raw), i_parquet)
    t = _times(inc_raw["time"])
    inc_job = inc_raw["job_id"].astype(str).str.strip()
    category = inc_raw["category"].astype(str).str.strip()
    node = (
        inc_raw["node"].fillna("").astype(str).str.strip()
        if "node" in inc_raw.columns
        else pd.Series("", index=inc_raw.index)
    )

    def bad_incidents(mask: np.ndarray, message: str) -> None:
        for line in i_line[mask]:
            problems.append((_where(ipath, int(line), i_parquet), message))

    bad_incidents(t.isna().to_numpy(), "time is not an ISO 8601 time; write e.g. 2026-03-01T09:30:00Z")
    bad_incidents((category == "").to_numpy(), "category is empty; name what failed, e.g. faulty_gpu")
    known = inc_job.isin(set(job_id))
    bad_incidents(
        (~known).to_numpy(), "job_id is not in the jobs file; add the job's segment there, or fix the id"
    )
    # The segment of each incident: the job's latest segment starting at or before it, if it has not ended.
    good_jobs = jobs[ok].reset_index(drop=True)
    probe = pd.DataFrame({"time": t, "job_id": inc_job, "row": np.arange(len(inc_raw))})
    probe = probe[t.notna().to_numpy() & known.to_numpy()].sort_values("time", kind="stable")
    segments = good_jobs.assign(segment=np.arange(len(good_jobs))).sort_values("start", kind="stable")
    matched = pd.merge_asof(
        probe,
        segments[["start", "end", "job_id", "segment"]],
        left_on="time",
        right_on="start",
        by="job_id",
        direction="backward",
    )
    inside = matched["segment"].notna() & (matched["time"] <= matched["end"])
    for row in matched.loc[~inside, "row"]:
        problems.append(
            (
                _where(ipath, int(i_line[row]), i_parquet),
                f"time {t.iloc[row].isoformat()} is outside every segment of job {inc_job.iloc[row]}; fix the "
                "time, or the job's start and end in the jobs file",
            )
        )

    if problems:
        problems.sort(key=lambda p: (p[0].split(":")[0], _line_of(p[0])))
        shown = "\n".join(f"  {where}: {what}" for where, what in problems[:MAX_REPORTED])
        more = len(problems) - MAX_REPORTED
        raise DataError(
            f"{len(problems)} bad row{'s' if len(problems) != 1 else ''} in the incident log:\n{shown}"
            + (f"\n  ... and {more} more" if more > 0 else ""),
            where=f"{jpath} / {ipath}",
            fix="correct the rows named above; nothing was fitted or written",
        )

    if good_jobs.empty:
        raise DataError(
            "the jobs file has no rows: there is no exposure to fit rates over",
            where=str(jpath),
            fix="list every job (or job segment) the incidents happened in, with its start, end and GPUs",
        )
    origin = good_jobs["start"].min()
    hour = pd.Timedelta(hours=1)
    out_jobs = pd.DataFrame(
        {
            "job_id": good_jobs["job_id"],
            "start_h": (good_jobs["start"] - origin) / hour,
            "end_h": (good_jobs["end"] - origin) / hour,
            "gpus": good_jobs["gpus"].astype(np.int64),
            "line": good_jobs["line"].astype(np.int64),
        }
    )
    out_jobs["hours"] = out_jobs["end_h"] - out_jobs["start_h"]
    matched = matched.sort_values("row")
    rows = matched["row"].to_numpy()
    incidents = pd.DataFrame(
        {
            "time_h": ((matched["time"] - origin) / hour).to_numpy(),
            "job_id": matched["job_id"].to_numpy(),
            "category": category.to_numpy()[rows],
            "node": node.to_numpy()[rows],
            "segment": matched["segment"].astype(np.int64).to_numpy(),
            "line": i_line[rows],
        }
    )
    return IncidentLog(out_jobs, incidents, origin, str(jpath), str(ipath))


def _line_of(where: str) -> int:
    tail = where.rsplit(":", 1)[-1].replace("row", "").strip()
    return int(tail) if tail.isdigit() else 0

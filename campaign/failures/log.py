"""The incident log: jobs (the exposure) and incidents (what failed, when, in which job, on which node).

Two files, CSV or Parquet (docs/failures.md): jobs `job_id,start,end,gpus` (or `nodes` with GPUs per node), one row
per job or job segment, and incidents `time,job_id,category,node`, their columns and delimiter read as
campaign.failures.tables reads them and their times as campaign.failures.times does. Every bad row is reported
with its file and line (a CSV's header is line 1; a Parquet row is named by its row number) and the fix, all at
once in one DataError (exit 2); none is dropped. A row repeated, or contradicting another, is a bad row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from campaign.errors import DataError
from campaign.failures.tables import RawTable, read_table
from campaign.failures.times import day_month_order, parse_times

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
    notes: tuple[str, ...] = ()  # what was read how: columns mapped, delimiter, time formats


def category_key(name: str) -> str:
    """The name a free-text category is matched by: lower case, runs of spaces, dashes and slashes as `_`."""
    return re.sub(r"[\s\-/+.]+", "_", name.strip().lower()).strip("_")


def read_tables(
    jobs_path: str | Path, incidents_path: str | Path, gpus_per_node: int | None = None
) -> tuple[RawTable, RawTable]:
    """Both files with canonical columns; a header problem in either is reported with both files' problems."""
    jpath, ipath = Path(jobs_path), Path(incidents_path)
    jobs, j_problem = read_table(jpath, "jobs", ("job_id", "start", "end"), ("gpus", "nodes"))
    incidents, i_problem = read_table(ipath, "incidents", INCIDENT_COLUMNS[:3], ("node",))
    problems = [p for p in (j_problem, i_problem) if p]
    if jobs is not None and "gpus" not in jobs.frame.columns:
        if "nodes" not in jobs.frame.columns:
            problems.insert(
                0,
                (
                    f"{jpath}:1",
                    f"the jobs file has no column gpus (nor nodes); give the header {','.join(JOB_COLUMNS)}",
                ),
            )
        elif gpus_per_node is None:
            problems.insert(
                0,
                (
                    f"{jpath}:1",
                    "the jobs file gives nodes, not gpus; pass --gpus-per-node to count each job's GPUs as nodes x "
                    "GPUs per node",
                ),
            )
    if len(problems) == 1:
        raise DataError(
            problems[0][1], where=problems[0][0], fix="correct the header; nothing was fitted or written"
        )
    if problems:
        raise DataError(
            "both files' headers are wrong:\n" + "\n".join(f"  {where}: {what}" for where, what in problems),
            fix="correct both headers; nothing was fitted or written",
        )
    assert jobs is not None and incidents is not None
    jobs.refuse_if_empty()
    incidents.refuse_if_empty()
    if "gpus" not in jobs.frame.columns and gpus_per_node is not None:
        nodes = pd.to_numeric(jobs.frame["nodes"], errors="coerce")
        jobs.frame["gpus"] = nodes * gpus_per_node
        jobs = replace(
            jobs, notes=(*jobs.notes, f"{jpath}: GPUs = nodes x {gpus_per_node} (--gpus-per-node)")
        )
    return jobs, incidents


def read_incident_log(
    jobs_path: str | Path, incidents_path: str | Path, gpus_per_node: int | None = None
) -> IncidentLog:
    """Read and check both files; raise one DataError naming every bad row (file:line, what, the fix)."""
    return incident_log_from_tables(*read_tables(jobs_path, incidents_path, gpus_per_node))


def incident_log_from_tables(
    jobs_table: RawTable, inc_table: RawTable, notes: tuple[str, ...] = ()
) -> IncidentLog:
    """Check both tables (canonical columns, as campaign.failures.tables reads them or a scheduler reader builds
    them) and build the log; raise one DataError naming every bad row."""
    jpath, ipath = jobs_table.path, inc_table.path
    jobs_raw, inc_raw = jobs_table.frame, inc_table.frame
    problems: list[tuple[str, str]] = []  # (where, what and the fix)
    read_notes = [*notes, *jobs_table.notes, *inc_table.notes]

    # --- jobs
    j_line = jobs_table.lines
    j_parquet = jobs_table.is_parquet
    job_id = _text(jobs_raw["job_id"])
    order = day_month_order([jobs_raw["start"], jobs_raw["end"], inc_raw["time"]])
    parsed_start = parse_times(jobs_raw["start"], "start", order)
    parsed_end = parse_times(jobs_raw["end"], "end", order)
    start, end = parsed_start.values, parsed_end.values
    gpus = pd.to_numeric(jobs_raw["gpus"], errors="coerce")
    for parsed in (parsed_start, parsed_end):
        problems += [(jobs_table.where(row), what) for row, what in parsed.problems]
        read_notes += [f"{jpath}: {n}" for n in parsed.notes]

    def bad_jobs(mask: np.ndarray, message: str) -> None:
        for line in j_line[mask]:
            problems.append((_where(jpath, int(line), j_parquet), message))

    bad_jobs((job_id == "").to_numpy(), "job_id is empty; give every job or segment its job's id")
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
    repeat = same_job & jobs["start"].eq(jobs["start"].shift()) & jobs["end"].eq(jobs["end"].shift())
    overlap = same_job & (jobs["start"] < jobs["end"].shift()) & ~repeat
    for line, prev in zip(jobs["line"][repeat], jobs["line"].shift()[repeat], strict=True):
        problems.append(
            (
                _where(jpath, int(line), j_parquet),
                f"this segment repeats line {int(prev)} (same job, start and end): one segment logged twice would "
                "count its exposure twice; remove the copy",
            )
        )
    for line, prev in zip(jobs["line"][overlap], jobs["line"].shift()[overlap], strict=True):
        problems.append(
            (
                _where(jpath, int(line), j_parquet),
                f"this segment overlaps the same job's segment at line {int(prev)}, which would count its "
                "exposure twice; make the segments of one job disjoint",
            )
        )

    # --- incidents
    i_line = inc_table.lines
    i_parquet = inc_table.is_parquet
    parsed_time = parse_times(inc_raw["time"], "time", order)
    t = parsed_time.values
    problems += [(inc_table.where(row), what) for row, what in parsed_time.problems]
    read_notes += [f"{ipath}: {n}" for n in parsed_time.notes]
    inc_job = _text(inc_raw["job_id"])
    category = _text(inc_raw["category"])
    node = _text(inc_raw["node"]) if "node" in inc_raw.columns else pd.Series("", index=inc_raw.index)

    def bad_incidents(mask: np.ndarray, message: str) -> None:
        for line in i_line[mask]:
            problems.append((_where(ipath, int(line), i_parquet), message))

    bad_incidents((inc_job == "").to_numpy(), "job_id is empty; name the job the incident hit")
    bad_incidents((category == "").to_numpy(), "category is empty; name what failed, e.g. faulty_gpu")
    same = pd.DataFrame({"t": t, "job": inc_job, "node": node, "category": category.map(category_key)})
    first_line = (
        pd.Series(i_line).groupby([same["t"], same["job"], same["node"]], dropna=False).transform("first")
    )
    first_category = same.groupby(["t", "job", "node"], dropna=False)["category"].transform("first")
    dup = (same["t"].notna() & (pd.Series(i_line) != first_line)).to_numpy()
    for row in np.flatnonzero(dup):
        same_cat = same["category"].iloc[row] == first_category.iloc[row]
        problems.append(
            (
                _where(ipath, int(i_line[row]), i_parquet),
                f"repeats line {int(first_line.iloc[row])} (same time, job and node)"
                + (
                    ": one incident logged twice would count twice; remove the copy"
                    if same_cat
                    else f" with another category ({category.iloc[row]!r}): the log contradicts itself; keep the "
                    "one that is right"
                ),
            )
        )
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
    return IncidentLog(out_jobs, incidents, origin, str(jpath), str(ipath), tuple(read_notes))


def _where(path: Path, line: int, is_parquet: bool) -> str:
    return f"{path}: row {line}" if is_parquet else f"{path}:{line}"


def _text(values: pd.Series) -> pd.Series:
    """A column as stripped strings, "" for a null."""
    return pd.Series(
        ["" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v).strip() for v in values],
        index=values.index,
        dtype=object,
    )


def _line_of(where: str) -> int:
    tail = where.rsplit(":", 1)[-1].replace("row", "").strip()
    return int(tail) if tail.isdigit() else 0

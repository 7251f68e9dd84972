"""Slurm's own accounting as an incident log: job segments from `sacct --parsable2 --duplicates` or the job
completion log (`JobCompType=jobcomp/filetxt`) are the exposure; each segment's end state, and the node events of
`sacctmgr show event --parsable2` (DOWN and DRAIN with their reasons), are the incidents.

How a segment's end becomes a category is a mapping (`DEFAULT_MAPPING`, shipped as configs/failures/slurm.yaml;
`--slurm-mapping FILE` takes an edited copy): NODE_FAIL and BOOT_FAIL are hardware (node scope); FAILED and
OUT_OF_MEMORY are software (job scope) unless a node event on one of the segment's nodes falls within
`match_window_s` of its end, whose reason then names the category; COMPLETED, TIMEOUT, CANCELLED (by a person),
PREEMPTED, REQUEUED (by a person) and DEADLINE are not failures. Requeued segments keep their job id, so they are
segments of one job. Slurm prints times in the cluster's local time without an offset: they are read as UTC, which
only the differences the fit uses depend on. docs/failures.md#slurm-accounting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from campaign.errors import DataError
from campaign.failures.log import IncidentLog, incident_log_from_tables
from campaign.failures.tables import RawTable
from campaign.files import check_regular, read_bounded

MAX_FILE_BYTES = 2 * 1024**3
MAX_HOSTS = 1_000_000

DEFAULT_MAPPING: dict[str, Any] = {
    "states": {
        "NODE_FAIL": "node_failure",
        "BOOT_FAIL": "node_failure",
        "FAILED": "software_bug",
        "OUT_OF_MEMORY": "software_bug",
        "COMPLETED": None,
        "TIMEOUT": None,
        "CANCELLED": None,
        "PREEMPTED": None,
        "REQUEUED": None,
        "DEADLINE": None,
        "RESIZING": None,
        "REVOKED": None,
    },
    "reasons": [
        {
            "category": "gpu_hbm3",
            "words": ["xid 48", "xid 63", "xid 64", "xid 94", "xid 95", "ecc", "hbm", "dbe"],
        },
        {"category": "faulty_gpu", "words": ["xid", "gpu", "fallen off the bus", "nvlink", "nvidia"]},
        {"category": "nic", "words": ["nic", "infiniband", "mlx", "link down", "ib port", "hca"]},
        {"category": "host_maintenance_unplanned", "words": ["maint", "reboot", "kernel", "firmware"]},
        {"category": "power_supply", "words": ["psu", "power"]},
        {"category": "ssd", "words": ["ssd", "nvme", "disk"]},
        {"category": "system_memory", "words": ["dimm", "memory"]},
        {"category": "cpu", "words": ["cpu", "mce"]},
    ],
    "default_reason": "node_failure",
    "scopes": {
        "node_failure": "node",
        "software_bug": "job",
        "faulty_gpu": "gpu",
        "gpu_hbm3": "gpu",
        "nic": "node",
        "host_maintenance_unplanned": "node",
        "power_supply": "node",
        "ssd": "node",
        "system_memory": "node",
        "cpu": "node",
    },
    "match_window_s": 600,
}


@dataclass(frozen=True)
class SlurmMapping:
    states: Mapping[str, str | None]
    reasons: tuple[tuple[str, tuple[str, ...]], ...]
    default_reason: str
    scopes: Mapping[str, str]
    match_window_s: float

    def reason_category(self, reason: str) -> str:
        text = reason.lower()
        return next((c for c, words in self.reasons if any(w in text for w in words)), self.default_reason)


def read_slurm_mapping(path: str | Path | None = None) -> SlurmMapping:
    """The mapping in `path` (the shape of configs/failures/slurm.yaml), or the default."""
    data: Any = DEFAULT_MAPPING
    where = "the default Slurm mapping"
    if path is not None:
        where = str(path)
        try:
            data = yaml.safe_load(read_bounded(path, 1 << 20))
        except (OSError, yaml.YAMLError) as exc:
            raise DataError(
                f"cannot read the Slurm mapping: {exc}",
                where=where,
                fix="give a copy of configs/failures/slurm.yaml",
            ) from exc
    try:
        states = {str(k).upper(): (None if v is None else str(v)) for k, v in data["states"].items()}
        reasons = tuple(
            (str(r["category"]), tuple(str(w).lower() for w in r["words"])) for r in data.get("reasons", [])
        )
        scopes = {str(k): str(v) for k, v in data.get("scopes", {}).items()}
        bad = {k: v for k, v in scopes.items() if v not in ("gpu", "node", "job")}
        if bad:
            raise ValueError(f"scopes {bad} are not gpu, node or job")
        return SlurmMapping(
            states, reasons, str(data["default_reason"]), scopes, float(data.get("match_window_s", 600))
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise DataError(
            f"the Slurm mapping is not in the shape of configs/failures/slurm.yaml ({exc})",
            where=where,
            fix="start from a copy of configs/failures/slurm.yaml: states, reasons, default_reason, scopes",
        ) from None


@dataclass(frozen=True)
class Segment:
    """One job segment: a job's run from start to end on its nodes, and the state it ended in."""

    job_id: str
    start: pd.Timestamp
    end: pd.Timestamp
    nodes: tuple[str, ...]
    gpus: int
    state: str
    line: int


@dataclass(frozen=True)
class NodeEvent:
    node: str
    start: pd.Timestamp
    state: str
    reason: str
    line: int


@dataclass(frozen=True)
class SlurmRecords:
    path: Path
    segments: list[Segment]
    notes: list[str] = field(default_factory=list)


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Slurm's compressed host list ("n[0-3,7],gpu01", "r[1-2]-n[01-02]") as names."""
    items, depth, current = [], 0, ""
    for ch in text.strip():
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    out: list[str] = []
    for item in filter(None, (i.strip() for i in items)):
        out += _expand_one(item)
        if len(out) > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS:,} hosts")
    return tuple(out)


def _expand_one(item: str) -> list[str]:
    if "[" not in item:
        return [item]
    head, _, rest = item.partition("[")
    inside, _, tail = rest.partition("]")
    names = []
    for part in inside.split(","):
        low, _, high = part.partition("-")
        if not high:
            names.append(low)
            continue
        width = len(low)
        if int(high) - int(low) > MAX_HOSTS:
            raise ValueError(f"the range {part} is too large")
        names += [str(i).zfill(width) for i in range(int(low), int(high) + 1)]
    return [f"{head}{n}{t}" for n in names for t in _expand_one(tail)]


def _time(text: str) -> pd.Timestamp | None:
    text = text.strip()
    if text in ("", "Unknown", "None", "N/A"):
        return None
    stamp = pd.Timestamp(text)
    return stamp.tz_localize("UTC") if stamp.tz is None else stamp.tz_convert("UTC")


def _gpus_from_tres(tres: str) -> int | None:
    total, found = 0, False
    for part in tres.split(","):
        key, _, value = part.partition("=")
        if key == "gres/gpu" or key.startswith("gres/gpu:"):
            if key == "gres/gpu":
                return int(float(value))
            total += int(float(value))
            found = True
    return total if found else None


def _read_text(path: Path, what: str) -> str:
    try:
        check_regular(path)
        return read_bounded(path, MAX_FILE_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        problem = "does not exist" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc})"
        raise DataError(
            f"the {what} {problem}", where=str(path), fix=f"give the {what} as a regular file"
        ) from None


SACCT_COLUMNS = ("JobID", "State", "Start", "End")
SACCT_FORMAT = "JobID,JobIDRaw,State,Start,End,NNodes,NodeList,AllocTRES,Reason,ExitCode"


def _segment(
    path: Path,
    line: int,
    fields: Mapping[str, str],
    gpus_per_node: int,
    problems: list[str],
    notes: list[str],
) -> Segment | None:
    job_id = fields["job"].strip()
    if not job_id or "." in job_id:
        return None  # a job step (123.batch, 123.0): its job's allocation is the segment
    state = (fields["state"].split() or [""])[0].upper().rstrip("+")
    start, end = _time(fields["start"]), _time(fields["end"])
    if start is None:
        return None  # never ran
    if end is None:
        notes.append(f"{path}:{line}: job {job_id} has no end (still running): left out")
        return None
    try:
        nodes = expand_hostlist(fields.get("nodes", "") or "")
    except ValueError as exc:
        problems.append(f"  {path}:{line}: the node list {fields.get('nodes')!r} cannot be read ({exc})")
        return None
    gpus = _gpus_from_tres(fields.get("tres", "") or "")
    if gpus is None:
        count = fields.get("node_count", "").strip()
        n = int(count) if count.isdigit() else len(nodes)
        if n < 1:
            problems.append(f"  {path}:{line}: job {job_id} names no nodes and no node count")
            return None
        gpus = n * gpus_per_node
    return Segment(job_id, start, end, nodes, gpus, state, line)


def read_sacct(path: str | Path, gpus_per_node: int) -> SlurmRecords:
    """`sacct --parsable2 --duplicates --allocations --format=...` output: a header naming the columns, then one
    `|`-separated line per job segment (job steps, lines with a `.` in JobID, are skipped)."""
    path = Path(path)
    lines = _read_text(path, "sacct output").splitlines()
    if not lines or "|" not in lines[0]:
        raise DataError(
            "the first line is not sacct's header (column names separated by |)",
            where=f"{path}:1",
            fix=f"export with: sacct --parsable2 --duplicates --allocations --format={SACCT_FORMAT} ...",
        )
    header = [h.strip() for h in lines[0].split("|")]
    keys = {h.lower(): i for i, h in enumerate(header)}
    missing = [c for c in SACCT_COLUMNS if c.lower() not in keys]
    if missing:
        raise DataError(
            f"the sacct output has no column {', '.join(missing)} (it has {', '.join(header)})",
            where=f"{path}:1",
            fix=f"export with --format={SACCT_FORMAT}",
        )

    def column(row: list[str], name: str) -> str:
        i = keys.get(name.lower())
        return row[i] if i is not None and i < len(row) else ""

    segments: list[Segment] = []
    problems: list[str] = []
    notes: list[str] = []
    for number, text in enumerate(lines[1:], start=2):
        if not text.strip():
            continue
        row = text.split("|")
        if len(row) not in (len(header), len(header) + 1):  # --parsable (not 2) ends each line with a |
            problems.append(f"  {path}:{number}: {len(row)} fields where the header has {len(header)}")
            continue
        fields = {
            "job": column(row, "JobID"),
            "state": column(row, "State"),
            "start": column(row, "Start"),
            "end": column(row, "End"),
            "nodes": column(row, "NodeList"),
            "node_count": column(row, "NNodes") or column(row, "AllocNodes"),
            "tres": column(row, "AllocTRES"),
        }
        try:
            segment = _segment(path, number, fields, gpus_per_node, problems, notes)
        except ValueError as exc:
            problems.append(f"  {path}:{number}: {exc}")
            continue
        if segment is not None:
            segments.append(segment)
    _raise(problems, path)
    return SlurmRecords(path, segments, notes)


def read_jobcomp(path: str | Path, gpus_per_node: int) -> SlurmRecords:
    """The job completion log (`JobCompType=jobcomp/filetxt`): one line of `Key=Value` pairs per job segment."""
    path = Path(path)
    segments: list[Segment] = []
    problems: list[str] = []
    notes: list[str] = []
    for number, text in enumerate(_read_text(path, "job completion log").splitlines(), start=1):
        if not text.strip():
            continue
        pairs = _key_values(text)
        if "JobId" not in pairs or "JobState" not in pairs:
            problems.append(f"  {path}:{number}: not a jobcomp/filetxt line (no JobId= and JobState=)")
            continue
        fields = {
            "job": pairs["JobId"],
            "state": pairs["JobState"],
            "start": pairs.get("StartTime", ""),
            "end": pairs.get("EndTime", ""),
            "nodes": pairs.get("NodeList", ""),
            "node_count": pairs.get("NodeCnt", ""),
            "tres": pairs.get("Tres", ""),
        }
        try:
            segment = _segment(path, number, fields, gpus_per_node, problems, notes)
        except ValueError as exc:
            problems.append(f"  {path}:{number}: {exc}")
            continue
        if segment is not None:
            segments.append(segment)
    _raise(problems, path)
    return SlurmRecords(path, segments, notes)


def _key_values(text: str) -> dict[str, str]:
    """`JobId=3 UserId=root(0) Name=a b ...`: a value runs to the next ` Key=` (a word of letters and an =)."""
    out: dict[str, str] = {}
    key, value = None, ""
    for token in text.split(" "):
        name, eq, rest = token.partition("=")
        if eq and name.isalpha() and name[:1].isupper():
            if key is not None:
                out[key] = value
            key, value = name, rest
        elif key is not None:
            value += " " + token
    if key is not None:
        out[key] = value
    return out


def read_events(path: str | Path) -> list[NodeEvent]:
    """`sacctmgr show event --parsable2 format=NodeName,Start,End,State,Reason,User ...`: node DOWN and DRAIN events
    with their reasons (cluster events, with no node, are skipped)."""
    path = Path(path)
    lines = _read_text(path, "node events").splitlines()
    header = [h.strip().lower() for h in (lines[0].split("|") if lines else [])]
    need = ("nodename", "start", "state", "reason")
    if [c for c in need if c not in header]:
        raise DataError(
            f"the node events have no column {', '.join(c for c in need if c not in header)} (header: "
            f"{lines[0] if lines else 'none'})",
            where=f"{path}:1",
            fix="export with: sacctmgr show event event=node format=NodeName,Start,End,State,Reason,User --parsable2",
        )
    index = {h: i for i, h in enumerate(header)}
    events, problems = [], []
    for number, text in enumerate(lines[1:], start=2):
        row = text.split("|")
        if not text.strip():
            continue
        if len(row) not in (len(header), len(header) + 1):
            problems.append(f"  {path}:{number}: {len(row)} fields where the header has {len(header)}")
            continue
        nodes, state = row[index["nodename"]].strip(), row[index["state"]].upper()
        if not nodes or not any(s in state for s in ("DOWN", "DRAIN", "FAIL")):
            continue
        try:
            start = _time(row[index["start"]])
            names = expand_hostlist(nodes)
        except ValueError as exc:
            problems.append(f"  {path}:{number}: {exc}")
            continue
        if start is None:
            problems.append(f"  {path}:{number}: the event has no start time")
            continue
        events += [NodeEvent(n, start, state, row[index["reason"]].strip(), number) for n in names]
    _raise(problems, path)
    return events


def _raise(problems: list[str], path: Path) -> None:
    if problems:
        shown = "\n".join(problems[:20]) + (
            f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        )
        raise DataError(
            f"{len(problems)} bad line{'s' if len(problems) != 1 else ''}:\n{shown}",
            where=str(path),
            fix="give the file as Slurm wrote it (docs/failures.md#slurm-accounting); nothing was fitted or written",
        )


def slurm_incident_log(
    records: SlurmRecords, events: list[NodeEvent], mapping: SlurmMapping, events_path: str | None = None
) -> IncidentLog:
    """Segments as the exposure and their ends (with the node events) as incidents, as an IncidentLog."""
    path = records.path
    notes = list(records.notes)
    window = pd.Timedelta(seconds=mapping.match_window_s)
    by_node: dict[str, list[NodeEvent]] = {}
    for e in events:
        by_node.setdefault(e.node, []).append(e)
    jobs_rows, incident_rows, unknown = [], [], set()
    used_events: set[int] = set()
    for seg in records.segments:
        category = mapping.states.get(seg.state, "?")
        if category == "?":
            unknown.add(seg.state)
            category = None
        end = seg.end
        if end <= seg.start:
            if category is None and seg.state != "FAILED":
                continue  # no time held and nothing failed: no exposure, no incident
            end = seg.start + pd.Timedelta(seconds=1)  # Slurm's resolution
            notes.append(
                f"{path}:{seg.line}: job {seg.job_id}'s segment ended the second it started: counted as 1 s"
            )
        jobs_rows.append((seg.job_id, seg.start, end, seg.gpus, seg.line))
        if category is None:
            continue
        node = seg.nodes[0] if len(seg.nodes) == 1 else ""
        matched = [
            e
            for n in seg.nodes
            for e in by_node.get(n, [])
            if seg.start - window <= e.start <= seg.end + window
        ]
        if matched:
            cause = min(matched, key=lambda e: abs((e.start - seg.end).total_seconds()))
            used_events.add(id(cause))
            category, node = mapping.reason_category(cause.reason), cause.node
        incident_rows.append((end, seg.job_id, category, node, seg.line))
    if unknown:
        notes.append(
            f"{path}: end states not in the mapping, taken as no failure: {', '.join(sorted(unknown))} (add them "
            "to a copy of configs/failures/slurm.yaml and pass it with --slurm-mapping)"
        )
    if events:
        notes.append(
            f"{events_path}: {len(used_events)} of {len(events)} node events matched a job segment's end; the others "
            "hit no job"
        )
    jobs = pd.DataFrame(jobs_rows, columns=["job_id", "start", "end", "gpus", "line"])
    incidents = pd.DataFrame(incident_rows, columns=["time", "job_id", "category", "node", "line"])
    for frame, columns in ((jobs, ("start", "end")), (incidents, ("time",))):
        for c in columns:
            frame[c] = pd.to_datetime(frame[c], utc=True)
    jobs_table = RawTable(path, "jobs", jobs.drop(columns="line"), jobs["line"].to_numpy(np.int64), False)
    incident_table = RawTable(
        path, "incidents", incidents.drop(columns="line"), incidents["line"].to_numpy(np.int64), False
    )
    jobs_table.refuse_if_empty()
    return incident_log_from_tables(jobs_table, incident_table, tuple(notes))

"""Reading a jobs or incidents file as a team has it: CSV with its delimiter detected (comma, semicolon, tab, pipe)
or Parquet, column names matched by their common spellings (any case; `JobID`, `job_id`, `Start`, `StartTime`,
`nodes` ...), every row's line kept for errors, and what was mapped said in words. A row with more or fewer
fields than the header is named as such, never read as shifted columns.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from campaign.errors import DataError
from campaign.files import check_regular

MAX_TABLE_BYTES = 2 * 1024**3  # an incident log is megabytes; anything this large is not one
DELIMITERS = ",;\t|"
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}

# The canonical column and the spellings taken for it, compared after `column_key` (lower case, no separators).
ALIASES: dict[str, tuple[str, ...]] = {
    "job_id": ("jobid", "job", "jobidraw", "id", "jobname_id", "slurm_job_id"),
    "start": ("start", "starttime", "start_time", "begin", "started", "start_at", "starttimestamp"),
    "end": ("end", "endtime", "end_time", "finish", "finished", "stop", "end_at", "endtimestamp"),
    "gpus": ("gpus", "ngpus", "numgpus", "gpucount", "gpu_count", "allocgpus", "n_gpus"),
    "nodes": ("nodes", "nnodes", "numnodes", "nodecount", "nodecnt", "n_nodes", "allocnodes"),
    "time": ("time", "timestamp", "datetime", "date", "eventtime", "event_time", "occurred", "when", "at"),
    "category": ("category", "cause", "rootcause", "root_cause", "reason", "type", "failure", "failuretype"),
    "node": ("node", "host", "hostname", "nodename", "node_name", "server"),
}


def column_key(name: str) -> str:
    return "".join(ch for ch in name.strip().lower() if ch.isalnum())


@dataclass(frozen=True)
class RawTable:
    """A file's rows with canonical column names: strings for CSV, stored values for Parquet."""

    path: Path
    what: str  # "jobs" or "incidents"
    frame: pd.DataFrame
    lines: np.ndarray  # per row, its line in the CSV (header: 1) or its Parquet row number
    is_parquet: bool
    notes: tuple[str, ...] = field(default_factory=tuple)

    def refuse_if_empty(self) -> None:
        if self.frame.empty:
            raise DataError(
                f"the {self.what} file has a header and no rows: there is nothing to fit",
                where=str(self.path),
                fix=f"give the {self.what} log with its rows (docs/failures.md); nothing was fitted or written",
            )

    def where(self, row: int) -> str:
        line = int(self.lines[row])
        return f"{self.path}: row {line}" if self.is_parquet else f"{self.path}:{line}"


def _refuse_unreadable(path: Path, what: str) -> None:
    try:
        st = check_regular(path)  # a FIFO or a device would block or never end: refused before it is opened
    except OSError as exc:
        problem = (
            "does not exist"
            if isinstance(exc, FileNotFoundError)
            else f"cannot be read ({exc.strerror or exc})"
        )
        raise DataError(
            f"the {what} file {problem}",
            where=str(path),
            fix=f"pass the {what} log as a regular CSV or Parquet file (docs/failures.md)",
        ) from exc
    if st.st_size > MAX_TABLE_BYTES:
        raise DataError(
            f"the {what} file is {st.st_size:,} bytes, more than an incident log holds",
            where=str(path),
            fix="give the jobs and incidents as CSV or Parquet (docs/failures.md)",
        )


def _sniff(path: Path, head: str) -> str:
    first = head.splitlines()[0] if head else ""
    counts = {d: first.count(d) for d in DELIMITERS}
    best = max(counts.values())
    chosen = [d for d, n in counts.items() if n == best]
    if best == 0:
        return ","
    if len(chosen) > 1:
        try:
            return csv.Sniffer().sniff(head, delimiters=DELIMITERS).delimiter
        except csv.Error:
            raise DataError(
                f"cannot tell the delimiter of the header: it has as many of {' and '.join(map(repr, chosen))}",
                where=f"{path}:1",
                fix="separate the columns with commas",
            ) from None
    return chosen[0]


def _read_csv(path: Path, what: str) -> tuple[list[str], list[list[str]], list[int], str]:
    with path.open(encoding="utf-8-sig", errors="replace", newline="") as handle:
        text = handle.read()
    delimiter = _sniff(path, text[:65536])
    reader = csv.reader(text.splitlines(keepends=True), delimiter=delimiter, skipinitialspace=True)
    header: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    too_many: list[str] = []
    for row in reader:
        if not any(v.strip() for v in row):
            continue
        if header is None:
            header = [h.strip() for h in row]
            continue
        if len(row) != len(header):
            kind = "more" if len(row) > len(header) else "fewer"
            too_many.append(
                f"  {path}:{reader.line_num}: {len(row)} fields, {kind} than the header's {len(header)}"
                + (
                    f" (is a value holding a {DELIMITER_NAMES[delimiter]}? quote it)"
                    if kind == "more"
                    else ""
                )
            )
            continue
        rows.append(row)
        lines.append(reader.line_num)
    if header is None:
        raise DataError(
            f"the {what} file is empty: no header and no rows",
            where=str(path),
            fix=f"write the {what} log with a header line (docs/failures.md)",
        )
    if too_many:
        shown = "\n".join(too_many[:20]) + (
            f"\n  ... and {len(too_many) - 20} more" if len(too_many) > 20 else ""
        )
        raise DataError(
            f"{len(too_many)} row{'s' if len(too_many) != 1 else ''} of the {what} file do not have the header's "
            f"{len(header)} fields ({DELIMITER_NAMES[delimiter]}-separated):\n{shown}",
            where=str(path),
            fix="give every row one value per column; nothing was fitted or written",
        )
    return header, rows, lines, delimiter


def _map_columns(
    header: list[str], columns: tuple[str, ...], optional: tuple[str, ...]
) -> tuple[dict[str, str], list[str], list[str]]:
    """(canonical -> the header's name, the canonical names missing, what was mapped in words)."""
    keys = {column_key(h): h for h in header}
    mapping: dict[str, str] = {}
    for canonical in (*columns, *optional):
        for spelling in (canonical, *ALIASES.get(canonical, ())):
            name = keys.get(column_key(spelling))
            if name is not None and name not in mapping.values():
                mapping[canonical] = name
                break
    missing = [c for c in columns if c not in mapping]
    mapped = [f"{h} as {c}" for c, h in mapping.items() if h != c]
    return mapping, missing, mapped


def read_table(
    path: Path, what: str, columns: tuple[str, ...], optional: tuple[str, ...] = ()
) -> tuple[RawTable | None, tuple[str, str] | None]:
    """The table with canonical columns, or (None, the header problem) so both files' header problems can be
    reported at once. Raises DataError for a file that cannot be read at all."""
    _refuse_unreadable(path, what)
    is_parquet = path.suffix.lower() in (".parquet", ".pq")
    notes: list[str] = []
    if is_parquet:
        try:
            frame = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises many kinds for an unreadable file
            raise DataError(
                f"cannot read the {what} file as Parquet: {exc}",
                where=str(path),
                fix="write it as a CSV with a header line, or as Parquet (docs/failures.md)",
            ) from exc
        header = [str(c).strip() for c in frame.columns]
        frame.columns = header
        lines = np.arange(len(frame))  # Parquet rows are named from 0, as pandas and pyarrow number them
    else:
        header, rows, line_list, delimiter = _read_csv(path, what)
        frame = pd.DataFrame(rows, columns=header, dtype=object) if rows else pd.DataFrame(columns=header)
        lines = np.array(line_list, dtype=np.int64)
        if delimiter != ",":
            notes.append(f"{path}: read as {DELIMITER_NAMES[delimiter]}-separated (detected from the header)")
    mapping, missing, mapped = _map_columns(header, columns, optional)
    if missing:
        wanted = ",".join((*columns, *optional[:1]))
        return None, (
            f"{path}:1",
            f"the {what} file has no column {', '.join(missing)} (it has {', '.join(header) or 'none'}); give the "
            f"header {wanted}",
        )
    if mapped:
        notes.append(f"{path}: took the column {', '.join(mapped)}")
    out = pd.DataFrame({c: frame[h].to_numpy() for c, h in mapping.items()})
    return RawTable(path, what, out, lines, is_parquet, tuple(notes)), None

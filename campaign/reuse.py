"""What a command may reuse instead of doing again: a gate's recorded result, a report already drawn.

A result is reused only when every input it was computed from is proven unchanged, by digest, never by a clock:

- **a gate** (`reusable_gates`): the newest validate run recorded for exactly the current config digest and data
  digest (`campaign.evidence`: the prepared data, every file a gate read, the trainer's files) passed it, under
  this code version (`code_version`), and the files it wrote are still there. The data_identity gate is never
  reused: reading the evidence is how the data digest is known, so it is judged afresh each time, and when it
  finds a problem nothing is reused. A gate that failed runs again; `--rerun` forces any gate.
- **a report** (`report_inputs_digest`): the catalog rows it reads, the data files and rehearsal result it reads,
  the executed config's digest and the code version hash to the digest recorded beside the report.

The code version (`code_version`) is a digest of campaign's own code and templates, and of the versions of the
interpreter and of the libraries a gate's verdict depends on: editing the code, or upgrading Great Expectations or
PyTorch, makes every gate run again.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from campaign.gates import GateResult
    from campaign.store import GateRecord, Workspace

# The packages whose files make up campaign's code: what a gate's verdict and a report are computed by.
CODE_PACKAGES = ("campaign", "data_checks", "tasks", "flows")
CODE_SUFFIXES = frozenset({".py", ".sql", ".j2", ".css", ".json", ".yaml"})
# Libraries a verdict depends on beyond campaign's own code (a missing one counts as "absent").
VERDICT_LIBRARIES = (
    "great_expectations",
    "torch",
    "numpy",
    "pandas",
    "pyarrow",
    "duckdb",
    "numba",
    "tiktoken",
    "tokenizers",
)
# A gate's recorded details carry these keys: the code version it ran under, and when it was reused, the run that
# computed it (so a result reused twice still names the run that judged it).
CODE_VERSION_KEY = "code_version"
REUSED_KEY = "reused_from"
# Gates judged together by one task: reused together or run together.
GATE_GROUPS: tuple[tuple[str, ...], ...] = (
    ("data_quality",),
    ("data_volume", "data_mixture"),
    ("layout", "memory", "schedule"),
    ("rehearsal",),
)
NEVER_REUSED = ("data_identity",)
# Files (relative to the workspace) a gate's details name as written by it: reused only while they exist.
WRITTEN_FILE_KEYS = ("checks_file", "offline_page", "result_file")


@functools.cache
def code_version() -> str:
    """sha256 of campaign's code (every source, SQL and template file of CODE_PACKAGES, by path and bytes), the
    interpreter's version and VERDICT_LIBRARIES' versions. Computed once per process (~10 ms)."""
    digest = hashlib.sha256(b"campaign-code/1\n")
    for package in CODE_PACKAGES:
        spec = importlib.util.find_spec(package)
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
        for root in roots:
            base = Path(root)
            for path in sorted(base.rglob("*")):
                if path.suffix not in CODE_SUFFIXES or "__pycache__" in path.parts or not path.is_file():
                    continue
                digest.update(f"{package}/{path.relative_to(base).as_posix()}\n".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update(f"python {platform.python_version()}\n".encode())
    for name in VERDICT_LIBRARIES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name} {version}\n".encode())
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------------------ gates


@dataclass(frozen=True)
class ReusedGate:
    """A gate's recorded result, reused: what it said, and which validate run judged it and when."""

    gate: str
    passed: bool
    summary: str
    details: dict[str, Any]  # as recorded, with REUSED_KEY naming the run that judged it
    recorded_at: datetime

    def as_gate_result(self) -> GateResult:
        from campaign.gates import GateResult  # reads data (pyarrow): not for a report

        return GateResult(self.gate, self.passed, self.summary, dict(self.details))

    def to_json(self) -> dict[str, Any]:
        return {
            "gate": self.gate,
            "passed": self.passed,
            "summary": self.summary,
            "recorded_at": self.recorded_at.isoformat(),
        }


def how_judged(details: Mapping[str, Any]) -> str:
    """A gate row's "how" column: `run`, or `reused (recorded <UTC time>)`."""
    reused = details.get(REUSED_KEY)
    if not isinstance(reused, dict) or not reused.get("checked_at"):
        return "run"
    return f"reused (recorded {str(reused['checked_at'])[:19].replace('T', ' ')} UTC)"


def rerun_gates(names: Iterable[str] | None, known: Iterable[str]) -> frozenset[str]:
    """The gates `--rerun` forces: every one when it names none, else the named ones (each checked against
    `known`; ValueError naming the unknown one)."""
    known = tuple(known)
    names = [n.strip() for n in names or [] if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"no gate named {', '.join(unknown)}; the gates are {', '.join(known)}")
    return frozenset(names or known)


def reusable_gates(
    recorded: Mapping[str, GateRecord],
    workspace: Path,
    code: str,
    rerun: Iterable[str] = (),
    evidence_problems: Iterable[str] = (),
) -> dict[str, ReusedGate]:
    """The gates whose recorded result stands: `recorded` is the newest validate run for exactly the current config
    and data digests (`store.latest_gates`), so the digests already match; here the code version, the verdict
    (passed), the files each wrote and `--rerun` (`rerun`) are checked, a group (GATE_GROUPS) all or nothing.
    Nothing is reused when the evidence has a problem."""
    if list(evidence_problems):
        return {}
    forced = set(rerun)
    out: dict[str, ReusedGate] = {}
    for group in GATE_GROUPS:
        found = [_reusable(recorded.get(gate), workspace, code) for gate in group]
        if any(gate in forced for gate in group) or any(r is None for r in found):
            continue
        out.update({r.gate: r for r in found if r is not None})
    return out


def _reusable(record: GateRecord | None, workspace: Path, code: str) -> ReusedGate | None:
    if record is None or not record.passed or record.gate in NEVER_REUSED:
        return None
    details = dict(record.details)
    if details.get(CODE_VERSION_KEY) != code:
        return None
    for key in WRITTEN_FILE_KEYS:
        written = details.get(key)
        if isinstance(written, str) and not (workspace / written).is_file():
            return None
    first = details.get(REUSED_KEY)
    if not (isinstance(first, dict) and first.get("run_id") and first.get("checked_at")):
        first = {"run_id": record.run_id, "checked_at": record.checked_at.isoformat()}
    summary = str(details.pop("summary", ""))
    details[REUSED_KEY] = first
    recorded_at = datetime.fromisoformat(str(first["checked_at"]))
    return ReusedGate(record.gate, True, summary, details, recorded_at)


# ------------------------------------------------------------------------------------------------------ reports

# Catalog tables a report does not read: the stages' own bookkeeping (analyse adds a `runs` row each time).
NOT_REPORT_INPUTS = frozenset({"runs"})
REPORT_INPUTS_NAME = "report-inputs.json"  # beside report.html: the digest its inputs had when it was drawn


def report_inputs_digest(ws: Workspace, extra_files: Iterable[Path] = ()) -> str:
    """sha256 of everything the window report is drawn from: every catalog row (but NOT_REPORT_INPUTS), each file
    of the data folder by name, size and modification time, the rehearsal's result.json, `extra_files` by bytes,
    and the code version. Reads the catalog read-only."""
    from campaign.store import catalog

    digest = hashlib.sha256(f"campaign-report-inputs/1\n{code_version()}\n".encode())
    with catalog(ws, read_only=True) as con:
        tables = [
            str(name)
            for (name,) in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY table_name"
            ).fetchall()
        ]
        for table in tables:
            if table in NOT_REPORT_INPUTS:
                continue
            (rows_md5,) = con.execute(
                f"SELECT md5(coalesce(string_agg(CAST(t AS VARCHAR), chr(10) ORDER BY CAST(t AS VARCHAR)), '')) "
                f'FROM "{table}" t'
            ).fetchone() or ("",)
            digest.update(f"table {table} {rows_md5}\n".encode())
    data_dir = ws.data_dir
    if data_dir.is_dir():
        for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
            stat = path.stat()
            digest.update(f"data {path.relative_to(data_dir)} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    for path in [ws.root / "rehearsal" / "result.json", *extra_files]:
        digest.update(f"file {path.name} ".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest() if path.is_file() else b"absent")
        digest.update(b"\n")
    return digest.hexdigest()


def drawn_report(report_dir: Path, inputs_digest: str, outputs: Iterable[str]) -> dict[str, Any] | None:
    """The analysis.json of the report in `report_dir` when it was drawn from inputs with this digest and every
    one of `outputs` (file names in `report_dir`) is still there; else None (the report is drawn again)."""
    try:
        recorded = json.loads((report_dir / REPORT_INPUTS_NAME).read_text(encoding="utf-8"))
        result = json.loads((report_dir / "analysis.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get("inputs_digest") != inputs_digest:
        return None
    if not isinstance(result, dict) or not all((report_dir / name).is_file() for name in outputs):
        return None
    return result


def record_drawn(report_dir: Path, inputs_digest: str) -> None:
    """Note beside a report the digest of the inputs it was just drawn from (after the report itself is written)."""
    from campaign.files import atomic_write_json

    atomic_write_json(
        report_dir / REPORT_INPUTS_NAME, {"inputs_digest": inputs_digest, "code_version": code_version()}
    )


def with_code_version(result: GateResult, code: str) -> GateResult:
    """`result` with the code version it was judged under in its details (what `reusable_gates` checks)."""
    return replace(result, details={**result.details, CODE_VERSION_KEY: code})

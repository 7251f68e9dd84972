"""The workspace of one campaign: its folders, its DuckDB catalog and the lock that keeps writers apart.

Result rows of a stage are written in one DuckDB transaction and keyed by what produced them (gate, config
digest, data digest; commitment and replica), so a run killed at any moment and started again ends with the
same rows and no duplicates. Only one process works on a workspace at a time; the next one waits briefly,
then stops with a message naming the holder.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
from filelock import FileLock, Timeout

from campaign.errors import ConfigError, DataError, Refused, WorkspaceBusy
from campaign.files import atomic_write_json

if TYPE_CHECKING:  # pandas costs ~1 s to import: a refusal that needs none answers without it
    import pandas as pd

log = logging.getLogger(__name__)

DEFAULT_ROOT = Path("workspace")
DEFAULT_LOCK_WAIT_S = 10.0
WORKSPACE_MARKER = ".campaign-workspace"
SCHEMA_VERSION = 2


def lock_wait_s() -> float:
    """Seconds a second process waits for the workspace lock: CAMPAIGN_LOCK_WAIT_S, default 10."""
    raw = os.environ.get("CAMPAIGN_LOCK_WAIT_S")
    if raw is None or raw.strip() == "":
        return DEFAULT_LOCK_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 86_400:  # NaN fails this too
        raise ConfigError(
            f"CAMPAIGN_LOCK_WAIT_S={raw!r} is not a number of seconds from 0 to 86400",
            where="environment variable CAMPAIGN_LOCK_WAIT_S",
            fix="set it to e.g. 10, or unset it",
        )
    return value


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def catalog_path(self) -> Path:
        return self.root / "campaign.duckdb"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def checks_dir(self) -> Path:
        return self.root / "checks"

    @property
    def sim_dir(self) -> Path:
        return self.root / "sim"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"


def workspace_for(campaign_name: str, override: str | Path | None = None) -> Workspace:
    """`--workspace DIR` if given, else workspace/<campaign name> under the current directory (nothing created)."""
    root = Path(override) if override else DEFAULT_ROOT / campaign_name
    return Workspace(root.resolve())


def is_workspace(ws: Workspace) -> bool:
    """A folder campaign made: it has the marker (or, from before the marker, a catalog)."""
    return (ws.root / WORKSPACE_MARKER).is_file() or ws.catalog_path.is_file()


def adopt_workspace(ws: Workspace, campaign_name: str) -> Workspace:
    """Make `ws` this campaign's workspace: create it if missing or empty; accept an existing workspace; refuse a
    folder that holds anything else, so campaign never writes into (or cleans up) a folder it does not own."""
    root = ws.root
    if root.exists() and not root.is_dir():
        raise ConfigError(
            f"{root} is a file, not a folder",
            where="--workspace",
            fix="pass a new folder, or an existing campaign workspace",
        )
    if not is_workspace(ws):
        if root.exists() and any(root.iterdir()):
            raise ConfigError(
                f"{root} is not empty and is not a campaign workspace (no {WORKSPACE_MARKER}); campaign will not "
                "write into a folder it does not own",
                where="--workspace",
                fix="pass a new or empty folder with --workspace (or the folder of an earlier campaign run)",
            )
        root.mkdir(parents=True, exist_ok=True)
    if not (root / WORKSPACE_MARKER).is_file():
        atomic_write_json(
            root / WORKSPACE_MARKER,
            {
                "campaign": campaign_name,
                "created_at": now().isoformat(),
                "note": "campaign's own folder; see README 'The workspace'",
            },
        )
    return ws


def require_workspace(ws: Workspace, command: str) -> Workspace:
    """The workspace of an earlier prepare, or refuse without creating anything."""
    if not is_workspace(ws):
        raise Refused(
            f"no campaign workspace here ({command} needs the data of an earlier prepare)",
            where=str(ws.root),
            fix="run `campaign prepare CONFIG` (with the same --workspace) first",
        )
    return ws


# ------------------------------------------------------------------------------------------------ locking

_held: dict[Path, tuple[FileLock, int]] = {}
_held_guard = threading.RLock()


@contextmanager
def locked(ws: Workspace, command: str, wait_s: float | None = None) -> Iterator[None]:
    """Hold the workspace lock for this process (re-entrant: a lifecycle flow and its stages share it).

    The workspace must exist (`adopt_workspace` or `require_workspace` first): a lock creates no folder."""
    if not ws.root.is_dir():
        raise Refused(
            "no campaign workspace here",
            where=str(ws.root),
            fix="run `campaign prepare CONFIG` (with the same --workspace) first",
        )
    wait = lock_wait_s() if wait_s is None else wait_s
    key = ws.root
    with _held_guard:
        if key in _held:
            lock, depth = _held[key]
            _held[key] = (lock, depth + 1)
        else:
            lock = _acquire(ws, command, wait)
            _held[key] = (lock, 1)
    try:
        yield
    finally:
        with _held_guard:
            # Not held any more: let go by `released` and not taken back (its WorkspaceBusy is on its way up).
            lock, depth = _held.get(key, (None, 0))
            if depth > 1:
                _held[key] = (lock, depth - 1)
            elif lock is not None:
                del _held[key]
                (ws.root / ".lock.json").unlink(missing_ok=True)
                lock.release()


@contextmanager
def released(ws: Workspace, command: str, wait_s: float | None = None) -> Iterator[None]:
    """Let go of this process's hold on the workspace lock (however deeply re-entered) for the block, then take it
    back at the same depth: a run that waits for a person (commit's approval) must not keep others out meanwhile.
    Whoever resumes must re-check what it relied on, since another process may have worked here in between.
    Taking it back can fail with WorkspaceBusy naming the holder; the enclosing `locked` blocks then hold nothing."""
    key = ws.root
    with _held_guard:
        held = _held.pop(key, None)
        if held is not None:
            (ws.root / ".lock.json").unlink(missing_ok=True)
            held[0].release()
    try:
        yield
    finally:
        if held is not None:
            lock = _acquire(ws, command, lock_wait_s() if wait_s is None else wait_s)
            with _held_guard:
                _held[key] = (lock, held[1])


def _acquire(ws: Workspace, command: str, wait: float) -> FileLock:
    lock = FileLock(str(ws.root / ".lock"), is_singleton=False)
    try:
        lock.acquire(timeout=wait)
    except Timeout:
        raise WorkspaceBusy(
            f"workspace is in use by {_describe_holder(ws)}",
            where=str(ws.root),
            fix="wait for that run to finish, or stop it; a killed holder releases the lock by itself",
        ) from None
    atomic_write_json(
        ws.root / ".lock.json",
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )
    return lock


def _describe_holder(ws: Workspace) -> str:
    try:
        info = json.loads((ws.root / ".lock.json").read_text())
        return f"pid {info['pid']} on {info['host']} ({info['command']}, since {info['since']})"
    except (OSError, ValueError, KeyError):
        return "another process (no holder details recorded)"


# ------------------------------------------------------------------------------------------------ catalog


def sql(name: str) -> str:
    """Text of campaign/sql/<name>.sql."""
    return resources.files("campaign.sql").joinpath(f"{name}.sql").read_text(encoding="utf-8")


@contextmanager
def catalog(ws: Workspace, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the workspace catalog with the schema in place (migrated from older versions)."""
    if not ws.root.is_dir():
        raise Refused(
            "no campaign workspace here",
            where=str(ws.root),
            fix="run `campaign prepare CONFIG` (with the same --workspace) first",
        )
    if read_only and not ws.catalog_path.exists():
        read_only = False
    try:
        con = duckdb.connect(str(ws.catalog_path), read_only=read_only)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            # DuckDB lets one process write a database file; another program (a DuckDB shell, a notebook) has it.
            raise WorkspaceBusy(
                f"the catalog is open in another program ({exc})",
                where=str(ws.catalog_path),
                fix="close other programs that have campaign.duckdb open, then run the command again",
            ) from None
        raise _corrupt(ws, exc) from None
    except duckdb.Error as exc:
        raise _corrupt(ws, exc) from None
    try:
        if not read_only:
            try:
                _ensure_schema(con)
            except duckdb.Error as exc:
                raise _corrupt(ws, exc) from None
        yield con
    finally:
        con.close()


def _corrupt(ws: Workspace, exc: Exception) -> DataError:
    return DataError(
        f"the catalog is damaged and cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})",
        where=str(ws.catalog_path),
        fix=f"move it aside (mv {ws.catalog_path} {ws.catalog_path}.damaged) and run `campaign prepare`, "
        "`validate` and `commit` again: the catalog is the record of the gates, so it is rebuilt, not repaired",
    )


def _ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables; migrate a version-1 catalog (one gate row per digests) to one gate row per run."""
    has_gates = bool(first_row(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'gates'")[0])
    version_row = None
    if first_row(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'schema_meta'")[0]:
        version_row = first_row(con, "SELECT max(version) FROM schema_meta")
    version = (
        version_row[0] if version_row and version_row[0] is not None else (1 if has_gates else SCHEMA_VERSION)
    )
    if version < 2:
        with transaction(con):
            con.execute("ALTER TABLE gates RENAME TO gates_v1")
            con.execute(sql("schema"))
            con.execute(
                "INSERT INTO gates SELECT run_id, gate, passed, config_digest, data_digest, details, "
                "checked_at FROM gates_v1"
            )
            con.execute("DROP TABLE gates_v1")
    con.execute(sql("schema"))
    if version < SCHEMA_VERSION or version_row is None:
        con.execute("INSERT INTO schema_meta VALUES (?, ?)", [SCHEMA_VERSION, now()])


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def first_row(con: duckdb.DuckDBPyConnection, query: str, params: Any = None) -> tuple | None:
    """The first row of a query, with the result fully consumed (DuckDB 2 refuses new work on an open result)."""
    rows = con.execute(query, params or []).fetchall()
    return rows[0] if rows else None


def now() -> datetime:
    return datetime.now(UTC)


# --------------------------------------------------------------------------------------------------- runs


def start_run(ws: Workspace, stage: str, config_digest: str | None, data_digest: str | None) -> str:
    """Record the start of a stage run; earlier runs of this workspace still 'running' are marked abandoned."""
    run_id = f"{stage}-{now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    with catalog(ws) as con, transaction(con):
        # We hold the workspace lock, so any other 'running' row belongs to a process that died.
        con.execute("UPDATE runs SET status = 'abandoned', finished_at = ? WHERE status = 'running'", [now()])
        con.execute(
            "INSERT INTO runs (run_id, stage, started_at, status, config_digest, data_digest, pid) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?)",
            [run_id, stage, now(), config_digest, data_digest, os.getpid()],
        )
    return run_id


def finish_run(
    ws: Workspace, run_id: str, status: str, message: str = "", data_digest: str | None = None
) -> None:
    with catalog(ws) as con:
        con.execute(
            "UPDATE runs SET status = ?, finished_at = ?, message = ?, data_digest = coalesce(?, data_digest) "
            "WHERE run_id = ?",
            [status, now(), message[:2000], data_digest, run_id],
        )


# ----------------------------------------------------------------------------------------------- datasets


def record_dataset(ws: Workspace, run_id: str, manifest: dict[str, Any]) -> int:
    """Insert one `datasets` row per source and the per-reason `rejections`; no-op if this digest is recorded."""
    digest = manifest["data_digest"]
    with catalog(ws) as con, transaction(con):
        if first_row(con, "SELECT count(*) FROM datasets WHERE data_digest = ?", [digest])[0]:
            return 0
        rows = 0
        for source in manifest["sources"]:
            con.execute(
                "INSERT INTO datasets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    digest,
                    source["name"],
                    source["clean_file"],
                    source["n_input"],
                    source["n_kept"],
                    source["n_rejected"],
                    source["tokens_kept"],
                    source["bytes_kept"],
                    source["clean_sha256"],
                    manifest["tokenizer"],
                    run_id,
                    now(),
                ],
            )
            for reason, count in sorted(source["by_reason"].items()):
                con.execute(
                    "INSERT INTO rejections VALUES (?, ?, ?, ?)", [digest, source["name"], reason, count]
                )
            rows += 1
        for position, row in enumerate(manifest.get("removals", [])):  # per source and reason, pipeline order
            con.execute(
                "INSERT INTO removals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    digest,
                    row["source"],
                    position,
                    row["step"],
                    row["reason"],
                    row["docs"],
                    row["chars"],
                    row["tokens"],
                    row["tokens_exact"],
                ],
            )
        return rows


# -------------------------------------------------------------------------------------------------- gates


@dataclass(frozen=True)
class GateRecord:
    gate: str
    passed: bool
    config_digest: str
    data_digest: str
    details: dict[str, Any]
    run_id: str
    checked_at: datetime


def record_gates(
    ws: Workspace,
    run_id: str,
    config_digest: str,
    data_digest: str,
    results: list[tuple[str, bool, dict[str, Any]]],
) -> int:
    """Record one validate run's verdict: every gate's result for these digests, in one transaction.

    Each validate run adds its own rows (the newest verdict is the one that counts); a retry within the same run
    adds nothing."""
    checked_at = now()
    with catalog(ws) as con, transaction(con):
        if first_row(con, "SELECT count(*) FROM gates WHERE run_id = ?", [run_id])[0]:
            return 0
        for gate, passed, details in results:
            con.execute(
                "INSERT INTO gates VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    gate,
                    bool(passed),
                    config_digest,
                    data_digest,
                    json.dumps(details, default=str),
                    checked_at,
                ],
            )
    return len(results)


def latest_gates(ws: Workspace, config_digest: str, data_digest: str) -> dict[str, GateRecord]:
    """The gates of the newest validate run recorded for exactly these digests ({} if there is none)."""
    if not ws.catalog_path.exists():
        return {}
    with catalog(ws) as con:
        rows = con.execute(sql("latest_gates"), [config_digest, data_digest]).fetchall()
    return {
        r[0]: GateRecord(r[0], bool(r[1]), r[2], r[3], json.loads(r[4] or "{}"), r[5], r[6]) for r in rows
    }


# -------------------------------------------------------------------------------------------- commitments


@dataclass(frozen=True)
class Commitment:
    commitment_id: str
    window_start: datetime
    window_end: datetime
    config_digest: str
    data_digest: str
    approved_by: str
    run_id: str
    created_at: datetime
    config_json: str | None = None  # the committed config; analyse reads it from here, the trust root
    approval_comment: str | None = (
        None  # the approver's comment ('' when every gate passed and none was asked)
    )


def record_commitment(ws: Workspace, commitment: Commitment) -> Commitment:
    """Book the window; if these digests are already committed, return the existing commitment."""
    with catalog(ws) as con, transaction(con):
        existing = _commitment_rows(
            con,
            "WHERE config_digest = ? AND data_digest = ?",
            [commitment.config_digest, commitment.data_digest],
        )
        if existing:
            return existing[0]
        con.execute(
            "INSERT INTO commitments (commitment_id, window_start, window_end, config_digest, data_digest, "
            "approved_by, run_id, created_at, config_json, approval_comment) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                commitment.commitment_id,
                commitment.window_start,
                commitment.window_end,
                commitment.config_digest,
                commitment.data_digest,
                commitment.approved_by,
                commitment.run_id,
                commitment.created_at,
                commitment.config_json,
                commitment.approval_comment,
            ],
        )
    return commitment


def commitments(ws: Workspace) -> list[Commitment]:
    """All commitments of the workspace, newest first."""
    if not ws.catalog_path.exists():
        return []
    with catalog(ws) as con:
        return _commitment_rows(con, "", [])


def _commitment_rows(con: duckdb.DuckDBPyConnection, where: str, params: list[Any]) -> list[Commitment]:
    rows = con.execute(
        "SELECT commitment_id, window_start, window_end, config_digest, data_digest, approved_by, run_id, "
        f"created_at, config_json, approval_comment FROM commitments {where} ORDER BY created_at DESC",
        params,
    ).fetchall()
    return [Commitment(*row) for row in rows]


# ------------------------------------------------------------------------------------------- simulations


def has_replica(ws: Workspace, commitment_id: str, replica: int) -> bool:
    if not ws.catalog_path.exists():
        return False
    with catalog(ws) as con:
        return bool(
            first_row(
                con,
                "SELECT count(*) FROM sim_replicas WHERE commitment_id = ? AND replica = ?",
                [commitment_id, replica],
            )[0]
        )


def record_replica(
    ws: Workspace,
    run_id: str,
    commitment_id: str,
    replica: int,
    seed: int,
    summary: dict[str, Any],
    events: pd.DataFrame,
    power: pd.DataFrame,
) -> bool:
    """Insert one simulated replica (summary, events, power) in one transaction; False if already there."""
    events = events.assign(commitment_id=commitment_id, replica=replica)
    power = power.assign(commitment_id=commitment_id, replica=replica)
    with catalog(ws) as con, transaction(con):
        if first_row(
            con,
            "SELECT count(*) FROM sim_replicas WHERE commitment_id = ? AND replica = ?",
            [commitment_id, replica],
        )[0]:
            return False
        con.register("new_events", events)
        con.execute(
            "INSERT INTO sim_events SELECT commitment_id, replica, event_id, t_s, kind, category, scope, node, "
            "tokens_trained, detail FROM new_events"
        )
        con.register("new_power", power)
        con.execute("INSERT INTO sim_power SELECT commitment_id, replica, t_s, power_mw FROM new_power")
        con.execute(
            "INSERT INTO sim_replicas VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                commitment_id,
                replica,
                seed,
                float(summary["ettr"]),
                float(summary["tokens_trained"]),
                bool(summary["completed"]),
                json.dumps(summary, default=str),
                run_id,
                now(),
            ],
        )
        con.unregister("new_events")
        con.unregister("new_power")
    return True


def record_execution(ws: Workspace, run_id: str, commitment_id: str, replica: int, reused: bool) -> None:
    """Note which window this execute run executed (analyse reports the newest one)."""
    with catalog(ws) as con, transaction(con):
        if not first_row(con, "SELECT count(*) FROM executions WHERE run_id = ?", [run_id])[0]:
            con.execute(
                "INSERT INTO executions VALUES (?, ?, ?, ?, ?)",
                [run_id, commitment_id, replica, reused, now()],
            )


def replica_summary(ws: Workspace, commitment_id: str, replica: int) -> dict[str, Any]:
    with catalog(ws) as con:
        row = first_row(
            con,
            "SELECT summary FROM sim_replicas WHERE commitment_id = ? AND replica = ?",
            [commitment_id, replica],
        )
    return json.loads(row[0])


def existing_workspace(override: str | Path | None) -> Workspace:
    """The workspace to read when no config names one: `--workspace`, else the only one under workspace/."""
    if override:
        ws = Workspace(Path(override).resolve())
        if not ws.catalog_path.exists():
            raise Refused(
                "no campaign catalog here (campaign.duckdb is missing)",
                where=str(ws.root),
                fix="pass the --workspace a campaign ran in",
            )
        return ws
    found = sorted(p.parent for p in DEFAULT_ROOT.glob("*/campaign.duckdb"))
    if len(found) == 1:
        return Workspace(found[0].resolve())
    names = ", ".join(p.name for p in found) or "none"
    raise Refused(
        f"cannot tell which workspace to use under {DEFAULT_ROOT}/ (found: {names})",
        fix="pass --workspace DIR",
    )

"""The catalog of one workspace: its DuckDB schema, and the rows each stage writes and reads.

Result rows of a stage are written in one DuckDB transaction and keyed by what produced them (gate, config
digest, data digest; commitment and replica), so a run killed at any moment and started again ends with the
same rows and no duplicates.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Any

import duckdb

from campaign.errors import DataError, Refused, WorkspaceBusy
from campaign.gate_result import GateResult
from campaign.sim.summary import ReplicaSummary
from campaign.sql.rows import one_row, rows, scalar
from campaign.store.workspace import Workspace, lock_wait_s, now

if TYPE_CHECKING:  # pandas costs ~1 s to import: a refusal that needs none answers without it
    import pandas as pd

    from campaign.data.manifest import Manifest

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2


def sql(name: str) -> str:
    """Text of campaign/sql/<name>.sql."""
    return resources.files("campaign.sql").joinpath(f"{name}.sql").read_text(encoding="utf-8")


# A stage's verdict is written after minutes of work: it waits this long for a reader of the catalog (a
# `campaign sql` query, stopped after 60 s by default) to let go, rather than lose the work.
RESULT_WRITE_WAIT_S = 75.0


@contextmanager
def catalog(
    ws: Workspace, read_only: bool = False, wait_s: float | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the workspace catalog with the schema in place (migrated from older versions).

    DuckDB lets no process write the file while another has it open, even read-only: a writer waits up to
    `wait_s` seconds (default: CAMPAIGN_LOCK_WAIT_S) for it to be let go, then stops with WorkspaceBusy."""
    if not ws.root.is_dir():
        raise Refused(
            "no campaign workspace here",
            where=str(ws.root),
            fix="run `campaign prepare CONFIG` (with the same --workspace) first",
        )
    if read_only and not ws.catalog_path.exists():
        read_only = False
    deadline = time.monotonic() + (lock_wait_s() if wait_s is None else wait_s)
    while True:
        try:
            con = duckdb.connect(str(ws.catalog_path), read_only=read_only)
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise _corrupt(ws, exc) from None
            if time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            # DuckDB lets one process write a database file; another program (a DuckDB shell, a notebook, a
            # `campaign sql` query) has it.
            raise WorkspaceBusy(
                f"the catalog is open in another program ({exc})",
                where=str(ws.catalog_path),
                fix="close other programs that have campaign.duckdb open (a `campaign sql` query stops after its "
                "--timeout), then run the command again",
            ) from None
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
    has_gates = bool(scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'gates'"))
    version_row = None
    if scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'schema_meta'"):
        version_row = one_row(con, "SELECT max(version) AS version FROM schema_meta")
    version = (
        version_row["version"]
        if version_row and version_row["version"] is not None
        else (1 if has_gates else SCHEMA_VERSION)
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


def record_dataset(ws: Workspace, run_id: str, manifest: Manifest) -> int:
    """Insert one `datasets` row per source and the per-reason `rejections`; no-op if this digest is recorded."""
    digest = manifest["data_digest"]
    with catalog(ws) as con, transaction(con):
        if scalar(con, "SELECT count(*) FROM datasets WHERE data_digest = ?", [digest]):
            return 0
        n_rows = 0
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
            n_rows += 1
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
        return n_rows


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
    results: list[GateResult],
) -> int:
    """Record one validate run's verdict: every gate's result for these digests, in one transaction.

    Each validate run adds its own rows (the newest verdict is the one that counts); a retry within the same run
    adds nothing."""
    checked_at = now()
    with catalog(ws, wait_s=RESULT_WRITE_WAIT_S) as con, transaction(con):
        if scalar(con, "SELECT count(*) FROM gates WHERE run_id = ?", [run_id]):
            return 0
        for r in results:
            con.execute(
                "INSERT INTO gates VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    r.gate,
                    bool(r.passed),
                    config_digest,
                    data_digest,
                    json.dumps({"summary": r.summary, **r.details}, default=str),
                    checked_at,
                ],
            )
    return len(results)


def latest_gates(ws: Workspace, config_digest: str, data_digest: str) -> dict[str, GateRecord]:
    """The gates of the newest validate run recorded for exactly these digests ({} if there is none)."""
    if not ws.catalog_path.exists():
        return {}
    with catalog(ws) as con:
        found = rows(con, sql("latest_gates"), [config_digest, data_digest])
    return {
        r["gate"]: GateRecord(
            **{**r, "passed": bool(r["passed"]), "details": json.loads(r["details"] or "{}")}
        )
        for r in found
    }


def latest_gate_details(ws: Workspace, config_digest: str, gate: str) -> dict[str, Any]:
    """The details of `gate` in the newest validate run of this config, whatever its data digest ({} if none)."""
    if not ws.catalog_path.exists():
        return {}
    with catalog(ws) as con:
        found = rows(con, sql("latest_gate_details"), [config_digest, gate])
    details = json.loads(found[0]["details"] or "{}") if found else {}
    return details if isinstance(details, dict) else {}


def ever_validated(ws: Workspace) -> bool:
    """Whether any validate run has recorded a gate in this workspace (for any digests)."""
    if not ws.catalog_path.exists():
        return False
    with catalog(ws) as con:
        return bool(scalar(con, "SELECT count(*) FROM gates"))


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
    found = rows(
        con,
        "SELECT commitment_id, window_start, window_end, config_digest, data_digest, approved_by, run_id, "
        f"created_at, config_json, approval_comment FROM commitments {where} ORDER BY created_at DESC",
        params,
    )
    return [Commitment(**row) for row in found]


# ------------------------------------------------------------------------------------------- simulations


def has_replica(ws: Workspace, commitment_id: str, replica: int) -> bool:
    if not ws.catalog_path.exists():
        return False
    with catalog(ws) as con:
        return bool(
            scalar(
                con,
                "SELECT count(*) FROM sim_replicas WHERE commitment_id = ? AND replica = ?",
                [commitment_id, replica],
            )
        )


def record_replica(
    ws: Workspace,
    run_id: str,
    commitment_id: str,
    replica: int,
    seed: int,
    summary: ReplicaSummary,
    events: pd.DataFrame,
    power: pd.DataFrame,
) -> bool:
    """Insert one simulated replica (summary, events, power) in one transaction; False if already there."""
    events = events.assign(commitment_id=commitment_id, replica=replica)
    power = power.assign(commitment_id=commitment_id, replica=replica)
    with catalog(ws) as con, transaction(con):
        if scalar(
            con,
            "SELECT count(*) FROM sim_replicas WHERE commitment_id = ? AND replica = ?",
            [commitment_id, replica],
        ):
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
                float(summary.ettr),
                float(summary.tokens_trained),
                bool(summary.completed),
                json.dumps(summary.to_json(), default=str),
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
        if not scalar(con, "SELECT count(*) FROM executions WHERE run_id = ?", [run_id]):
            con.execute(
                "INSERT INTO executions VALUES (?, ?, ?, ?, ?)",
                [run_id, commitment_id, replica, reused, now()],
            )


def replica_summary(ws: Workspace, commitment_id: str, replica: int) -> ReplicaSummary:
    with catalog(ws) as con:
        summary = scalar(
            con,
            "SELECT summary FROM sim_replicas WHERE commitment_id = ? AND replica = ?",
            [commitment_id, replica],
        )
    return ReplicaSummary.from_json(json.loads(summary))

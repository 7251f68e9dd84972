"""Which workspace `campaign analyse` reads, checked before anything runs: light (DuckDB and the store only), so a
command refuses bad input, and finds an unchanged report, without importing the analysis stack."""

from __future__ import annotations

from pathlib import Path

import duckdb

from campaign.errors import CampaignError, ConfigError, DataError, WorkspaceBusy
from campaign.sql.rows import rows, scalar
from campaign.store import SCHEMA_VERSION, Workspace, existing_workspace

REQUIRED_TABLES = ("runs", "gates", "commitments", "sim_replicas", "sim_events", "sim_power", "executions")


def check_catalog(con: duckdb.DuckDBPyConnection, where: str) -> None:
    """Refuse a catalog this version cannot read: an older schema, or one with no executed window."""
    tables = {r["table_name"] for r in rows(con, "SELECT table_name FROM duckdb_tables()")}
    version = None
    if "schema_meta" in tables:
        version = scalar(con, "SELECT max(version) FROM schema_meta")
    missing = [t for t in REQUIRED_TABLES if t not in tables]
    if missing or version is None or version < SCHEMA_VERSION:
        raise DataError(
            f"the catalog is from an older campaign (schema version {version if version is not None else 1}; this "
            f"campaign reads version {SCHEMA_VERSION}{'; missing tables: ' + ', '.join(missing) if missing else ''})",
            where=where,
            fix="run `campaign execute CONFIG --workspace DIR` with this version once (it migrates the catalog and "
            "records the executed window), then analyse again",
        )
    if not scalar(con, "SELECT count(*) FROM executions"):
        from campaign.approval import read_pending  # the gates and the plan: only to say what is pending

        pending = read_pending(Path(where).parent)
        waiting = f" ({pending.describe()})" if pending else ""
        raise DataError(
            f"nothing to analyse: this workspace has no executed window{waiting}",
            where=where,
            fix="run `campaign execute CONFIG --workspace DIR` (or `campaign run CONFIG`) first",
        )


def analysis_workspace(path: str | Path | None) -> Workspace:
    """The workspace to analyse, refused as bad input (exit 2, nothing written) when it cannot be: a missing or empty
    folder, a folder that is not a campaign workspace, a catalog from an older schema, or no executed window."""
    if path is None:
        try:
            ws = existing_workspace(None)
        except CampaignError as err:
            raise ConfigError(err.message, where=err.where, fix=err.fix) from None
    else:
        ws = Workspace(Path(path).resolve())
        if not ws.root.is_dir():
            raise ConfigError(
                "no such workspace folder",
                where=str(ws.root),
                fix="pass --workspace DIR, the folder a campaign ran in",
            )
        if not ws.catalog_path.is_file():
            what = "is empty" if not any(ws.root.iterdir()) else "has no campaign catalog (campaign.duckdb)"
            raise ConfigError(
                f"the workspace {what}",
                where=str(ws.root),
                fix="run `campaign run CONFIG --workspace DIR` (or prepare, validate, commit and "
                "execute) there first, or pass the folder a campaign ran in",
            )
    con = open_read_only(ws)
    try:
        check_catalog(con, str(ws.catalog_path))
    finally:
        con.close()
    return ws


def open_read_only(ws: Workspace) -> duckdb.DuckDBPyConnection:
    """The catalog opened read-only; a writer holding it is exit 4, a damaged file exit 2 (both with the fix)."""
    try:
        con = duckdb.connect(str(ws.catalog_path), read_only=True)
    except duckdb.Error as exc:
        if "lock" in str(exc).lower():
            raise WorkspaceBusy(
                f"the catalog is open for writing in another program ({str(exc).splitlines()[0][:200]})",
                where=str(ws.catalog_path),
                fix="wait for the running stage to finish (or close the program), then try again",
            ) from None
        raise DataError(
            f"the catalog cannot be opened read-only ({str(exc).splitlines()[0][:200]})",
            where=str(ws.catalog_path),
            fix="move a damaged catalog aside and run the stages again",
        ) from None
    return con

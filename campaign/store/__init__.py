"""The workspace of one campaign (`workspace.py`: folders, marker, lock) and its DuckDB catalog (`tables.py`:
the schema and the rows each stage writes and reads). `store.catalog(ws)` opens the catalog.
The catalog's names are imported from `tables.py` on first use (PEP 562): a command that only looks at a folder
(is it a workspace?) does not import DuckDB.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from campaign.store.tables import (
        SCHEMA_VERSION,
        Commitment,
        GateRecord,
        catalog,
        commitments,
        ever_validated,
        finish_run,
        has_replica,
        latest_gate_details,
        latest_gates,
        record_commitment,
        record_dataset,
        record_execution,
        record_gates,
        record_replica,
        replica_summary,
        sql,
        start_run,
        transaction,
    )
from campaign.store.workspace import (
    DEFAULT_LOCK_WAIT_S,
    DEFAULT_ROOT,
    WORKSPACE_MARKER,
    Workspace,
    adopt_workspace,
    existing_workspace,
    is_workspace,
    is_writable,
    lock_wait_s,
    locked,
    now,
    outside_report_dir,
    recorded_campaign,
    released,
    require_workspace,
    require_writable,
    workspace_for,
)

__all__ = [
    "DEFAULT_LOCK_WAIT_S",
    "DEFAULT_ROOT",
    "SCHEMA_VERSION",
    "WORKSPACE_MARKER",
    "Commitment",
    "GateRecord",
    "Workspace",
    "adopt_workspace",
    "catalog",
    "commitments",
    "ever_validated",
    "existing_workspace",
    "finish_run",
    "has_replica",
    "is_workspace",
    "is_writable",
    "latest_gate_details",
    "latest_gates",
    "lock_wait_s",
    "locked",
    "now",
    "outside_report_dir",
    "record_commitment",
    "record_dataset",
    "record_execution",
    "record_gates",
    "record_replica",
    "recorded_campaign",
    "released",
    "replica_summary",
    "require_workspace",
    "require_writable",
    "sql",
    "start_run",
    "transaction",
    "workspace_for",
]


_TABLES = frozenset(
    {
        "SCHEMA_VERSION",
        "Commitment",
        "GateRecord",
        "catalog",
        "commitments",
        "ever_validated",
        "finish_run",
        "has_replica",
        "latest_gate_details",
        "latest_gates",
        "record_commitment",
        "record_dataset",
        "record_execution",
        "record_gates",
        "record_replica",
        "replica_summary",
        "sql",
        "start_run",
        "transaction",
    }
)


def __getattr__(name: str) -> Any:
    if name in _TABLES:
        value = getattr(importlib.import_module("campaign.store.tables"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'campaign.store' has no attribute {name!r}")

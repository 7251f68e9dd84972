"""Whether a workspace is ready for a stage, judged before anything runs: a stage after prepare needs the data of
a finished prepare, and a refusal creates nothing (no catalog, lock or run record)."""

from __future__ import annotations

from campaign.data.manifest import MANIFEST_NAME
from campaign.errors import Refused
from campaign.store import Workspace, require_workspace


def require_prepared(ws: Workspace, command: str) -> Workspace:
    """The workspace of a finished prepare, or refuse (exit 3) saying what to run first."""
    require_workspace(ws, command)
    if not (ws.data_dir / MANIFEST_NAME).is_file():
        raise Refused(
            f"no prepared data in this workspace ({command} needs the data of an earlier prepare; "
            f"{ws.data_dir / MANIFEST_NAME} is missing)",
            where=str(ws.root),
            fix="run `campaign prepare CONFIG` (with the same --workspace) first",
        )
    return ws

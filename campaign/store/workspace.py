"""The workspace of one campaign: its folders, the marker that says campaign owns them, and the lock.

Only one process works on a workspace at a time; the next one waits briefly, then stops with a message naming
the holder. The lock is re-entrant within a process (a lifecycle flow and its stages share it).
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from campaign.env import seconds_from_env
from campaign.errors import ConfigError, Refused, WorkspaceBusy
from campaign.files import atomic_write_json

DEFAULT_ROOT = Path("workspace")
DEFAULT_LOCK_WAIT_S = 10.0
WORKSPACE_MARKER = ".campaign-workspace"


def lock_wait_s() -> float:
    """Seconds a second process waits for the workspace lock: CAMPAIGN_LOCK_WAIT_S, default 10."""
    return seconds_from_env("CAMPAIGN_LOCK_WAIT_S", DEFAULT_LOCK_WAIT_S, "10")


NAME_MAX_BYTES = 255  # one folder or file name (Linux, macOS)
PATH_MAX_BYTES = 4095


@dataclass(frozen=True)
class Workspace:
    root: Path

    def __post_init__(self) -> None:
        """A folder the system cannot create or open is bad input, refused naming it before anything runs."""
        too_long = [part for part in self.root.parts if len(os.fsencode(part)) > NAME_MAX_BYTES]
        if too_long or len(os.fsencode(str(self.root))) > PATH_MAX_BYTES - 255:
            what = (
                f"the folder name {too_long[0][:40]}... is {len(os.fsencode(too_long[0])):,} bytes long, over the "
                f"{NAME_MAX_BYTES} a file system allows"
                if too_long
                else f"the workspace path is {len(os.fsencode(str(self.root))):,} bytes long, too long to hold its files"
            )
            raise ConfigError(what, where="--workspace", fix="choose a shorter workspace folder name")

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


def recorded_campaign(root: Path) -> str | None:
    """The campaign name the workspace's marker records (None: no marker, or not one campaign wrote)."""
    try:
        name = json.loads((Path(root) / WORKSPACE_MARKER).read_text(encoding="utf-8")).get("campaign")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and name else None


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
                "note": "campaign's own folder; see docs/workspace.md",
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


def is_writable(ws: Workspace) -> bool:
    """Whether this process may write into the workspace (not a read-only file system or another user's folder)."""
    return os.access(ws.root, os.W_OK | os.X_OK)


def require_writable(ws: Workspace, command: str) -> Workspace:
    """Refuse, naming the folder, a stage that writes into a workspace it cannot write, before any work starts."""
    if ws.root.is_dir() and not is_writable(ws):
        raise ConfigError(
            f"{command} writes into the workspace, and it is read-only here",
            where=str(ws.root),
            fix="make the folder writable, or copy it somewhere writable and pass that with --workspace "
            "(`campaign analyse` and `campaign sql` read a read-only workspace as it is)",
        )
    return ws


def outside_report_dir(ws: Workspace) -> Path:
    """Where `campaign analyse` writes the report of a read-only workspace: this user's folder under the temporary
    directory, one subfolder per workspace."""
    import hashlib
    import tempfile

    user = os.getuid() if hasattr(os, "getuid") else "user"
    digest = hashlib.sha256(str(ws.root).encode()).hexdigest()[:8]
    return Path(tempfile.gettempdir()) / f"campaign-reports-{user}" / f"{ws.root.name[:64]}-{digest}"


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
            entry = _held.get(key)
            if entry is not None and entry[1] > 1:
                _held[key] = (entry[0], entry[1] - 1)
            elif entry is not None:
                del _held[key]
                (ws.root / ".lock.json").unlink(missing_ok=True)
                entry[0].release()


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


def now() -> datetime:
    return datetime.now(UTC)

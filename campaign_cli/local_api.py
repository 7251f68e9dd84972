"""The local Prefect API of one CLI command: a running server when PREFECT_API_URL names one, else a private one.

With `PREFECT_API_URL` set (e.g. the `make ui` server), the command uses that server and starts nothing.
Otherwise it starts the same single-process uvicorn app that Prefect's own ephemeral mode starts
(`prefect.server.api.server:create_app`, see `SubprocessASGIServer` in prefect/server/api/server.py), through
`campaign_cli/private_api_app.py` (without its background-task worker; automation triggers off), with these differences:
- its SQLite database lives in the campaign's workspace (`<workspace>/.prefect`) or in a temporary folder,
  never in the user's ~/.prefect;
- a new database is a copy of one migrated once per Prefect version (cached under `~/.cache/campaign`, or
  `CAMPAIGN_CACHE_DIR`), so no command pays Prefect's migrations and block registration again;
- on Linux the kernel kills the server when the command dies, even by SIGKILL (PR_SET_PDEATHSIG);
- no flow run heartbeats (nothing watches a private server for crashed runs; each run's end waits ~1 s for them).
The command warms its own imports while the server starts (`warm`), so the two overlap.
What it costs a command: benchmarks/results/2026-12-03-local-api.md.
"""

import contextlib
import importlib.metadata
import importlib.util
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from campaign.errors import InternalError

STARTUP_TIMEOUT_S = 90.0
_PR_SET_PDEATHSIG = 1
DB_NAME = "prefect.db"
STAMP_NAME = "prefect-version"


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with(parent_pid: int):
    """preexec_fn: ask the kernel to SIGKILL the child when its parent dies; leave the terminal's process group
    so a Ctrl-C reaches the command (which stops the server itself) rather than the server mid-run."""

    def preexec() -> None:
        os.setpgrp()
        if sys.platform.startswith("linux"):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(0)

    return preexec


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _flush_to_api() -> None:
    if "prefect" not in sys.modules:
        return
    with contextlib.suppress(Exception):  # best effort: a log line that cannot be sent is not worth a failure
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=5)
    with contextlib.suppress(Exception):
        from prefect.events.worker import EventsWorker

        EventsWorker.drain_all(timeout=5)


def configured_api() -> str | None:
    """The API this process is already pointed at (PREFECT_API_URL, a profile, a test harness), if any."""
    configured = os.environ.get("PREFECT_API_URL")
    if not configured and "prefect" in sys.modules:
        from prefect.settings import get_current_settings

        configured = get_current_settings().api.url
    return configured or None


def prefect_version() -> str:
    return importlib.metadata.version("prefect")


def cache_dir() -> Path:
    """Where the migrated template database is kept: CAMPAIGN_CACHE_DIR, else $XDG_CACHE_HOME/campaign."""
    if os.environ.get("CAMPAIGN_CACHE_DIR"):
        return Path(os.environ["CAMPAIGN_CACHE_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "campaign"


def _server_env(home: Path, fresh_schema: bool) -> dict[str, str]:
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / DB_NAME}",
        # no automations on a private API: their triggers' periodic evaluation only costs CPU
        "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "false",
    }
    if not fresh_schema:  # the database is at this version's head with its blocks registered: skip both
        env |= {
            "PREFECT_API_DATABASE_MIGRATE_ON_START": "false",
            "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
        }
    return env


def _start_server(home: Path, fresh_schema: bool) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    spec = importlib.util.find_spec("prefect")
    assert spec is not None and spec.origin is not None  # prefect is imported already
    app_dir = Path(spec.origin).parent.parent  # as Prefect's ephemeral server does
    with open(home / "server.log", "ab") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--app-dir",
                str(app_dir),
                "--factory",
                "campaign_cli.private_api_app:create_app",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "error",
                "--lifespan",
                "on",
            ],
            env=_server_env(home, fresh_schema),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            # before any thread: the CLI starts its API before it imports Prefect's engine
            preexec_fn=_die_with(os.getpid()),
        )
    return proc, f"http://127.0.0.1:{port}/api"


def _wait_healthy(proc: subprocess.Popen, url: str, home: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not _healthy(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = (home / "server.log").read_text(errors="replace")[-800:]
            raise InternalError(
                f"the local Prefect API did not start (exit {proc.poll()}): {tail}",
                where=str(home / "server.log"),
                fix="set PREFECT_API_URL to a running Prefect server, or report this",
            )
        time.sleep(0.05)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _copy_db(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database, write-ahead log included (sqlite3's online backup)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(tmp)) as dst:
        src.backup(dst)
    os.replace(tmp, target)


def template_db() -> Path:
    """This Prefect version's migrated, block-registered empty database, built once (about one cold server
    start) and then copied for every new private API."""
    template = cache_dir() / f"prefect-{prefect_version()}.db"
    if template.exists():
        return template
    template.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="campaign-prefect-template-") as tmp:
        home = Path(tmp)
        proc, url = _start_server(home, fresh_schema=True)
        try:
            _wait_healthy(proc, url, home)
        finally:
            _stop(proc)
        _copy_db(home / DB_NAME, template)  # atomic: a concurrent builder's copy is as good as ours
    return template


def _prepare_home(home: Path) -> bool:
    """Make `home` hold a database at this Prefect version's head; True when it must still migrate itself."""
    home.mkdir(parents=True, exist_ok=True)
    db, stamp = home / DB_NAME, home / STAMP_NAME
    version = prefect_version()
    if db.exists():
        current = stamp.read_text().strip() if stamp.exists() else ""
        if current == version:
            return False
        stamp.write_text(version)  # an older Prefect's database: this start migrates it (once)
        return True
    _copy_db(template_db(), db)
    stamp.write_text(version)
    return False


@contextlib.contextmanager
def local_api(home: Path | None, warm: Callable[[], object] | None = None) -> Iterator[str]:
    """Yield the API URL the command's flows talk to: PREFECT_API_URL's server, else a private one whose database
    lives under `home` (kept: the workspace's run history) or, with `home=None`, in a folder removed afterwards.

    `warm()` runs while the private server starts (the command's own imports), so the two overlap."""
    configured = configured_api()
    if configured:
        if warm:
            warm()
        yield configured
        return
    with contextlib.ExitStack() as stack:
        if home is None:
            home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="campaign-prefect-")))
        migrate = _prepare_home(home)
        os.environ["PREFECT_HOME"] = str(home)  # the client's files too (before this process imports prefect)
        proc, url = _start_server(home, fresh_schema=migrate)
        os.environ["PREFECT_API_URL"] = url  # for a process this one starts (Dask workers, replica processes)
        try:
            # ... and for this process, whether or not it imported prefect already (its settings are read once)
            from prefect.settings import (
                PREFECT_API_URL,
                PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
                PREFECT_HOME,
                temporary_settings,
            )

            # No flow run heartbeats on a private API: they exist so a server can mark a crashed run (an automation
            # watches them), and this server lives and dies with the command. Each flow run's end joins its
            # heartbeat thread, which sleeps in 1 s steps (Prefect 3.9 flow_engine._send_heartbeats): ~1 s a run.
            stack.enter_context(
                temporary_settings(
                    {PREFECT_API_URL: url, PREFECT_HOME: str(home), PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
                )
            )
            if warm:
                warm()
            _wait_healthy(proc, url, home)
            yield url
        finally:
            _flush_to_api()  # the run logs and events still queued go out while their server is up
            os.environ.pop("PREFECT_API_URL", None)
            _stop(proc)

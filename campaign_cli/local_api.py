"""The local Prefect API of CLI commands: PREFECT_API_URL's server when set, else a local server kept per workspace.

With `PREFECT_API_URL` set (e.g. the `make ui` server), a command first checks that it answers (a bounded wait,
then a message naming the address and the fix) and starts nothing. Otherwise the first command on a workspace
starts the single-process uvicorn app that Prefect's own ephemeral mode starts
(`prefect.server.api.server:create_app`, see `SubprocessASGIServer` in prefect/server/api/server.py), through
`campaign_cli/private_api_app.py` (without its background-task worker; automation triggers off), and the next
commands on that workspace reuse it:
- its SQLite database lives in the workspace (`<workspace>/.prefect`), never in the user's ~/.prefect; commands
  with no workspace (and a read-only workspace) share one whose database is in a temporary folder;
- a new database is a copy of one migrated once per Prefect version (cached under `~/.cache/campaign`, or
  `CAMPAIGN_CACHE_DIR`), so no start pays Prefect's migrations and block registration again;
- `server.json` in that folder names the running server; `server.lock` makes starting one a critical section, so
  two commands at once share one server;
- a command holds a lease (`clients/<pid>-<start>`) while it runs; the server stops itself once no live command
  has held one for CAMPAIGN_SERVER_IDLE_S seconds (default 600; 0: when the last command ends), so even a command
  killed by SIGKILL leaves nothing running for longer than that; `campaign server stop` stops them at once (the
  servers of the workspaces under the current folder, of named workspaces, `shared`, or `--all`);
- no flow run heartbeats (nothing watches a local server for crashed runs; each run's end waits ~1 s for them).
The command warms its own imports while a new server starts (`warm`), so the two overlap.
What it costs a command: benchmarks/results/2026-12-03-local-api.md; how to use it: docs/workspace.md.
"""

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from campaign.env import seconds_from_env
from campaign.errors import ConfigError, InternalError

STARTUP_TIMEOUT_S = 180.0  # a cold start (migrations) on a busy machine can take minutes
API_CHECK_TIMEOUT_S = 5.0
_PR_SET_PDEATHSIG = 1
DB_NAME = "prefect.db"
STAMP_NAME = "prefect-version"
INFO_NAME = "server.json"
LOCK_NAME = "server.lock"
LEASES_DIR = "clients"
WORKER_INFO = "worker.json"  # the kept worker beside the server (campaign_cli/kept_worker.py)
IDLE_ENV = "CAMPAIGN_SERVER_IDLE_S"
HOME_ENV = "CAMPAIGN_SERVER_HOME"  # set for a kept server: the folder of its database, leases and server.json
DEFAULT_IDLE_S = 600.0
APP = "campaign_cli.private_api_app:create_app"
SHARED = (
    "shared"  # the name of the server that commands without a workspace share (`campaign server stop shared`)
)


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with(parent_pid: int) -> Callable[[], None]:
    """preexec_fn of a server that lives for one call (the template's): the kernel SIGKILLs it when its parent
    dies; it leaves the terminal's process group so a Ctrl-C reaches the parent, which stops it."""

    def preexec() -> None:
        os.setpgrp()
        if sys.platform.startswith("linux"):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(0)

    return preexec


def _healthy(url: str, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def flush_to_api() -> None:
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


def check_api(url: str, timeout_s: float = API_CHECK_TIMEOUT_S) -> None:
    """Refuse an API that does not answer its health check within `timeout_s` (refused, unreachable, or accepting
    and never answering), naming the address and the fix, before any flow waits on it."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout_s) as response:
            if response.status == 200:
                return
            problem = f"answered its health check with HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        problem = f"answered its health check with HTTP {exc.code}"
    except TimeoutError:
        problem = f"accepted the connection but did not answer within {timeout_s:g} s"
    except urllib.error.URLError as exc:
        reason = exc.reason
        problem = (
            f"did not answer within {timeout_s:g} s"
            if isinstance(reason, TimeoutError)
            else f"cannot be reached ({reason})"
        )
    except (OSError, ValueError) as exc:
        problem = f"cannot be reached ({exc})"
    raise ConfigError(
        f"the Prefect API at {url} {problem}",
        where="environment variable PREFECT_API_URL",
        fix="start that server (e.g. `make server` or `make ui`), or unset PREFECT_API_URL to let campaign run "
        "its own local one",
    )


def prefect_version() -> str:
    return importlib.metadata.version("prefect")


def cache_dir() -> Path:
    """Where the migrated template database is kept: CAMPAIGN_CACHE_DIR, else $XDG_CACHE_HOME/campaign."""
    if os.environ.get("CAMPAIGN_CACHE_DIR"):
        return Path(os.environ["CAMPAIGN_CACHE_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "campaign"


def idle_s() -> float:
    """Seconds a kept server waits with no command before it stops: CAMPAIGN_SERVER_IDLE_S, default 600."""
    return seconds_from_env(IDLE_ENV, DEFAULT_IDLE_S, "600 (0: stop the server when the command ends)")


# ------------------------------------------------------------------------------------------- processes and leases


def process_start(pid: int) -> str | None:
    """An identity of a live process that a reused pid does not share (its start time in clock ticks on Linux),
    or None when no such process runs (a zombie counts as gone)."""
    if pid <= 0:
        return None
    if sys.platform.startswith("linux"):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return None if fields[0] in ("Z", "X") else fields[19]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return "?"
    return "?"


def _lease_dir(home: Path) -> Path:
    return home / LEASES_DIR


def live_leases(home: Path) -> list[int]:
    """The pids of the commands that use the server of `home` now; leases of ended processes are removed."""
    live = []
    with contextlib.suppress(OSError):
        for entry in _lease_dir(home).iterdir():
            pid_text, _, start = entry.name.partition("-")
            if pid_text.isdigit() and start and process_start(int(pid_text)) == start:
                live.append(int(pid_text))
            else:
                entry.unlink(missing_ok=True)
    return sorted(live)


def _take_lease(home: Path) -> Path:
    lease = _lease_dir(home) / f"{os.getpid()}-{process_start(os.getpid())}"
    lease.parent.mkdir(exist_ok=True)
    lease.touch()
    return lease


def _is_server(pid: int, port: int) -> bool:
    """`pid` is a server this module started on `port` (not a process that got its pid since)."""
    if process_start(pid) is None:
        return False
    if not sys.platform.startswith("linux"):
        return True
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return APP.encode() in argv and str(port).encode() in argv


def server_info(home: Path) -> dict[str, Any] | None:
    """The server kept for `home` (its `server.json`) if it still runs, else None."""
    try:
        info = json.loads((home / INFO_NAME).read_text())
        pid, port = int(info["pid"]), int(info["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if _is_server(pid, port) else None


def _server_lock(home: Path, timeout_s: float = 120.0) -> FileLock:
    return FileLock(str(home / LOCK_NAME), timeout=timeout_s, is_singleton=False)


def retire(home: Path, pid: int) -> bool:
    """Called by an idle server (`pid`): unpublish it unless a command took a lease meanwhile. True: it may stop
    now (no command can find it any more)."""
    try:
        with _server_lock(home, timeout_s=0):
            if live_leases(home):
                return False
            with contextlib.suppress(OSError, ValueError, KeyError):
                if int(json.loads((home / INFO_NAME).read_text())["pid"]) == pid:
                    (home / INFO_NAME).unlink()
            _unregister(home)
            return True
    except Timeout:
        return False  # a command is finding or starting a server right now
    except OSError:
        return True  # the folder is gone: nothing can use this server any more


def _terminate(pid: int, port: int, timeout_s: float = 10.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout_s
        while _is_server(pid, port) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _is_server(pid, port):
            return


def worker_info(home: Path) -> dict[str, Any] | None:
    """The kept worker beside `home`'s server (its `worker.json`, campaign_cli/kept_worker.py) if it still runs."""
    try:
        info = json.loads((home / WORKER_INFO).read_text())
        pid, start = int(info["pid"]), str(info["start"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if process_start(pid) == start else None


def stop_worker(home: Path, timeout_s: float = 10.0) -> None:
    """Stop the kept worker beside `home`'s server, if one runs (SIGTERM: it stops listening at once and ends after
    the command it is serving, if any; SIGKILL after `timeout_s`)."""
    info = worker_info(home)
    if info is None:
        return
    pid, start = int(info["pid"]), str(info["start"])
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout_s
        while process_start(pid) == start and time.monotonic() < deadline:
            time.sleep(0.05)
        if process_start(pid) != start:
            return


def stop_server(home: Path) -> dict[str, Any] | None:
    """Stop the server kept for `home` now, if one runs; its info (with the pids of the commands that were using
    it, `clients`), or None."""
    with contextlib.suppress(OSError), _server_lock(home):
        info = server_info(home)
        # The worker first: once it sees its server gone it unpublishes itself, some time before it has ended, and
        # a stop after the server's could miss it.
        stop_worker(home)
        if info is not None:
            info["clients"] = live_leases(home)
            _terminate(int(info["pid"]), int(info["port"]))
        (home / INFO_NAME).unlink(missing_ok=True)
        _unregister(home)
        return info
    return None


# ------------------------------------------------------------------------------------------- the registry


def _registry() -> Path:
    """Every kept server this user's commands started, one file each naming its folder (for `campaign server`)."""
    return cache_dir() / "servers"


def _registry_entry(home: Path) -> Path:
    return _registry() / f"{hashlib.sha256(str(home).encode()).hexdigest()[:16]}.json"


def _register(home: Path) -> None:
    with contextlib.suppress(OSError):
        _registry().mkdir(parents=True, exist_ok=True)
        _registry_entry(home).write_text(json.dumps({"home": str(home)}))


def _unregister(home: Path) -> None:
    with contextlib.suppress(OSError):
        _registry_entry(home).unlink(missing_ok=True)


def running_servers() -> list[dict[str, Any]]:
    """Every kept server that runs now, each with `home` and `clients` (pids of the commands using it)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in sorted(_registry().glob("*.json")):
            try:
                home = Path(json.loads(entry.read_text())["home"])
            except (OSError, ValueError, KeyError, TypeError):
                entry.unlink(missing_ok=True)
                continue
            info = server_info(home)
            if info is None:
                entry.unlink(missing_ok=True)
                continue
            worker = worker_info(home)
            found.append(
                {
                    **info,
                    "home": str(home),
                    "workspace": workspace_of(home),
                    "clients": live_leases(home),
                    "worker": None
                    if worker is None
                    else {k: worker[k] for k in ("pid", "holds", "started_at")},
                }
            )
    return found


def stop_all() -> list[dict[str, Any]]:
    """Stop every kept server this user's commands started; what was stopped."""
    return stop_servers(running_servers())


def stop_servers(servers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stop these kept servers (entries of `running_servers`); what was stopped."""
    stopped = []
    for info in servers:
        done = stop_server(Path(info["home"]))
        if done is not None:
            stopped.append({**done, "home": info["home"], "workspace": info["workspace"]})
    return stopped


def servers_under(folder: Path) -> list[dict[str, Any]]:
    """The kept servers of the workspaces inside `folder` (a checkout: its `workspace/<name>`), not the shared one."""
    root = folder.resolve()
    return [
        info
        for info in running_servers()
        if info["workspace"] != SHARED and Path(info["workspace"]).resolve().is_relative_to(root)
    ]


def server_of(name: str) -> dict[str, Any] | None:
    """The kept server of one workspace (its folder), or of `shared`, the one commands without a workspace share."""
    home = _temporary_home_path() if name == SHARED else Path(name).resolve() / ".prefect"
    info = server_info(home) if home.is_dir() else None
    return None if info is None else {**info, "home": str(home), "workspace": workspace_of(home)}


def workspace_of(home: Path) -> str:
    """What a kept server serves: the workspace folder whose `.prefect` it is, or `shared`."""
    if home == _temporary_home_path():
        return SHARED
    return str(home.parent if home.name == ".prefect" else home)


# ------------------------------------------------------------------------------------------- starting a server


def _server_env(home: Path, fresh_schema: bool, idle: float | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / DB_NAME}",
        # no automations on a local API: their triggers' periodic evaluation only costs CPU
        "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "false",
    }
    env.pop("PREFECT_API_URL", None)
    env.pop(HOME_ENV, None)
    if idle is not None:  # a kept server: it watches its leases and stops itself once idle
        env |= {HOME_ENV: str(home), IDLE_ENV: repr(idle)}
    if not fresh_schema:  # the database is at this version's head with its blocks registered: skip both
        env |= {
            "PREFECT_API_DATABASE_MIGRATE_ON_START": "false",
            "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
        }
    return env


def _start_server(home: Path, fresh_schema: bool, idle: float | None = None) -> tuple[subprocess.Popen, str]:
    """Start the server app on a free port. `idle=None`: a server for this call only, killed with its parent;
    else a kept one, in its own session (a Ctrl-C in the terminal is the command's, not the server's)."""
    port = _free_port()
    spec = importlib.util.find_spec("prefect")
    assert spec is not None and spec.origin is not None  # prefect is installed
    app_dir = Path(spec.origin).parent.parent  # as Prefect's ephemeral server does
    with open(home / "server.log", "ab") as log:
        args: list[str] = [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory", APP]
        args += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"]
        args += ["--timeout-graceful-shutdown", "5"]
        proc = subprocess.Popen(
            args,
            env=_server_env(home, fresh_schema, idle),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            # before any thread: the CLI starts its API before it imports Prefect's engine
            preexec_fn=_die_with(os.getpid()) if idle is None else None,
            start_new_session=idle is not None,
        )
    return proc, f"http://127.0.0.1:{port}/api"


def _wait_healthy(alive: Callable[[], bool], url: str, home: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not _healthy(url):
        if not alive() or time.monotonic() > deadline:
            try:
                tail = (home / "server.log").read_text(errors="replace")[-800:]
            except OSError:
                tail = ""
            raise InternalError(
                f"the local Prefect API did not start: {tail}",
                where=str(home / "server.log"),
                fix="run `campaign server stop` and try again; set PREFECT_API_URL to a running Prefect server; "
                "or report this",
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
    start) and then copied for every new local API."""
    template = cache_dir() / f"prefect-{prefect_version()}.db"
    if template.exists():
        return template
    template.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="campaign-prefect-template-") as tmp:
        home = Path(tmp)
        proc, url = _start_server(home, fresh_schema=True)
        try:
            _wait_healthy(lambda: proc.poll() is None, url, home)
        finally:
            _stop(proc)
        _copy_db(home / DB_NAME, template)  # atomic: a concurrent builder's copy is as good as ours
    return template


@contextlib.contextmanager
def private_server(home: Path) -> Iterator[str]:
    """A local API for this process alone, its files in `home`: the server a command keeps for a workspace (the
    same app, on a copy of the template database), but neither kept nor published; it is stopped when the block
    ends and killed with this process. Yields its URL once it answers. The flow tests share one per session."""
    fresh = prepare_home(home)
    proc, url = _start_server(home, fresh_schema=fresh)
    try:
        _wait_healthy(lambda: proc.poll() is None, url, home)
        yield url
    finally:
        _stop(proc)


def prepare_home(home: Path) -> bool:
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


def _temporary_home_path() -> Path:
    return (
        Path(tempfile.gettempdir()) / f"campaign-prefect-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    )


def temporary_home() -> Path:
    """The folder of the server that commands without a (writable) workspace share: this user's own folder
    under the temporary directory (mode 0700)."""
    home = _temporary_home_path()
    home.mkdir(mode=0o700, exist_ok=True)
    if hasattr(os, "getuid") and home.stat().st_uid != os.getuid():
        raise ConfigError(
            f"{home} belongs to another user",
            where=str(home),
            fix="remove it, or set TMPDIR to a folder of your own",
        )
    return home


def usable_home(home: Path | None) -> Path:
    """`home` (a workspace's `.prefect`) if the server's files can be written there, else the temporary one: a
    read-only workspace is read without writing into it."""
    if home is None:
        return temporary_home()
    try:
        home.mkdir(exist_ok=True)
    except OSError:
        return temporary_home()
    if not os.access(home, os.W_OK | os.X_OK):
        return temporary_home()
    return home


def _find_or_start(home: Path) -> tuple[dict[str, Any], Path, subprocess.Popen | None]:
    """The server kept for `home` (started now if none runs) and this command's lease on it."""
    with _server_lock(home):
        info = server_info(home)
        if info is not None and info.get("prefect") != prefect_version():  # Prefect was upgraded meanwhile
            _terminate(int(info["pid"]), int(info["port"]))
            info = None
        proc = None
        if info is None:
            migrate = prepare_home(home)
            proc, url = _start_server(home, fresh_schema=migrate, idle=idle_s())
            info = {
                "pid": proc.pid,
                "port": int(url.rsplit(":", 1)[1].split("/")[0]),
                "url": url,
                "prefect": prefect_version(),
                "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "idle_s": idle_s(),
            }
            tmp = home / f".{INFO_NAME}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(info))
            os.replace(tmp, home / INFO_NAME)
            _register(home)
        return info, _take_lease(home), proc


@contextlib.contextmanager
def leased_server(home: Path) -> Iterator[tuple[dict[str, Any], subprocess.Popen | None]]:
    """The server kept for `home` (its `server.json` info, and its process when this call started it), held by this
    command's lease until the block ends. Imports no Prefect: a command whose flow runs in the kept worker beside
    the server (campaign_cli/kept_worker.py) never needs it."""
    info, lease, proc = _find_or_start(home)
    try:
        yield info, proc
    finally:
        lease.unlink(missing_ok=True)


def wait_until_healthy(home: Path, info: dict[str, Any], proc: subprocess.Popen | None) -> None:
    """Wait for the server of `leased_server` to answer; one that never does is stopped (not left for the next
    command to find) and reported."""
    pid, port = int(info["pid"]), int(info["port"])
    try:
        _wait_healthy(
            (lambda: proc.poll() is None) if proc is not None else (lambda: _is_server(pid, port)),
            str(info["url"]),
            home,
        )
    except InternalError:
        (_lease_dir(home) / f"{os.getpid()}-{process_start(os.getpid())}").unlink(missing_ok=True)
        stop_server(home)
        raise


@contextlib.contextmanager
def local_api(home: Path | None, warm: Callable[[], object] | None = None) -> Iterator[str]:
    """Yield the API URL the command's flows talk to: PREFECT_API_URL's server (checked to answer), else the
    local server kept for `home` (a workspace's `.prefect`; None or read-only: the shared temporary one),
    started if none runs, held by this command's lease until the block ends.

    `warm()` runs while a new server starts (the command's own imports), so the two overlap; with a server
    already running there is nothing to overlap, and the command imports only what its flow needs before it."""
    configured = configured_api()
    if configured:
        check_api(configured)
        yield configured
        return
    home = usable_home(home)
    with leased_server(home) as (info, proc), contextlib.ExitStack() as stack:
        url = str(info["url"])
        os.environ["PREFECT_HOME"] = str(home)  # the client's files too (before this process imports prefect)
        os.environ["PREFECT_API_URL"] = url  # for a process this one starts (Dask workers, replica processes)
        try:
            # ... and for this process, whether or not it imported prefect already (its settings are read once)
            from prefect.settings import (
                PREFECT_API_URL,
                PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
                PREFECT_HOME,
                temporary_settings,
            )

            # No flow run heartbeats on a local API: they exist so a server can mark a crashed run (an automation
            # watches them), and this server runs none. Each flow run's end joins its heartbeat thread, which
            # sleeps in 1 s steps (Prefect 3.9 flow_engine._send_heartbeats): ~1 s a run.
            stack.enter_context(
                temporary_settings(
                    {PREFECT_API_URL: url, PREFECT_HOME: str(home), PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
                )
            )
            if warm and proc is not None:  # a server is starting: overlap the imports with it
                warm()
            wait_until_healthy(home, info, proc)
            yield url
        finally:
            flush_to_api()  # the run logs and events still queued go out while their server is up
            os.environ.pop("PREFECT_API_URL", None)

"""The kept worker: a process beside a workspace's kept Prefect server that holds what `campaign simulate` imports,
so the command's flow run does not pay for those imports again (benchmarks/results/2026-12-05-simulate-cli.md).

What it holds: Prefect's client and flow engine pointed at its server (no heartbeats, as every local command),
the simulate flow and its tasks, the simulator's compiled kernels loaded from Numba's cache, and NumPy, pandas and
matplotlib for the report. Nothing passes from one command to the next but those imports: each command is a flow
run of its own, in the command's working folder, whose config is read afresh.
How a command uses it: it leases the server as every command does (campaign_cli/local_api.py), finds the worker in
the server's folder (`worker.json`) or starts one, sends its parameters over the worker's Unix socket, and prints
the flow's console lines as they come and its result at the end. A worker whose code, interpreter or environment
differs from the command's is replaced; it serves one command at a time (a second command waits for the first).
How it stops: with its server (it looks every second, and `campaign server stop` stops both), on SIGTERM (after
the command it is serving), and when its command goes away mid-run (a Ctrl-C: the run is interrupted and the worker
ends). CAMPAIGN_KEPT_WORKER=0 runs the flow in the command's own process, as does a command with PREFECT_API_URL
set or CAMPAIGN_SERVER_IDLE_S=0 (no kept server to keep it beside).
"""

import contextlib
import gc
import hashlib
import importlib
import importlib.metadata
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

from campaign import errors
from campaign.errors import CampaignError, ConfigError, InternalError
from campaign_cli import local_api

ENABLE_ENV = "CAMPAIGN_KEPT_WORKER"
LOCK_NAME = "worker.lock"
LOG_NAME = "worker.log"
STARTUP_TIMEOUT_S = 180.0  # importing the stack and loading the kernels; compiling them once after an install
ROOT = Path(__file__).resolve().parents[1]  # the checkout whose packages the worker imports
PACKAGES = ("campaign", "campaign_cli", "flows", "tasks", "data_checks")
# What each command warms before the worker answers: its flow, and what its first run would import or load.
WARM = {"simulate": ("flows.simulate", "tasks.analyse", "campaign.analysis.plots", "campaign.sim.replicas")}
# Variables that differ between two terminals of one user without changing what a command does.
_VOLATILE = {"PWD", "OLDPWD", "SHLVL", "_", "TERM", "COLUMNS", "LINES", "COLORTERM", "LS_COLORS", "DISPLAY"}
_VOLATILE_PREFIXES = ("PYTEST_", "SSH_", "TMUX", "STY", "WINDOW", "XDG_SESSION", "TERM_", "PS1", "PROMPT")
_SOCKET_MAX = 100  # bytes: a Unix socket's path must fit sockaddr_un (108 on Linux)


# ------------------------------------------------------------------------------------------- the command's side


def enabled() -> bool:
    """Whether a command runs its flow in the kept worker: a kept local server to keep it beside (no
    PREFECT_API_URL, a non-zero idle time), Unix sockets, and no CAMPAIGN_KEPT_WORKER=0."""
    if os.environ.get(ENABLE_ENV, "1").strip() == "0" or not hasattr(socket, "AF_UNIX"):
        return False
    return local_api.configured_api() is None and local_api.idle_s() > 0


def identity() -> str:
    """What a worker must share with a command to serve it: the interpreter, the checkout and every file of its
    packages (path, size, modification time), the installed packages, and the environment but for the variables
    a terminal changes."""
    files = []
    for package in PACKAGES:
        for folder, dirs, names in os.walk(ROOT / package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(folder, name))
                    files.append((os.path.join(folder, name), st.st_size, st.st_mtime_ns))
    sites = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _VOLATILE
        and not k.startswith(_VOLATILE_PREFIXES)
        and k not in ("PREFECT_API_URL", "PREFECT_HOME", local_api.HOME_ENV)
    }
    facts = {
        "python": [sys.executable, sys.version],
        "root": str(ROOT),
        "files": files,
        "sites": sorted((s, os.stat(s).st_mtime_ns) for s in sites if os.path.isdir(s)),
        "prefect": importlib.metadata.version("prefect"),
        "env": sorted(env.items()),
    }
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()


def run_in_worker(home: Path | None, command: str, args: dict[str, Any]) -> Any:
    """Run `command` (a key of COMMANDS) with `args` in the worker kept beside the local server of `home` (a
    workspace's `.prefect`, or None for the shared one), starting either if need be; its result, or the
    CampaignError it raised. The flow's console lines are printed on stderr as they come."""
    home = local_api.usable_home(home)
    with local_api.leased_server(home) as (server, proc):
        worker = _find_or_start(home, server, command)
        local_api.wait_until_healthy(home, server, proc)
        return _call(worker, home, command, args)


def serves(home: Path | None, command: str) -> bool:
    """Whether a worker that can serve `command` for this command's code and environment already runs beside
    `home`'s live server: then the command's input is checked there, where the config's modules are imported."""
    home = local_api.usable_home(home)
    info, server = local_api.worker_info(home), local_api.server_info(home)
    return (
        info is not None
        and server is not None
        and info.get("server_pid") == server.get("pid")
        and command in info.get("commands", [])
        and info.get("identity") == identity()
    )


def _find_or_start(home: Path, server: dict[str, Any], command: str) -> dict[str, Any]:
    ident = identity()
    with FileLock(str(home / LOCK_NAME), timeout=STARTUP_TIMEOUT_S, is_singleton=False):
        info = local_api.worker_info(home)
        if (
            info is not None
            and info.get("identity") == ident
            and info.get("server_pid") == server["pid"]
            and command in info.get("commands", [])
        ):
            return info
        if info is not None:
            local_api.stop_worker(home)
        return _start(home, server, ident)


def _start(home: Path, server: dict[str, Any], ident: str) -> dict[str, Any]:
    """Start a worker for `server` and wait until it listens (it writes `worker.json` once it does)."""
    (home / local_api.WORKER_INFO).unlink(missing_ok=True)
    env = {
        **os.environ,
        "PREFECT_API_URL": str(server["url"]),
        "PREFECT_HOME": str(home),
        # `-P` drops the working folder from its import path: it imports this checkout's packages, whatever the
        # folder it was started from holds
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop(local_api.HOME_ENV, None)
    args = [sys.executable, "-P", "-m", "campaign_cli.kept_worker", str(home), str(server["pid"]), ident]
    with open(home / LOG_NAME, "ab") as log:
        proc = subprocess.Popen(
            args, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        info = local_api.worker_info(home)
        if info is not None and info.get("pid") == proc.pid:
            return info
        if proc.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            try:
                tail = (home / LOG_NAME).read_text(errors="replace")[-800:]
            except OSError:
                tail = ""
            raise InternalError(
                f"the kept worker did not start: {tail}",
                where=str(home / LOG_NAME),
                fix=f"set {ENABLE_ENV}=0 to run the flow in the command's own process, and report this",
            )
        time.sleep(0.05)


def _call(worker: dict[str, Any], home: Path, command: str, args: dict[str, Any]) -> Any:
    """Send one command to the worker; relay its console lines to stderr; its result, or raise its error."""
    request = {"command": command, "args": args, "cwd": os.getcwd()}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(str(worker["socket"]))
        except OSError as exc:
            raise InternalError(
                f"the kept worker (pid {worker['pid']}) does not answer: {exc}",
                where=str(home / LOG_NAME),
                fix="run the command again (it starts a new worker); `campaign server stop` stops both",
            ) from None
        conn.sendall(json.dumps(request).encode() + b"\n")
        for line in conn.makefile("rb"):
            message = json.loads(line)
            if "stderr" in message:
                sys.stderr.write(message["stderr"])
                sys.stderr.flush()
            elif "result" in message:
                return message["result"]
            else:
                raise _error_of(message["error"])
    raise InternalError(
        f"the kept worker (pid {worker['pid']}) ended before it answered",
        where=str(home / LOG_NAME),
        fix="run the command again (it starts a new worker); report it if it happens again",
    )


def _error_of(fields: dict[str, Any]) -> CampaignError:
    """The worker's error as the command raises it: the same kind, message, place, fix and exit code."""
    kind = getattr(errors, str(fields.get("kind")), None)
    if not (isinstance(kind, type) and issubclass(kind, CampaignError)) or kind is errors.GateFailed:
        kind = CampaignError
    err = kind(str(fields["message"]), where=fields.get("where"), fix=fields.get("fix"))
    err.exit_code = int(fields["exit_code"])
    return err


# ------------------------------------------------------------------------------------------- the worker's side


def _run_simulate(args: dict[str, Any]) -> Any:
    from campaign.sim.sweeps import check_sweeps
    from campaign_cli.terminal import finish
    from flows.simulate import SimulateParams, simulate_with_runner

    check_sweeps(
        args["config"], args["overrides"], args["sweeps"]
    )  # bad input fails before a flow run starts
    return finish(simulate_with_runner(SimulateParams(**args)))


COMMANDS: dict[str, Callable[[dict[str, Any]], Any]] = {"simulate": _run_simulate}


class _Relay(io.TextIOBase):
    """The worker's stderr: the console lines of the command being served go to that command; anything else (its
    start, its end) to the worker's log."""

    def __init__(self, log: Any) -> None:
        self._log = log
        self._conn: socket.socket | None = None
        self._lock = threading.Lock()

    def attach(self, conn: socket.socket | None) -> None:
        with self._lock:
            self._conn = conn

    def send(self, message: dict[str, Any]) -> bool:
        with self._lock:
            if self._conn is None:
                return False
            try:
                self._conn.sendall(json.dumps(message, default=str).encode() + b"\n")
                return True
            except OSError:  # the command went away: the watch on its socket ends the run
                self._conn = None
                return False

    def write(self, text: str) -> int:
        if not self.send({"stderr": text}):
            self._log.write(text)
            self._log.flush()
        return len(text)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


def socket_path(home: Path, pid: int) -> Path:
    """Where the worker listens: beside the server, or, for a deep workspace (a Unix socket's path must fit
    sockaddr_un), in this user's temporary folder, or in a folder of this user's own under /tmp when TMPDIR is deep
    too."""
    name = f"worker-{pid}.sock"
    for folder in (home, local_api.temporary_home()):
        if len(os.fsencode(folder / name)) <= _SOCKET_MAX:
            return folder / name
    short = Path("/tmp") / f"campaign-{os.getuid()}"
    short.mkdir(mode=0o700, exist_ok=True)
    if short.stat().st_uid != os.getuid() or short.stat().st_mode & 0o077:
        raise ConfigError(
            f"{short} is not a folder of this user's own (mode 0700)",
            where=str(short),
            fix="remove it, or set CAMPAIGN_KEPT_WORKER=0 to run flows in the command's own process",
        )
    return short / name


class _Worker:
    def __init__(self, home: Path, server_pid: int, ident: str, relay: _Relay) -> None:
        self.home, self.server_pid, self.identity, self.relay = home, server_pid, ident, relay
        self.retiring = threading.Event()
        self.pid = os.getpid()
        self.socket_path = socket_path(home, self.pid)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def warm(self) -> list[str]:
        """Import every command's modules and load the kernels from Numba's cache; what is held, by name."""
        held = []
        for modules in WARM.values():
            for module in modules:
                importlib.import_module(module)
                held.append(module)
        from campaign.sim.compiled import warm

        warm()
        return [*held, "campaign.sim.compiled (kernels loaded)"]

    def publish(self, held: list[str]) -> None:
        self.socket_path.unlink(missing_ok=True)
        old = os.umask(0o177)  # the socket is this user's alone
        try:
            self.listener.bind(str(self.socket_path))
        finally:
            os.umask(old)
        self.listener.listen(8)
        self.listener.settimeout(0.5)
        info = {
            "pid": self.pid,
            "start": local_api.process_start(self.pid),
            "identity": self.identity,
            "server_pid": self.server_pid,
            "socket": str(self.socket_path),
            "commands": sorted(COMMANDS),
            "holds": held,
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        tmp = self.home / f".{local_api.WORKER_INFO}.{self.pid}.tmp"
        tmp.write_text(json.dumps(info))
        os.replace(tmp, self.home / local_api.WORKER_INFO)

    def retire(self) -> None:
        """Stop taking commands: no command can find this worker any more; it ends after the one it serves."""
        self.retiring.set()
        self.socket_path.unlink(missing_ok=True)
        with contextlib.suppress(OSError, ValueError, KeyError):
            if json.loads((self.home / local_api.WORKER_INFO).read_text())["pid"] == self.pid:
                (self.home / local_api.WORKER_INFO).unlink()

    def watch_server(self) -> None:
        """Retire once the server is gone or another worker was published in this one's place."""
        while not self.retiring.wait(1.0):
            info = local_api.worker_info(self.home)
            if local_api.process_start(self.server_pid) is None or info is None or info["pid"] != self.pid:
                self.retire()

    def serve(self) -> None:
        while not self.retiring.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            with conn:
                conn.settimeout(None)
                self.handle(conn)
        self.listener.close()

    def handle(self, conn: socket.socket) -> None:
        request = json.loads(conn.makefile("rb").readline() or b"{}")
        done = threading.Event()
        threading.Thread(target=self._watch_command, args=(conn, done), daemon=True).start()
        self.relay.attach(conn)
        try:
            os.chdir(request["cwd"])
            reply: dict[str, Any] = {"result": COMMANDS[request["command"]](request["args"])}
        except CampaignError as err:
            reply = {"error": _fields(err)}
        except KeyboardInterrupt:  # the command went away (a Ctrl-C): nobody to answer; end with the run
            self.retire()
            return
        except Exception as exc:
            reply = {"error": _fields(_explained(exc, self.home))}
        finally:
            done.set()
        self.relay.send(reply)
        self.relay.attach(None)

    def _watch_command(self, conn: socket.socket, done: threading.Event) -> None:
        """The command sends nothing after its request: its socket readable at EOF means it went away. Then the
        run is interrupted (as a Ctrl-C interrupts it in the command's own process) and the worker retires."""
        while not done.is_set():
            readable, _, _ = select.select([conn], [], [], 0.25)
            if not readable or done.is_set():
                continue
            try:
                gone = conn.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                gone = True
            if gone:
                self.retire()
                os.kill(
                    self.pid, signal.SIGINT
                )  # a KeyboardInterrupt in the run, as a Ctrl-C in its terminal
                threading.Timer(15.0, os._exit, args=(130,)).start()  # a run that does not stop ends here
                return


def _fields(err: CampaignError) -> dict[str, Any]:
    return {
        "kind": type(err).__name__,
        "message": err.message,
        "where": err.where,
        "fix": err.fix,
        "exit_code": err.exit_code,
    }


def _explained(exc: Exception, home: Path) -> CampaignError:
    """An exception outside the flow's own failures, as the command in its own process would report it."""
    from campaign_cli.terminal import BUG_FIX, api_disk_full, environment_error

    return (
        errors.disk_full(exc)
        or environment_error(exc)
        or api_disk_full(exc, home)
        or InternalError(f"{type(exc).__name__}: {exc}", fix=BUG_FIX)
    )


def main(argv: list[str]) -> int:
    """`python -P -m campaign_cli.kept_worker HOME SERVER_PID IDENTITY`, as `_start` runs it."""
    home, server_pid, ident = Path(argv[0]), int(argv[1]), argv[2]
    log = open(home / LOG_NAME, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - the process's own stderr
    relay = _Relay(log)
    sys.stdout, sys.stderr = log, relay  # before Prefect's console handler looks for its stream
    worker = _Worker(home, server_pid, ident, relay)
    signal.signal(signal.SIGTERM, lambda *_: worker.retire())
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from campaign_cli.terminal import console_without_tracebacks

    # No heartbeats, as local_api gives every command (each run's end would wait ~1 s for its heartbeat thread).
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        held = worker.warm()
        # What the worker holds for good (Prefect, the kernels, matplotlib) is moved out of the collector's reach:
        # a run's full collections then walk only what the run made (they cost ~0.1-0.3 s of a run otherwise).
        gc.collect()
        gc.freeze()
        # after the imports, which set up Prefect's logging: its server lives no longer than its commands need it
        console_without_tracebacks(view_links=False)
        worker.publish(held)
        log.write(
            f"{datetime.now(UTC).isoformat(timespec='seconds')} kept worker {worker.pid} holds {held}\n"
        )
        threading.Thread(target=worker.watch_server, name="server-watch", daemon=True).start()
        worker.serve()
    local_api.flush_to_api()
    worker.retire()
    log.write(f"{datetime.now(UTC).isoformat(timespec='seconds')} kept worker {worker.pid} stopped\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

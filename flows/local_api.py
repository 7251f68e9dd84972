"""The temporary local Prefect API of one CLI command: owned by it, kept in its workspace, gone when it ends.

With `PREFECT_API_URL` set, the command uses that server and starts nothing. Otherwise it starts the same
single-process uvicorn app that Prefect's own ephemeral mode starts (`prefect.server.api.server:create_app`, see
`SubprocessASGIServer` in prefect/server/api/server.py), with two differences: its SQLite database lives under the
PREFECT_HOME the caller chooses (the campaign's workspace, never the user's ~/.prefect), and on Linux the kernel
kills it when the command dies, even by SIGKILL (PR_SET_PDEATHSIG), so no server is left behind.
"""

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from campaign.errors import InternalError

STARTUP_TIMEOUT_S = 90.0
_PR_SET_PDEATHSIG = 1


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


@contextlib.contextmanager
def local_api(home: Path) -> Iterator[str]:
    """Yield the API URL the command's flows talk to, starting a private server under `home` if none is set."""
    configured = os.environ.get("PREFECT_API_URL")
    if not configured and "prefect" in sys.modules:  # already configured in-process (a test harness, a profile)
        from prefect.settings import get_current_settings

        configured = get_current_settings().api.url
    if configured:
        yield configured
        return
    home.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    os.environ["PREFECT_HOME"] = str(home)  # the client's files too (before this process imports prefect)
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
           "PREFECT__SERVER_FINAL": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    spec = importlib.util.find_spec("prefect")
    app_dir = Path(spec.origin).parent.parent  # as Prefect's own ephemeral server passes --app-dir
    with open(home / "server.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory",
             "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port),
             "--log-level", "error", "--lifespan", "on"],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            # before any thread: the CLI starts its API before it imports Prefect's engine
            preexec_fn=_die_with(os.getpid()),  # noqa: PLW1509
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _healthy(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (home / "server.log").read_text(errors="replace")[-800:]
                raise InternalError(f"the local Prefect API did not start (exit {proc.poll()}): {tail}",
                                    where=str(home / "server.log"),
                                    fix="set PREFECT_API_URL to a running Prefect server, or report this")
            time.sleep(0.1)
        os.environ["PREFECT_API_URL"] = url
        yield url
    finally:
        _flush_to_api()  # the run logs and events still queued go out while their server is up
        os.environ.pop("PREFECT_API_URL", None)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

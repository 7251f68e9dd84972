"""`make ui` and `make stop`: a local Prefect server with the UI, the `campaign` work pool, every deployment of
deployments/prefect.yaml (with its automations) and a process worker, all started from here and stopped exactly.

Everything lives under one folder (default `workspace/.prefect-ui/`): the server's SQLite database (its
PREFECT_HOME), the logs, and one pid file per process started. `stop` signals only the process groups whose pid
files this module wrote, and only while the process is still the one it started (its command line is checked), so
it never stops anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DIR = REPO / "workspace" / ".prefect-ui"
POOL = "campaign"
PREFECT_YAML = "deployments/prefect.yaml"


def environment(home: Path, port: int) -> dict[str, str]:
    """What every process of the UI stack sees: its own PREFECT_HOME (so the SQLite database is under it) and API."""
    return {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_URL": f"http://127.0.0.1:{port}",
        "PREFECT_SERVER_UI_ENABLED": "true",
        "PREFECT_UI_ENABLED": "true",  # the point of `make ui`
        "PREFECT_WORKER_QUERY_SECONDS": "2",
        "PREFECT_WORKER_PREFETCH_SECONDS": "2",
    }


def server_environment(home: Path, port: int) -> dict[str, str]:
    """The server's environment. A new folder's database starts as a copy of the migrated, block-registered one the
    CLI's local APIs start from (campaign_cli/local_api.py, built once per Prefect version), so the server skips
    its migrations and block registration; a database an older Prefect wrote migrates as before."""
    from campaign_cli.local_api import prepare_home

    env = environment(home, port)
    if prepare_home(home):
        return env
    return env | {
        "PREFECT_API_DATABASE_MIGRATE_ON_START": "false",
        "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
    }


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _pidfile(home: Path, name: str) -> Path:
    return home / f"{name}.pid"


def _spawn(home: Path, name: str, args: list[str], env: dict[str, str]) -> int:
    log = open(home / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child, which outlives this process
    proc = subprocess.Popen(
        args,
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    _pidfile(home, name).write_text(json.dumps({"pid": proc.pid, "argv": args}))
    return proc.pid


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie's cmdline is empty)."""
    return bool(_cmdline(pid))


def _ours(record: dict) -> bool:
    """The pid still runs the command this module started (not a pid reused by something else)."""
    cmdline = _cmdline(record["pid"])
    return cmdline is not None and bool(cmdline) and cmdline[-len(record["argv"][1:]) :] == record["argv"][1:]


def _healthy(api: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api}/health", timeout=2) as response:
            return response.read().strip() == b"true"
    except OSError:
        return False


def _run(args: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, check=False, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"`{' '.join(args[1:])}` failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _step(text: str) -> None:
    """One line per part of the stack as it comes up (`make ui` takes minutes on a fresh machine)."""
    print(f"make ui: {text}", flush=True)


def start(
    home: Path = DEFAULT_DIR,
    port: int = 4200,
    worker_limit: int = 4,
    timeout_s: float = 180,
    say: Callable[[str], None] = _step,
) -> dict[str, str]:
    """Start the stack (or report the one already running from this folder), saying each part as it comes up;
    returns its environment."""
    home = home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    env = environment(home, port)
    api = env["PREFECT_API_URL"]
    running = _pidfile(home, "server").exists() and _ours(json.loads(_pidfile(home, "server").read_text()))
    if not running:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                raise SystemExit(f"port {port} is taken by another program: `make ui UI_PORT=<free port>`")
        say(f"starting the Prefect server on port {port} (log: {home / 'server.log'}) ...")
        _spawn(
            home,
            "server",
            [_bin("prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            server_environment(home, port),
        )
    else:
        say(f"the Prefect server started from {home} is already running")
    started = time.monotonic()
    deadline = started + timeout_s
    while not _healthy(api):
        if time.monotonic() > deadline:
            raise SystemExit(
                f"the Prefect server did not answer within {timeout_s:.0f} s; see {home / 'server.log'}"
            )
        time.sleep(0.5)
    say(f"the server answers at {api} ({time.monotonic() - started:.0f} s)")
    pools = _run([_bin("prefect"), "work-pool", "ls"], env)
    if f" {POOL} " not in pools:
        say(f"creating the work pool '{POOL}' ...")
        _run([_bin("prefect"), "work-pool", "create", POOL, "--type", "process"], env)
    say(f"deploying every deployment of {PREFECT_YAML} (about a minute) ...")
    started = time.monotonic()
    _run([_bin("prefect"), "--no-prompt", "deploy", "--all", "--prefect-file", PREFECT_YAML], env)
    say(f"deployments registered ({time.monotonic() - started:.0f} s)")
    worker = _pidfile(home, "worker")
    if not (worker.exists() and _ours(json.loads(worker.read_text()))):
        say(f"starting a worker on the pool '{POOL}' (log: {home / 'worker.log'})")
        _spawn(
            home,
            "worker",
            [_bin("prefect"), "worker", "start", "--pool", POOL, "--limit", str(worker_limit)],
            env,
        )
    return env


def stop(home: Path = DEFAULT_DIR, timeout_s: float = 30) -> list[str]:
    """Stop what `start` started from this folder (worker first), and only that; returns what was stopped."""
    home = home.resolve()
    stopped = []
    for name, sig in (("worker", signal.SIGINT), ("server", signal.SIGTERM)):
        pidfile = _pidfile(home, name)
        if not pidfile.exists():
            continue
        record = json.loads(pidfile.read_text())
        if _ours(record):
            os.killpg(
                record["pid"], sig
            )  # its own session and group (start_new_session): it and its children
            deadline = time.monotonic() + timeout_s
            while _running(record["pid"]) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _running(record["pid"]):
                os.killpg(record["pid"], signal.SIGKILL)
            stopped.append(f"{name} (pid {record['pid']})")
        pidfile.unlink()
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deployments.ui", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help="folder for the database, logs and pid files"
    )
    parser.add_argument("--port", type=int, default=4200)
    args = parser.parse_args(argv)
    if args.action == "start":
        env = start(args.dir, args.port)
        print(
            f"Prefect UI: {env['PREFECT_UI_URL']}  (API {env['PREFECT_API_URL']}; database, logs and pids in "
            f"{args.dir.resolve()})"
        )
        print(
            "Deployments: every stage and the lifecycle of each shipped campaign; worker on pool "
            f"'{POOL}'. Run `demo-lifecycle` from the UI; `make stop` stops what this started."
        )
    else:
        stopped = stop(args.dir)
        print("stopped " + ", ".join(stopped) if stopped else "nothing started by `make ui` is running")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A CLI command's local Prefect API lives in the workspace, and stops once no command has used it for its idle
time, even after a `kill -9` of the command. Real processes, no test harness: this is what a user's terminal sees."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.paths import DEMO, REPO

pytestmark = pytest.mark.e2e


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _cmdline(pid: int) -> str:
    """The process's command line, or "" if it ended since it was listed (children come and go while we look)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.timeout(900)  # a lifecycle in a subprocess, killed, and its server
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_kill_9_of_a_run_leaves_no_server_past_its_idle_time_and_nothing_in_the_users_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    ws = tmp_path / "w"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(HOME=str(home), CAMPAIGN_LOCK_WAIT_S="1", CAMPAIGN_SERVER_IDLE_S="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "campaign_cli.cli", "run", str(DEMO), "--workspace", str(ws)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 180
        server = []
        while not server or not (ws / "data" / "manifest.json").exists():
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "the run did not get going"
            server = [c for c in _children(proc.pid) if "uvicorn" in _cmdline(c)]
            time.sleep(0.2)
        assert (ws / ".prefect" / "server.log").exists()  # the run history lives in the workspace
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 20
        while any(_alive(pid) for pid in server):
            assert time.monotonic() < deadline, f"server {server} outlived its idle time"
            time.sleep(0.2)
        assert not (
            ws / ".prefect" / "server.json"
        ).exists()  # unpublished: the next command starts a new one
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (home / ".prefect").exists()

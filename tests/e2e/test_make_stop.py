"""`make stop` in one checkout stops what that checkout's `make ui` started and its workspaces' kept servers, and
leaves another checkout's running. Two folders stand for two checkouts, each with the pid files `make ui` writes
(workspace/.prefect-ui/) and a workspace's kept server; the real Makefile's `stop` runs in one of them."""

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaign_cli import local_api
from deployments import ui
from tests.helpers.fake_servers import fake_kept_server
from tests.helpers.paths import REPO

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


@contextlib.contextmanager
def _ui_stack(checkout: Path):
    """Stand-ins for the server and worker `make ui` starts from `checkout` (pid files in its workspace/.prefect-ui)."""
    home = checkout / "workspace" / ".prefect-ui"
    home.mkdir(parents=True)
    pids = [
        ui._spawn(
            home,
            name,
            [sys.executable, "-c", "import time; time.sleep(120)", f"prefect-{name}"],
            {**os.environ},
        )
        for name in ("server", "worker")
    ]
    try:
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, 9)


def _gone(pid: int, timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while ui._running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not ui._running(pid)


BIN = Path(sys.executable).parent


def test_make_stop_in_one_checkout_leaves_the_other_running(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CAMPAIGN_CACHE_DIR", str(tmp_path / "cache"))  # the registry of kept servers
    a, b = tmp_path / "checkout-a", tmp_path / "checkout-b"
    with (
        _ui_stack(a) as a_stack,
        _ui_stack(b) as b_stack,
        fake_kept_server(a / "workspace" / "demo" / ".prefect") as a_kept,
        fake_kept_server(b / "workspace" / "demo" / ".prefect") as b_kept,
    ):
        out = subprocess.run(
            [
                "make",
                "--no-print-directory",
                "-C",
                str(a),
                "-f",
                str(REPO / "Makefile"),
                "stop",
                f"BIN={BIN}",
            ],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert all(_gone(pid) for pid in a_stack), out.stdout
        assert a_kept.wait(timeout=30) is not None
        # The other checkout's `make ui` stack and kept server run on.
        assert all(ui._running(pid) for pid in b_stack) and b_kept.poll() is None, out.stdout
        assert "stopped worker" in out.stdout and f"stopped {a / 'workspace' / 'demo'}: " in out.stdout
        assert [Path(i["workspace"]) for i in local_api.running_servers()] == [b / "workspace" / "demo"]

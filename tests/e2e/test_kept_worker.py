"""`campaign simulate` through the worker kept beside the workspace's server: the same result as in the command's
own process, the worker reused by the next command, and stopped with its server. Real processes."""

import json
import os
import subprocess
import sys

import pytest

from campaign_cli import local_api
from tests.helpers.paths import DEMO, REPO

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(600)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_simulate_through_the_kept_worker_matches_its_own_process_and_stops_with_the_server(tmp_path):
    ws = tmp_path / "w"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "CAMPAIGN_"))}
    env.update(HOME=str(tmp_path / "home"), CAMPAIGN_SERVER_IDLE_S="60", TMPDIR=str(tmp_path))
    command = [sys.executable, "-m", "campaign_cli.cli", "simulate", str(DEMO), "--replicas", "20", "--json"]
    command += ["--workspace", str(ws)]

    def simulate(**extra: str) -> dict:
        out = subprocess.run(
            command, cwd=REPO, env={**env, **extra}, capture_output=True, text=True, check=False
        )
        assert out.returncode == 0, out.stderr[-3000:]
        result = json.loads(out.stdout)
        result.pop("wall_s")
        return result

    simulate()  # makes the workspace
    through_worker = simulate()
    worker = json.loads((ws / ".prefect" / "worker.json").read_text())
    assert "campaign.sim.compiled (kernels loaded)" in worker["holds"]
    assert simulate() == through_worker
    assert json.loads((ws / ".prefect" / "worker.json").read_text())["pid"] == worker["pid"]  # reused
    assert simulate(CAMPAIGN_KEPT_WORKER="0") == through_worker

    # Bad input, with the worker running, is checked there (the command imports no config): the same error and
    # exit code as in the command's own process, and the worker goes on serving.
    def refused(**extra: str) -> str:
        out = subprocess.run(
            [*command, "--set", "plan.checkpoint.interval_s=-5"],
            cwd=REPO,
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 2, out.stderr[-3000:]
        assert "flow run" not in out.stderr.lower()  # refused before a flow run starts
        return out.stderr[out.stderr.index("plan.checkpoint.interval_s") :]

    assert refused() == refused(CAMPAIGN_KEPT_WORKER="0")
    assert simulate() == through_worker
    assert json.loads((ws / ".prefect" / "worker.json").read_text())["pid"] == worker["pid"]
    subprocess.run(
        [sys.executable, "-m", "campaign_cli.cli", "server", "stop", str(ws)], cwd=REPO, env=env, check=True
    )
    assert local_api.process_start(worker["pid"]) is None  # stopped with its server
    assert not (ws / ".prefect" / "worker.json").exists()

"""A real Prefect server, `prefect deploy`, a process worker, and the demo campaign run to completion through it."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
from tests.paths import FAST_REHEARSAL

pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "prefect server exited"
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.read().strip() == b"true":
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError("prefect server did not become healthy")


def _stop(proc: subprocess.Popen, sig: int) -> None:
    os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect_home")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": api, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_LOGGING_LEVEL": "WARNING", "PREFECT_WORKER_QUERY_SECONDS": "2", "PREFECT_WORKER_PREFETCH_SECONDS": "2"}
    log = open(home / "server.log", "w")  # noqa: SIM115 - must outlive the server process
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_healthy(api, proc)
        yield env
    finally:
        _stop(proc, signal.SIGTERM)
        log.close()


def _prefect(env, *args) -> str:
    result = subprocess.run([str(BIN / "prefect"), *args], check=False, env=env, cwd=REPO, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _python(env, code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, env=env, cwd=REPO, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_deploy_worker_and_run_the_demo_to_completion(server, tmp_path):
    env = server
    _prefect(env, "work-pool", "create", "campaign-pool", "--type", "process")
    _prefect(env, "--no-prompt", "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")

    names = json.loads(_python(env, """
        import asyncio, json
        from prefect.client.orchestration import get_client
        async def main():
            async with get_client() as client:
                deployments = await client.read_deployments()
                print(json.dumps({d.name: d.parameter_openapi_schema for d in deployments}))
        asyncio.run(main())
    """))
    assert {"campaign-demo", "prepare-nightly", "validate", "commit", "execute-window", "analyse",
            "simulate"} <= set(names)
    # The UI builds its form from this schema: a typed StageParams model, not a free-form dict.
    assert "StageParams" in json.dumps(names["validate"])

    worker_log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 - must outlive the worker
    worker = subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool", "campaign-pool", "--limit", "2"],
                              env=env, cwd=REPO, stdout=worker_log, stderr=subprocess.STDOUT, start_new_session=True)
    ws = tmp_path / "w"
    demo = tmp_path / "demo_inputs"
    params = {"config": str(REPO / "configs/campaigns/demo.yaml"), "workspace": str(ws), "overrides": [
        f"data.demo_corpus_dir={demo}", f"data.sources.0.path={demo}/web/*.jsonl",
        f"data.sources.1.path={demo}/docs/*.parquet", *FAST_REHEARSAL]}
    try:
        state = _python(env, f"""
            from prefect.deployments import run_deployment
            run = run_deployment("campaign/campaign-demo", parameters={{"params": {params!r}}}, timeout=480)
            print(run.state.type.value)
        """)
        assert state == "COMPLETED", (tmp_path / "worker.log").read_text()[-3000:]
        assert (ws / "report" / "report.md").exists()
        # The lifecycle executed its window once, itself: nothing is left scheduled to execute it again.
        assert _python(env, """
            import asyncio
            from prefect.client.orchestration import get_client
            from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
            async def main():
                async with get_client() as client:
                    runs = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                        name=FlowRunFilterName(like_="window-c-")))
                    print(len(runs))
            asyncio.run(main())
        """) == "0"

        # Run as its own deployment, commit schedules the execute deployment at the window's start (once).
        scheduled = _python(env, f"""
            import asyncio
            from prefect.deployments import run_deployment
            from prefect.client.orchestration import get_client
            from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
            run = run_deployment("commit/commit", parameters={{"params": {params!r}}}, timeout=300)
            assert run.state.type.value == "COMPLETED", run.state
            async def main():
                async with get_client() as client:
                    runs = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                        name=FlowRunFilterName(like_="window-c-")))
                    print(",".join(f"{{r.state.type.value}}@{{r.expected_start_time.isoformat()}}" for r in runs))
            asyncio.run(main())
        """)
        # The demo books `window.start: auto` on a UTC midnight: the start its commitment recorded.
        with duckdb.connect(str(ws / "campaign.duckdb"), read_only=True) as con:
            (booked,) = con.execute("SELECT window_start FROM commitments ORDER BY created_at DESC").fetchone()
        assert booked.astimezone(UTC).hour == 0 and booked > datetime.now(UTC)
        assert scheduled == f"SCHEDULED@{booked.astimezone(UTC).isoformat()}"
    finally:
        _stop(worker, signal.SIGINT)  # a Prefect worker ignores SIGTERM's first delivery
        worker_log.close()

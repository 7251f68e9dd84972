"""A shared Prefect server on PostgreSQL, as docs/prefect-server-postgres.md describes it: a private PostgreSQL
cluster (Debian's `postgresql` package) on a free loopback port, `prefect server start` against it, a campaign flow
run recorded in it. Skipped, saying why, where the PostgreSQL binaries are absent."""

import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from deployments.ui import free_port
from tests.helpers.paths import REPO

pytestmark = pytest.mark.e2e
BIN = os.path.dirname(sys.executable)


def _pg_bin() -> str | None:
    """Debian keeps the server binaries out of PATH, under /usr/lib/postgresql/<version>/bin (with createdb and
    psql beside them); elsewhere, the folder of `pg_ctl` on PATH if it has them too."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    candidates = [os.path.dirname(v) for v in reversed(versions)]
    if shutil.which("pg_ctl"):
        candidates.append(os.path.dirname(shutil.which("pg_ctl")))
    for folder in candidates:
        if all(os.access(os.path.join(folder, b), os.X_OK) for b in ("initdb", "pg_ctl", "createdb", "psql")):
            return folder
    return None


PG_BIN = _pg_bin()


def _as_postgres() -> list[str]:
    """initdb and postgres refuse to run as root: run them as the package's `postgres` user then."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and there is no `postgres` user to run PostgreSQL as")
    return ["runuser", "-u", "postgres", "--"]


@pytest.fixture(scope="module")
def postgres():
    if PG_BIN is None:
        pytest.skip(
            "PostgreSQL is not installed (no initdb, pg_ctl, createdb and psql together under "
            "/usr/lib/postgresql/*/bin or on PATH); "
            "`apt-get install postgresql` provides it"
        )
    prefix = _as_postgres()
    # Not under pytest's tmp folder: that is private to this user, and PostgreSQL may run as `postgres`.
    root = Path(tempfile.mkdtemp(prefix="campaign-pg-"))
    data = root / "data"
    if prefix:
        shutil.chown(root, "postgres")
    port = free_port()
    subprocess.run(
        [*prefix, f"{PG_BIN}/initdb", "-D", str(data), "-U", "prefect", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    subprocess.run(
        [
            *prefix,
            f"{PG_BIN}/pg_ctl",
            "-D",
            str(data),
            "-l",
            str(root / "pg.log"),
            "-w",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {port} -k {root}",
            "start",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        subprocess.run(
            [f"{PG_BIN}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "prefect", "prefect"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        yield f"postgresql+asyncpg://prefect@127.0.0.1:{port}/prefect", port
    finally:
        subprocess.run(
            [*prefix, f"{PG_BIN}/pg_ctl", "-D", str(data), "-m", "fast", "stop"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


def test_a_prefect_server_on_postgres_records_campaign_runs(postgres, tmp_path):
    url, port = postgres
    api_port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path),
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": url,
        "PREFECT_API_URL": f"http://127.0.0.1:{api_port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - must outlive the server process
    server = subprocess.Popen(
        [
            f"{BIN}/prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(api_port),
            "--no-services",
            "--no-ui",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{env['PREFECT_API_URL']}/health", timeout=2) as response:
                    if response.read().strip() == b"true":
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "prefect server on PostgreSQL did not become healthy"
            time.sleep(0.5)
        # A campaign flow through the shared server: `campaign plan` needs no workspace.
        code = textwrap.dedent("""
            from prefect import flow
            from campaign.config import load_config
            from campaign.plan import make_plan

            @flow(name="plan-on-shared-server")
            def plan_flow(path: str) -> float:
                return make_plan(load_config(path).config).expected_days

            print(plan_flow("configs/campaigns/demo.yaml"))
        """)
        run = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        rows = subprocess.run(
            [
                f"{PG_BIN}/psql",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "prefect",
                "-d",
                "prefect",
                "-tAc",
                "SELECT f.name, r.state_type FROM flow_run r JOIN flow f ON f.id = r.flow_id",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.split()
        assert "plan-on-shared-server|COMPLETED" in rows
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()

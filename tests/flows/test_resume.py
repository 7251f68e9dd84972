"""A lifecycle killed mid-way and started again ends with the same catalog as an uninterrupted one."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pytest

from tests.helpers.paths import DEMO, set_args

# Result tables and the columns that identify their content (run ids, timestamps and random ids left out).
CONTENT = {
    "datasets": "data_digest, source, file, n_input, n_documents, n_rejected, n_tokens, n_bytes, sha256",
    "rejections": "data_digest, source, reason, n_documents",
    "gates": "gate, passed, config_digest, data_digest, details",
    "commitments": "window_start, window_end, config_digest, data_digest, approved_by",
    "sim_replicas": "replica, seed, ettr, tokens_trained, completed",
    "sim_events": "replica, event_id, t_s, kind, category, scope, node, tokens_trained, detail",
    "sim_power": "replica, t_s, power_mw",
}
KEYS = {
    "datasets": "data_digest, source",
    "rejections": "data_digest, source, reason",
    "gates": "run_id, gate",
    "commitments": "config_digest, data_digest",
    "sim_replicas": "commitment_id, replica",
    "sim_events": "commitment_id, replica, event_id",
    "sim_power": "commitment_id, replica, t_s",
}


def _env() -> dict:
    from prefect.settings import PREFECT_API_URL

    # Subprocesses talk to the session's test API instead of starting their own.
    return {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_LEVEL": "WARNING"}


def _run(ws: Path, overrides: list[str], kill_when: Path | None = None) -> int:
    cmd = [sys.executable, "-m", "campaign_cli.cli", "run", str(DEMO), "--workspace", str(ws)]
    cmd += set_args(overrides)
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if kill_when is None:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        return 0
    deadline = time.monotonic() + 600
    while not kill_when.exists():
        assert proc.poll() is None, f"finished before the kill point: {proc.communicate()[1]}"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return proc.returncode


def _gate_content(row: tuple) -> tuple:
    """A gate row as content: which run a reused result came from left out, and the rehearsal's observed kill point
    written as N: the supervisor kills the trainer once its
    metrics show the kill step, and whether the trainer wrote one more step before the signal landed is real timing
    (step 31 or 32 on the same data), not catalog content."""
    gate, passed, config_digest, data_digest, details = row
    detail = json.loads(details)
    # A resumed validate reuses the gates its killed predecessor judged (campaign/reuse.py): the run it names and
    # when it checked are run identity and time, not content.
    detail.pop("reused_from", None)
    if gate != "rehearsal":
        return gate, passed, config_digest, data_digest, json.dumps(detail, sort_keys=True)
    detail.pop("killed_at_step", None)
    text = json.dumps(detail, sort_keys=True)
    text = re.sub(r"killed at step \d+", "killed at step N", text)
    text = re.sub(r"\(\d+ before the kill\)", "(N before the kill)", text)
    return gate, passed, config_digest, data_digest, text


def _snapshot(ws: Path) -> dict[str, list]:
    con = duckdb.connect(str(ws / "campaign.duckdb"), read_only=True)
    try:
        snap = {}
        for table, cols in CONTENT.items():
            # gates: every validate run records a verdict; the newest one for the committed digests is what counts
            where = (
                "WHERE run_id = (SELECT run_id FROM gates ORDER BY checked_at DESC LIMIT 1)"
                if table == "gates"
                else ""
            )
            snap[table] = con.execute(f"SELECT {cols} FROM {table} {where} ORDER BY ALL").fetchall()
            if table == "gates":
                snap[table] = [_gate_content(row) for row in snap[table]]
            total, distinct = con.execute(
                f"SELECT count(*), count(DISTINCT ({KEYS[table]})) FROM {table}"
            ).fetchone()
            assert total == distinct, f"duplicate rows in {table}"
        return snap
    finally:
        con.close()


def _commitments(ws: Path) -> list[tuple]:
    con = duckdb.connect(
        str(ws / "campaign.duckdb")
    )  # read-write: replays what a killed writer left in the WAL
    try:
        return con.execute(
            "SELECT commitment_id, window_start, window_end FROM commitments ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()


def _utc_day() -> date:
    return datetime.now(UTC).date()


@pytest.fixture(scope="module")
def reference(tmp_path_factory, demo_inputs) -> tuple[Path, date]:
    """One uninterrupted lifecycle, the same for every kill point (a full demo run: the slowest part of each test),
    and the UTC day it started on."""
    day = _utc_day()
    ws = tmp_path_factory.mktemp("resume") / "r" / "reference"
    _run(ws, demo_inputs)
    return ws, day


@pytest.mark.timeout(900)  # the reference lifecycle, then one killed twice and resumed
def test_killed_lifecycle_resumes_to_the_same_catalog(tmp_path, demo_inputs, reference):
    """Killed inside prepare, started again and killed after its commitment, started again: the same catalog as an
    uninterrupted run. (Its own folder, so it books its window on its own cluster calendar, calendars/ beside it.)"""
    reference, day = reference
    killed = tmp_path / "k" / "killed"

    # 1. killed inside prepare (record-dataset follows the manifest)
    assert _run(killed, demo_inputs, kill_when=killed / "data" / "manifest.json") == -signal.SIGKILL
    # 2. started again: it reuses the prepared data, and is killed once its window is booked
    assert _run(killed, demo_inputs, kill_when=killed / "commitments") == -signal.SIGKILL
    recorded = _commitments(killed)
    # 3. started again: finishes, reusing what completed
    _run(killed, demo_inputs)

    got, want = _snapshot(killed), _snapshot(reference)
    if _utc_day() != day:
        # The demo books `window.start: auto` on the first free UTC midnight: two runs on either side of a midnight
        # book consecutive days (the simulated window, which starts at midnight either way, is the same).
        for snap in (got, want):
            snap["commitments"] = [(end - start, *rest) for start, end, *rest in snap["commitments"]]
    for table in CONTENT:  # table by table, so a failure names the table that differs
        assert got[table] == want[table], table
    if recorded:  # killed after the commitment: the resumed run reuses it and the window it booked
        assert _commitments(killed) == recorded
    con = duckdb.connect(str(killed / "campaign.duckdb"), read_only=True)
    statuses = [r[0] for r in con.execute("SELECT status FROM runs").fetchall()]
    con.close()
    # the run killed inside prepare is on record, not silently forgotten (after commitments/ appears the second kill
    # may land between two stages, with no stage running to abandon)
    assert "abandoned" in statuses

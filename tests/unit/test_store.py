"""The workspace catalog: idempotent writes, the lock, abandoned runs."""

import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import pytest

from campaign import store
from campaign.errors import WorkspaceBusy


def _commitment(cid: str, config: str = "c" * 64, data: str = "d" * 64) -> store.Commitment:
    t = datetime(2027, 1, 4, tzinfo=UTC)
    return store.Commitment(cid, t, t, config, data, "tester", "run-1", t)


def test_schema_has_the_design_tables(tmp_path):
    ws = store.Workspace(tmp_path)
    with store.catalog(ws) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert {"runs", "datasets", "rejections", "gates", "commitments", "sim_events", "sim_power",
            "sim_replicas"} <= tables


def test_gates_are_recorded_once_per_digest_pair(tmp_path):
    ws = store.Workspace(tmp_path)
    rows = [("layout", True, {"summary": "ok"}), ("memory", False, {"summary": "too big"})]
    assert store.record_gates(ws, "r1", "c1", "d1", rows) == 2
    assert store.record_gates(ws, "r2", "c1", "d1", rows) == 0   # a rerun adds nothing
    assert store.record_gates(ws, "r3", "c1", "d2", rows) == 2   # new data, new rows
    got = store.gates_for(ws, "c1", "d1")
    assert got["layout"].passed and not got["memory"].passed
    assert got["memory"].details["summary"] == "too big"


def test_commitment_is_booked_once_per_digest_pair(tmp_path):
    ws = store.Workspace(tmp_path)
    first = store.record_commitment(ws, _commitment("c-1"))
    again = store.record_commitment(ws, _commitment("c-2"))
    assert again.commitment_id == first.commitment_id == "c-1"
    assert len(store.commitments(ws)) == 1


def test_runs_left_running_by_a_dead_process_are_marked_abandoned(tmp_path):
    ws = store.Workspace(tmp_path)
    first = store.start_run(ws, "prepare", "c", None)
    second = store.start_run(ws, "prepare", "c", None)
    store.finish_run(ws, second, "completed")
    with store.catalog(ws) as con:
        status = dict(con.execute("SELECT run_id, status FROM runs").fetchall())
    assert status == {first: "abandoned", second: "completed"}


def test_lock_is_reentrant_in_one_process(tmp_path):
    ws = store.Workspace(tmp_path)
    with store.locked(ws, "outer"), store.locked(ws, "inner"):
        assert (tmp_path / ".lock.json").exists()
    assert not (tmp_path / ".lock.json").exists()


def test_second_process_stops_with_a_message_naming_the_holder(tmp_path):
    ws = store.Workspace(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from campaign import store
        with store.locked(store.Workspace(__import__('pathlib').Path({str(tmp_path)!r})), "campaign validate"):
            print("held", flush=True)
            time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(WorkspaceBusy) as err, store.locked(ws, "campaign execute", wait_s=0.2):
            pass
        assert f"pid {holder.pid}" in err.value.render() and "campaign validate" in err.value.render()
        assert "fix:" in err.value.render()
    finally:
        holder.kill()
        holder.wait()
    # A killed holder releases the lock by itself.
    with store.locked(ws, "campaign execute", wait_s=2):
        pass


def test_catalog_held_by_another_program_is_a_clear_busy_error(tmp_path):
    ws = store.Workspace(tmp_path)
    with store.catalog(ws):
        pass
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import duckdb, time
        con = duckdb.connect({str(ws.catalog_path)!r})
        print("open", flush=True)
        time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(WorkspaceBusy, match="the catalog is open in another program"), store.catalog(ws):
            pass
    finally:
        holder.kill()
        holder.wait()

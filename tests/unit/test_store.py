"""The workspace catalog: idempotent writes, the lock, abandoned runs."""

import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import pytest

from campaign import store
from campaign.errors import WorkspaceBusy
from campaign.gate_result import GateResult


def _commitment(cid: str, config: str = "c" * 64, data: str = "d" * 64) -> store.Commitment:
    t = datetime(2027, 1, 4, tzinfo=UTC)
    return store.Commitment(cid, t, t, config, data, "tester", "run-1", t)


def test_schema_has_the_design_tables(tmp_path):
    ws = store.Workspace(tmp_path)
    with store.catalog(ws) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert {
        "runs",
        "datasets",
        "rejections",
        "gates",
        "commitments",
        "sim_events",
        "sim_power",
        "sim_replicas",
    } <= tables


def test_every_validate_run_records_its_own_verdict_and_the_newest_counts(tmp_path):
    ws = store.Workspace(tmp_path)
    passing = [GateResult("layout", True, "ok"), GateResult("memory", True, "fits")]
    failing = [GateResult("layout", True, "ok"), GateResult("memory", False, "too big")]
    assert store.record_gates(ws, "r1", "c1", "d1", passing) == 2
    assert store.record_gates(ws, "r1", "c1", "d1", passing) == 0  # a retry within the same run adds nothing
    assert store.latest_gates(ws, "c1", "d1")["memory"].passed
    assert store.record_gates(ws, "r2", "c1", "d1", failing) == 2  # a later validate of the same digests...
    got = store.latest_gates(ws, "c1", "d1")  # ...replaces the verdict that counts
    assert got["layout"].passed and not got["memory"].passed and got["memory"].run_id == "r2"
    assert got["memory"].details["summary"] == "too big"
    store.record_gates(ws, "r3", "c1", "d1", passing)  # and fixing it counts again
    assert store.latest_gates(ws, "c1", "d1")["memory"].passed
    assert store.latest_gates(ws, "c1", "d2") == {}  # other data: nothing recorded


def test_a_version_1_catalog_is_migrated_with_its_gates(tmp_path):
    import duckdb

    con = duckdb.connect(str(tmp_path / "campaign.duckdb"))
    con.execute(
        "CREATE TABLE gates (run_id VARCHAR NOT NULL, gate VARCHAR NOT NULL, passed BOOLEAN NOT NULL, "
        "config_digest VARCHAR NOT NULL, data_digest VARCHAR NOT NULL, details JSON, "
        "checked_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (gate, config_digest, data_digest))"
    )
    con.execute("INSERT INTO gates VALUES ('r1', 'layout', true, 'c', 'd', '{}', now())")
    con.close()
    ws = store.Workspace(tmp_path)
    assert store.latest_gates(ws, "c", "d")["layout"].passed
    store.record_gates(ws, "r2", "c", "d", [GateResult("layout", False, "")])  # allowed now: one row per run
    assert not store.latest_gates(ws, "c", "d")["layout"].passed


def test_a_damaged_catalog_is_bad_input_not_a_busy_workspace(tmp_path):
    from campaign.errors import DataError

    (tmp_path / "campaign.duckdb").write_bytes(b"")
    with pytest.raises(DataError, match="damaged") as err, store.catalog(store.Workspace(tmp_path)):
        pass
    assert "mv " in err.value.fix and err.value.exit_code == 2
    (tmp_path / "campaign.duckdb").write_bytes(b"DUCK" * 5000)
    with pytest.raises(DataError, match="damaged"), store.catalog(store.Workspace(tmp_path)):
        pass


def test_a_workspace_is_never_a_folder_campaign_does_not_own(tmp_path):
    from campaign.errors import ConfigError, Refused

    theirs = tmp_path / "theirs"
    (theirs / "data" / "clean").mkdir(parents=True)
    (theirs / "data" / "clean" / "my_curated_corpus.parquet").write_bytes(b"precious")
    with pytest.raises(ConfigError, match="not a campaign workspace"):
        store.adopt_workspace(store.Workspace(theirs), "demo")
    assert sorted(p.name for p in theirs.rglob("*")) == ["clean", "data", "my_curated_corpus.parquet"]
    new = store.adopt_workspace(store.Workspace(tmp_path / "new"), "demo")
    assert store.is_workspace(new) and store.adopt_workspace(new, "demo") == new  # adopting again is fine
    with pytest.raises(Refused, match="no campaign workspace"):
        store.require_workspace(store.Workspace(tmp_path / "missing"), "campaign execute")
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("value", ["abc", "nan", "-1", "inf"])
def test_a_bad_lock_wait_is_a_config_error(monkeypatch, value):
    from campaign.errors import ConfigError

    monkeypatch.setenv("CAMPAIGN_LOCK_WAIT_S", value)
    with pytest.raises(ConfigError, match="CAMPAIGN_LOCK_WAIT_S"):
        store.lock_wait_s()


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
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys, time
        from campaign import store
        with store.locked(store.Workspace(__import__('pathlib').Path({str(tmp_path)!r})), "campaign validate"):
            print("held", flush=True)
            time.sleep(30)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
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
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import duckdb, time
        con = duckdb.connect({str(ws.catalog_path)!r})
        print("open", flush=True)
        time.sleep(30)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(WorkspaceBusy, match="the catalog is open in another program"), store.catalog(ws):
            pass
    finally:
        holder.kill()
        holder.wait()


def _reader_holding(ws, seconds: float) -> subprocess.Popen:
    """Another process with the catalog open read-only, as `campaign sql` has it while a query runs."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import duckdb, time
        con = duckdb.connect({str(ws.catalog_path)!r}, read_only=True)
        print("open", flush=True)
        time.sleep({seconds})
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
    return holder


def test_a_reader_holding_the_catalog_stops_a_stage_before_its_work(tmp_path, monkeypatch):
    ws = store.Workspace(tmp_path)
    with store.catalog(ws):
        pass
    monkeypatch.setenv("CAMPAIGN_LOCK_WAIT_S", "0.5")
    holder = _reader_holding(ws, 60)
    try:
        with pytest.raises(WorkspaceBusy, match="the catalog is open in another program") as err:
            store.start_run(ws, "validate", "c" * 64, None)  # the first write of a stage, before any gate
        assert "campaign sql" in err.value.fix
    finally:
        holder.kill()
        holder.wait()


def test_a_stage_verdict_waits_for_a_reader_instead_of_losing_the_work(tmp_path, monkeypatch):
    ws = store.Workspace(tmp_path)
    run_id = store.start_run(ws, "validate", "c" * 64, "d" * 64)
    monkeypatch.setenv("CAMPAIGN_LOCK_WAIT_S", "0")
    holder = _reader_holding(ws, 2)  # a query that ends while the gates' verdict waits
    try:
        written = store.record_gates(
            ws, run_id, "c" * 64, "d" * 64, [GateResult("layout", True, "", {"figure": "ok"})]
        )
    finally:
        holder.kill()
        holder.wait()
    assert written == 1

"""The lifecycle through the CLI and the flows, on the demo config, against one Prefect test harness."""

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from campaign.gates import REQUIRED_GATES
from flows.cli import main

from .conftest import DEMO, set_args


def _catalog(ws: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(ws / "campaign.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_run_demo_end_to_end(tmp_path, demo_inputs, capsys):
    ws = tmp_path / "w"
    assert main(["run", str(DEMO), "--workspace", str(ws), *set_args(demo_inputs)]) == 0
    stages = {r[0] for r in _catalog(ws, "SELECT stage FROM runs WHERE status = 'completed'")}
    assert {"prepare", "validate", "commit", "execute", "analyse"} <= stages
    gates = _catalog(ws, "SELECT gate, passed FROM gates")
    assert len(gates) == len(REQUIRED_GATES) and all(passed for _, passed in gates)
    assert _catalog(ws, "SELECT count(*) FROM commitments")[0][0] == 1
    assert _catalog(ws, "SELECT count(*) FROM sim_events")[0][0] > 0
    # Commit wrote the facility power notice beside the commitment (issue 9).
    commitment_id = _catalog(ws, "SELECT commitment_id FROM commitments")[0][0]
    notice = json.loads((ws / "commitments" / f"{commitment_id}-power.json").read_text())
    assert notice["smoothing_tradeoff"] and "Largest swing" in (ws / "commitments" / f"{commitment_id}-power.md").read_text()
    report = (ws / "report" / "report.md").read_text()
    assert "ETTR" in report and (ws / "report" / "power.png").exists()
    # Input = kept + rejected for every source, and every rejected document is kept with its reason.
    manifest = json.loads((ws / "data" / "manifest.json").read_text())
    for source in manifest["sources"]:
        assert source["n_input"] == source["n_kept"] + source["n_rejected"]
        rejected = pq.read_table(ws / "data" / "rejected" / f"{source['name']}.parquet")
        assert rejected.num_rows == source["n_rejected"]
        assert all(rejected.column("reason").to_pylist())

    capsys.readouterr()
    assert main(["analyse", "--workspace", str(ws), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("ettr", "goodput_breakdown_gpu_h", "interruptions", "observed_job_mtbf_h", "checkpoint_interval_s",
                "power_mw", "energy_mwh", "cost_usd", "tokens_trained", "tokens_target"):
        assert key in result
    assert set(result["goodput_breakdown_gpu_h"]) == {"productive", "lost_rework", "checkpoint", "restart",
                                                      "waiting", "idle", "idle_spares", "idle_released"}
    assert 0.0 <= result["window_utilisation"] <= result["ettr"] <= 1.0

    # Running it again adds no duplicate rows: every stage's results are keyed by what produced them; the one
    # exception is by design: validate records a fresh verdict (one row per gate) on every run.
    tables = ("datasets", "rejections", "gates", "commitments", "sim_events", "sim_power", "sim_replicas")
    before = {t: _catalog(ws, f"SELECT count(*) FROM {t}")[0][0] for t in tables}
    assert main(["run", str(DEMO), "--workspace", str(ws), *set_args(demo_inputs)]) == 0
    after = {t: _catalog(ws, f"SELECT count(*) FROM {t}")[0][0] for t in tables}
    assert after == {**before, "gates": before["gates"] + len(REQUIRED_GATES)}


def test_failed_gate_stops_the_lifecycle_before_commit(tmp_path, demo_inputs, capsys):
    ws = tmp_path / "w"
    sets = set_args([*demo_inputs, "gates.data.min_documents=1000000"])
    assert main(["run", str(DEMO), "--workspace", str(ws), *sets]) == 1
    err = capsys.readouterr().err
    assert "data_volume" in err and "min_documents" in err and "Traceback" not in err
    assert _catalog(ws, "SELECT count(*) FROM commitments")[0][0] == 0
    assert _catalog(ws, "SELECT count(*) FROM sim_replicas")[0][0] == 0
    failed = {g for (g,) in _catalog(ws, "SELECT gate FROM gates WHERE NOT passed")}
    assert failed == {"data_quality", "data_volume"}  # GX's row-count expectation and the volume gate


def test_validate_prints_the_gate_table_and_exits_1_on_failure(tmp_path, demo_inputs, capsys):
    ws = tmp_path / "w"
    sets = set_args(demo_inputs)
    assert main(["prepare", str(DEMO), "--workspace", str(ws), *sets]) == 0
    # 4 GiB of HBM cannot hold the demo model with this layout: the memory gate fails.
    assert main(["validate", str(DEMO), "--workspace", str(ws), *sets, "--set", "cluster.accelerator.hbm_gib=4"]) == 1
    out = capsys.readouterr().out
    assert "memory" in out and "FAIL" in out and "data_quality" in out and "PASS" in out

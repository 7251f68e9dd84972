"""The lifecycle through the CLI and the flows, on the demo config, against one Prefect test harness."""

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from prefect.client.orchestration import get_client

from campaign.data.indexed import read_indexed
from campaign.gates import REQUIRED_GATES
from campaign_cli.cli import main
from tests.helpers.paths import DEMO, REPO, set_args
from tests.helpers.prefect_api import (
    flow_runs_since,
    latest_artifact,
    latest_flow_run,
    log_messages,
    task_runs_of,
)


def _readme_figures():
    """benchmarks/readme_figures.py, the script that writes the README's demo figures (benchmarks is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_figures", REPO / "benchmarks" / "readme_figures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _catalog(ws: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(ws / "campaign.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.timeout(900)  # two whole lifecycles
def test_run_demo_end_to_end(tmp_path, demo_inputs, capsys):
    ws = tmp_path / "w"
    started = datetime.now(UTC)
    assert main(["run", str(DEMO), "--workspace", str(ws), *set_args(demo_inputs)]) == 0
    _every_run_is_named(flow_runs_since(started))
    stages = {r[0] for r in _catalog(ws, "SELECT stage FROM runs WHERE status = 'completed'")}
    assert {"prepare", "validate", "commit", "execute", "analyse"} <= stages
    gates = _catalog(ws, "SELECT gate, passed FROM gates")
    assert len(gates) == len(REQUIRED_GATES) and all(passed for _, passed in gates)
    assert _catalog(ws, "SELECT count(*) FROM commitments")[0][0] == 1
    assert _catalog(ws, "SELECT count(*) FROM sim_events")[0][0] > 0
    # Commit wrote the facility power notice beside the commitment.
    commitment_id = _catalog(ws, "SELECT commitment_id FROM commitments")[0][0]
    notice = json.loads((ws / "commitments" / f"{commitment_id}-power.json").read_text())
    assert (
        notice["smoothing_tradeoff"]
        and "Largest swing" in (ws / "commitments" / f"{commitment_id}-power.md").read_text()
    )
    report = (ws / "report" / "report.md").read_text()
    assert "ETTR" in report and "<svg" in (ws / "report" / "report.html").read_text()
    # Input = kept + rejected for every source, and every rejected document is kept with its reason.
    manifest = json.loads((ws / "data" / "manifest.json").read_text())
    for source in manifest["sources"]:
        assert source["n_input"] == source["n_kept"] + source["n_rejected"]
        rejected = pq.read_table(ws / "data" / "rejected" / f"{source['name']}.parquet")
        assert rejected.num_rows == source["n_rejected"]
        assert all(rejected.column("reason").to_pylist())
    # `make run` writes the training shards (one indexed dataset per source, the clean documents each) and the
    # blend of the configured weights; the rehearsal trained on the shards' ids.
    blend = (ws / "data" / "tokenized" / "blend.txt").read_text().split()
    assert blend[1::2] == [f"tokenized/{s['name']}" for s in manifest["sources"]]
    assert [float(w) for w in blend[::2]] == [s["weight"] for s in manifest["sources"]]
    for source in manifest["sources"]:
        assert len(read_indexed(ws / "data" / source["tokenized"]["prefix"])) == source["n_kept"]
    sample = json.loads((ws / "rehearsal" / "sample" / "sample.json").read_text())
    assert sample["checks"]["ids_from"] == "training shards" and sample["checks"]["n_shard_mismatch"] == 0

    run_text = capsys.readouterr().out
    assert main(["analyse", "--workspace", str(ws), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    _every_figure_agrees(ws, run_text, result)
    for key in (
        "ettr",
        "goodput_breakdown_gpu_h",
        "interruptions",
        "observed_job_mtbf_h",
        "checkpoint_interval_s",
        "power_mw",
        "energy_mwh",
        "cost_usd",
        "tokens_trained",
        "tokens_target",
    ):
        assert key in result
    assert set(result["goodput_breakdown_gpu_h"]) == {
        "productive",
        "lost_rework",
        "checkpoint",
        "restart",
        "waiting",
        "idle",
        "idle_spares",
        "idle_released",
    }
    assert 0.0 <= result["window_utilisation"] <= result["ettr"] <= 1.0
    # The README's demo figures are this run's: benchmarks/readme_figures.py writes them from a real `make run`.
    figures = _readme_figures()
    analysis = json.loads((ws / "report" / "analysis.json").read_text())
    generated = figures.blocks(figures.demo_figures(analysis), [""] * len(figures.QUERIES))
    written = figures.block_bodies((REPO / "README.md").read_text())
    assert written["readme-figures"] == generated["readme-figures"], "run benchmarks/readme_figures.py"

    # Running it again adds no duplicate rows: every stage's results are keyed by what produced them; the one
    # exception is by design: validate records a fresh verdict (one row per gate) on every run.
    tables = ("datasets", "rejections", "gates", "commitments", "sim_events", "sim_power", "sim_replicas")
    before = {t: _catalog(ws, f"SELECT count(*) FROM {t}")[0][0] for t in tables}
    assert main(["run", str(DEMO), "--workspace", str(ws), *set_args(demo_inputs)]) == 0
    after = {t: _catalog(ws, f"SELECT count(*) FROM {t}")[0][0] for t in tables}
    assert after == {**before, "gates": before["gates"] + len(REQUIRED_GATES)}


# A flow's runs are named `<stage>-<campaign>-<UTC time>` (its stage: the flow's name; the lifecycle's: `lifecycle`).
STAGE_OF_FLOW = {"campaign": "lifecycle"}


def _every_run_is_named(runs: list) -> None:
    """No flow or subflow run of the demo has a name Prefect generated (`crouching-petrel`): each says its stage, the
    campaign and when it started (the workspace folder is `w`, so a name from the folder would read `-w-`)."""
    flows = {}
    with get_client(sync_client=True) as client:
        for run in runs:
            flows.setdefault(run.flow_id, client.read_flow(run.flow_id).name)
    named = sorted((flows[r.flow_id], r.name) for r in runs)
    assert {"campaign", "prepare", "prepare-shards", "validate", "commit", "execute", "analyse"} <= {
        f for f, _ in named
    }, named
    for flow, name in named:
        stage = STAGE_OF_FLOW.get(flow, flow)
        assert re.fullmatch(rf"{stage}-demo-\d{{8}}-\d{{6}}", name), (flow, name)


def _every_figure_agrees(ws: Path, run_text: str, analyse_json: dict) -> None:
    """Each figure of this demo run that more than one output shows (the command's text, analyse --json,
    report.md and report.html, analysis.json, the Prefect artifacts, the schedule gate's message) reads the same."""
    from tests.helpers.figure_agreement import disagreements, outputs_of

    kinds = ("campaign-report", "campaign-summary", "execute-summary", "goodput", "gates-detail", "gates")
    artifacts = {}
    for kind in kinds:
        found = latest_artifact(f"{kind}-demo")
        assert found is not None, kind
        artifacts[kind] = {"data": found.data, "description": found.description}
    [(details,)] = _catalog(ws, "SELECT details FROM gates WHERE gate = 'schedule'")
    schedule = json.loads(details)
    report = ws / "report"
    outputs = outputs_of(
        run_text,
        (report / "report.md").read_text(),
        (report / "report.html").read_text(),
        artifacts,
        schedule["summary"],
    )
    analysis = json.loads((report / "analysis.json").read_text())
    assert disagreements(outputs, analysis, analyse_json, schedule) == []
    # The SQL views (`campaign sql`) carry the same figures: the executed window's summary as the catalog holds it.
    from campaign.analysis.catalog_sql import run_query
    from tests.helpers.figure_agreement import sql_disagreements

    _, [(summary,)] = run_query(ws, "select summary from executed_window")
    _, gates = run_query(ws, "select details from gate_figures where gate = 'schedule'")
    assert sql_disagreements(json.loads(summary), json.loads(gates[0][0]), analysis) == []


@pytest.fixture()
def prepared(demo_prepared, tmp_path) -> Path:
    """A copy of the run's prepared demo workspace (conftest.py): the tests of a failing gate start from it
    (prepare reads no gate setting)."""
    return demo_prepared.restore_to(tmp_path / "w")


def test_failed_gate_stops_the_lifecycle_before_commit(prepared, demo_inputs, capsys):
    ws = prepared
    sets = set_args([*demo_inputs, "gates.data.min_documents=1000000"])
    assert main(["run", str(DEMO), "--workspace", str(ws), *sets]) == 1
    err = capsys.readouterr().err
    assert "data_volume" in err and "min_documents" in err and "Traceback" not in err
    assert _catalog(ws, "SELECT count(*) FROM commitments")[0][0] == 0
    assert _catalog(ws, "SELECT count(*) FROM sim_replicas")[0][0] == 0
    failed = {g for (g,) in _catalog(ws, "SELECT gate FROM gates WHERE NOT passed")}
    assert failed == {"data_quality", "data_volume"}  # GX's row-count expectation and the volume gate

    # What the Prefect UI shows (docs/prefect-ui.md): one run per gate, the failed ones red with their figure
    # and threshold; the parent names the stage and the gates; no engine error for an expected failure.
    parent = latest_flow_run("lifecycle-demo-")
    assert parent.state.is_failed() and "campaign:demo" in parent.tags
    assert parent.state.message.startswith("stage validate failed: ")
    assert "data_volume" in parent.state.message and "\n" not in parent.state.message
    validate_run = latest_flow_run("validate-demo-")
    expected = {f"gate-{g}" for g in REQUIRED_GATES}
    runs = task_runs_of(
        validate_run.id,
        settled=lambda runs: (
            expected <= {t.name for t in runs}
            and all(t.state and t.state.is_final() for t in runs if t.name in expected)
        ),
    )
    gates = {t.name: t for t in runs if t.name.startswith("gate-")}
    assert set(gates) == {f"gate-{g}" for g in REQUIRED_GATES}
    assert {n for n, t in gates.items() if t.state.is_failed()} == {"gate-data_quality", "gate-data_volume"}
    volume = gates["gate-data_volume"].state.message
    assert (
        volume.startswith("data_volume FAIL: ") and ">= 1,000,000 documents" in volume and "\n" not in volume
    )
    assert all(
        t.state.is_completed() for n, t in gates.items() if n not in ("gate-data_quality", "gate-data_volume")
    )
    logs = log_messages([parent.id, validate_run.id])
    assert not [m for m in logs if "Engine execution exited with unexpected exception" in m]
    # Artifacts keyed by campaign: the gate table in markdown, the lifecycle's summary naming the stage.
    detail = latest_artifact("gates-detail-demo")
    assert detail.data.startswith("# Gates of `demo`: FAILED: data_quality, data_volume")
    assert (
        "| gate | passed | figure | threshold |" in detail.data
        and "checks/data_docs/index.html" in detail.data
    )
    assert (ws / "checks" / "data_docs" / "index.html").is_file()
    # Readable offline: the same results on a page that fetches nothing, named beside the Data Docs.
    assert "checks/data_quality.html" in detail.data and (ws / "checks" / "data_quality.html").is_file()
    assert 'id="campaign-offline-note"' in (ws / "checks" / "data_docs" / "index.html").read_text()
    quality = latest_artifact("data-quality-demo")
    assert any(row["bounds"] == ">= 1,000,000" and row["passed"] is False for row in json.loads(quality.data))
    assert "stopped at **validate**" in latest_artifact("campaign-summary-demo").data


def test_validate_prints_the_gate_table_and_exits_1_on_failure(prepared, demo_inputs, capsys):
    ws = prepared
    sets = set_args(demo_inputs)
    # 4 GiB of HBM cannot hold the demo model with this layout: the memory gate fails.
    assert (
        main(["validate", str(DEMO), "--workspace", str(ws), *sets, "--set", "cluster.accelerator.hbm_gib=4"])
        == 1
    )
    out = capsys.readouterr().out
    assert "memory" in out and "FAIL" in out and "data_quality" in out and "PASS" in out

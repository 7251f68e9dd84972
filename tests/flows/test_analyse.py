"""`campaign analyse` and `campaign analyse --compare` through the CLI and the flows; `campaign sql`; bad input."""

import json

import duckdb
import pytest

from campaign import goodput
from campaign_cli.cli import main
from tests.helpers.analysis_fixtures import empty_catalog, executed_workspace
from tests.helpers.prefect_api import latest_artifact


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    return executed_workspace(tmp_path_factory.mktemp("analyse") / "w")


def test_analyse_writes_the_report_and_artifacts_keyed_by_campaign(executed, capsys):
    ws = executed
    capsys.readouterr()
    assert main(["analyse", "--workspace", str(ws.root), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["goodput_breakdown_gpu_h"]) == set(goodput.ALL_KEYS)
    total = (result["gpus"] + result["spare_gpus"]) * result["window"]["hours"]
    assert goodput.buckets_sum_gpu_h(result["goodput_breakdown_gpu_h"]) == pytest.approx(total, rel=1e-9)
    assert sum(result["goodput_breakdown_gpu_h"][k] for k in goodput.CONTRACT_KEYS) == pytest.approx(
        total, rel=1e-9
    )
    assert result["ettr"] > result["ettr_whole_window"]  # the demo finishes early: the tail is not the job's
    html = (ws.report_dir / "report.html").read_text()
    assert "<svg" in html and "**" not in html
    assert json.loads((ws.report_dir / "analysis.json").read_text())["ettr"] == result["ettr"]
    campaign = result["campaign"]
    # The newest of each key: other files in this worker's session API publish the demo campaign's artifacts too.
    markdown = latest_artifact(f"campaign-report-{campaign}")
    assert markdown and "data:image/svg+xml;base64," in markdown.data  # shown by the UI: prefect_ui_images.py
    assert latest_artifact(f"goodput-{campaign}") and latest_artifact(f"failures-{campaign}")
    link = latest_artifact(f"report-html-{campaign}")
    # The path said plainly: a file:// link opens nothing from the Prefect UI.
    assert link and f"`{ws.report_dir.resolve() / 'report.html'}`" in link.data
    assert "file://" not in link.data


def test_compare_sets_two_windows_side_by_side(executed, tmp_path, capsys):
    other = executed_workspace(tmp_path / "other", ("plan.checkpoint.interval_s=3600",))
    out = tmp_path / "cmp"
    capsys.readouterr()
    assert (
        main(["analyse", "--compare", str(executed.root), str(other.root), "--out", str(out), "--json"]) == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in result["runs"]] == ["w", "other"]
    assert "checkpoint interval" in result["differences"]
    assert (out / "compare.html").is_file() and (out / "compare.json").is_file()


def test_sql_prints_a_table_and_json(executed, capsys):
    capsys.readouterr()
    assert main(["sql", "--workspace", str(executed.root), "select gate, passed from gate_figures"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["gate", "passed"] and "memory" in out
    assert (
        main(["sql", "--workspace", str(executed.root), "--json", "select count(*) AS n from window_events"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)[0]["n"] > 0
    assert main(["sql", "--workspace", str(executed.root), "drop table runs"]) == 2
    assert "read-only" in capsys.readouterr().err


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else None


def _old_catalog(root):
    root.mkdir()
    con = duckdb.connect(str(root / "campaign.duckdb"))
    con.execute("CREATE TABLE gates (gate VARCHAR, passed BOOLEAN)")
    con.close()
    return root


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "no such workspace folder"),
        ("empty", "the workspace is empty"),
        ("not_executed", "no executed window"),
        ("older", "older campaign"),
    ],
)
def test_bad_workspaces_exit_2_and_write_nothing(tmp_path, capsys, case, message):
    root = tmp_path / "ws"
    if case == "empty":
        root.mkdir()
    elif case == "not_executed":
        empty_catalog(root)
    elif case == "older":
        _old_catalog(root)
    before = _tree(root)
    capsys.readouterr()
    assert main(["analyse", "--workspace", str(root)]) == 2
    err = capsys.readouterr().err
    assert message in err and "fix:" in err and "Traceback" not in err
    assert _tree(root) == before


def test_compare_with_an_unknown_target_exits_2_and_writes_nothing(executed, tmp_path, capsys):
    out = tmp_path / "cmp"
    capsys.readouterr()
    assert main(["analyse", "--compare", str(executed.root), str(tmp_path / "gone"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "gone" in err and "no such workspace or simulate JSON file" in err
    assert not out.exists()


@pytest.mark.parametrize("argv", [["sql", "--help"], ["analyse", "--help"]])
def test_help(argv, capsys):
    assert main(argv) == 0
    assert "--json" in capsys.readouterr().out


def test_simulate_report_task_writes_the_page_and_the_artifacts(tmp_path):
    # The simulate flow calls this task with its replicas' summaries (tests/flows/test_cli.py runs that flow).
    from prefect.logging import disable_run_logger

    from campaign.config import load_config
    from campaign.sim import simulate_batch, summarise_replicas
    from campaign.window import window_inputs
    from tasks.analyse import simulate_report
    from tests.helpers.paths import DEMO

    loaded = load_config(DEMO, [])
    inputs = window_inputs(loaded.config)
    summaries = simulate_batch(inputs, range(6))
    result = {
        "replicas": 6,
        "seed": loaded.config.seed,
        "config_digest": loaded.digest,
        "wall_s": 0.1,
        "summary": summarise_replicas(summaries, inputs.window_s),
    }
    ws = tmp_path / "what-if"
    with disable_run_logger():
        out = simulate_report.fn(result, summaries, "demo", str(ws))
    assert len(out["replica_values"]["ettr"]) == 6 and out["report_html"].startswith(str(ws / "simulate"))
    lo, hi = out["p_complete_interval"]
    assert lo <= result["summary"]["p_complete_in_window"] <= hi
    html = (ws / "simulate" / f"{loaded.digest[:12]}-seed{loaded.config.seed}-6.html").read_text()
    assert html.count("<svg") == 3 and "P(finish inside the window)" in html
    markdown = latest_artifact("simulate-report-demo")
    assert markdown and "data:image/svg+xml;base64," in markdown.data
    assert latest_artifact("simulate-report-html-demo")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("not a workspace")
    with disable_run_logger():  # a folder campaign does not own: no file, the artifact still has the report
        refused = simulate_report.fn(result, summaries, "demo", str(tmp_path / "taken"))
    assert refused["report_html"] is None and "not written" in refused["report_note"]
    assert sorted(p.name for p in (tmp_path / "taken").iterdir()) == ["notes.txt"]


def test_analyse_reads_a_read_only_workspace_and_writes_nothing_into_it(
    executed, tmp_path, monkeypatch, capsys
):
    import os
    import tempfile
    from pathlib import Path

    ws = executed
    before = {p: p.stat().st_mtime_ns for p in ws.root.rglob("*") if p.is_file()}
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != ws.root and real_access(p, mode, **kw))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    capsys.readouterr()
    assert main(["analyse", "--workspace", str(ws.root), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert Path(result["report_html"]).is_relative_to(tmp_path) and Path(result["report_html"]).is_file()
    assert {p: p.stat().st_mtime_ns for p in ws.root.rglob("*") if p.is_file()} == before


def test_a_window_run_for_real_is_recorded_and_analysed_as_a_measured_run(tmp_path, monkeypatch):
    """The execute task's real backend on a committed workspace: a short run of the NumPy trainer with two
    injected kills, recorded as the executed window, then analysed from the catalog and titled as measured."""
    import sys

    import numpy as np
    from prefect.logging import disable_run_logger

    from campaign import store
    from campaign.analysis.report_inputs import gather_report_inputs
    from campaign.config import load_config
    from tasks.execute import REAL_REPLICA, run_window
    from tests.helpers.paths import DEMO, NUMPY_TRAINER

    monkeypatch.setenv(
        "NUMPY_TRAINER_STEP_S", "0.15"
    )  # slow enough that every fault lands before the last step, even on a loaded machine
    ws = executed_workspace(tmp_path / "w")
    sample = ws.root / "rehearsal" / "sample"
    sample.mkdir(parents=True)
    rows = np.random.default_rng(0).integers(0, 16, size=(80, 65)).astype(np.uint32)
    np.save(sample / "train.npy", rows)
    np.save(sample / "heldout.npy", rows[:8])
    (sample / "sample.json").write_text(json.dumps({"vocab": 16}))
    config = load_config(
        DEMO,
        [
            f"execute.command=[{sys.executable}, {NUMPY_TRAINER}]",
            "execute.backend=local",
            "execute.steps=40",
            "execute.checkpoint_every=10",
            "execute.inject.failures=2",
            "execute.hang_min_s=5",
            "execute.backoff_s=0.1",
        ],
    ).config
    commitment = store.commitments(ws)[0]
    emitted = []  # each failure, restart and end as a Prefect event, emitted while the run goes
    monkeypatch.setattr("prefect.events.emit_event", lambda **kw: emitted.append(kw))
    with disable_run_logger():
        record = run_window.fn(ws, config, commitment, "execute-real")
    assert record.replica == REAL_REPLICA and record.completed
    names = [e["event"] for e in emitted]
    assert names[0] == "campaign.execute.job_start" and names[-1] == "campaign.execute.window_end"
    assert (
        names.count("campaign.execute.failure.kill")
        + names.count("campaign.execute.failure.hang")
        + names.count("campaign.execute.failure.node_lost")
        == 2
        and names.count("campaign.execute.restart_start") == 2
    )
    assert all(
        e["resource"]["prefect.resource.id"].startswith(f"campaign.{config.name}.execute.") for e in emitted
    )
    assert all(e["occurred"] is not None for e in emitted)
    result = gather_report_inputs(ws).result.to_json()  # analysis.json of the measured run
    assert result["title"] == "Measured run report" and result["simulated"] is False
    assert result["interruptions"]["unexpected"] == result["interruptions"]["injected"] == 2
    assert goodput.buckets_sum_gpu_h(result["goodput_breakdown_gpu_h"]) == pytest.approx(
        result["window_gpu_h"]
    )
    assert result["measured"]["steps_trained_again"] == result["measured"]["rework_steps_expected"]
    band = result["band"]  # beside the replicas of the run as executed: its slots, its pace, its faults' rate
    hits = next(f for f in band["figures"] if f["figure"] == "interruptions")
    assert hits["real"] == 2 and hits["plan"] == pytest.approx(2.0, abs=0.01)
    assert band["replicas"] > 0 and "injected" in band["model"]["failures_per_hour"]
    # the run's own start and length, beside the window it was booked for; no power figures it never measured
    window = result["window"]
    assert (
        window["start"] == result["measured"]["started_at"] and window["booked"]["start"] != window["start"]
    )
    assert window["hours"] == pytest.approx(result["job_wall_h"])
    assert not any(r["topic"] == "power smoothing" for r in result["recommendations"])
    from campaign.analysis.report import write_report

    html_path, _, markdown = write_report(tmp_path / "report", gather_report_inputs(ws))
    assert f"Run from {window['start']}" in markdown and "for the window booked" in markdown
    assert "Not metered: a measured run" in markdown and "Peak 0.00 MW" not in markdown
    assert (
        "Not metered: a measured run" in html_path.read_text()
        and "for the window booked" in html_path.read_text()
    )


def _drawn(ws) -> tuple[int, int]:
    """The report's identity on disk: a redraw replaces the file (atomic write), so its inode changes."""
    stat = (ws.report_dir / "report.html").stat()
    return stat.st_ino, stat.st_mtime_ns


def test_a_report_whose_inputs_are_unchanged_is_not_redrawn_and_any_change_redraws_it(
    executed, tmp_path, capsys
):
    import shutil

    from campaign.store import Workspace

    ws = Workspace(tmp_path / "copy")
    shutil.copytree(executed.root, ws.root, ignore=shutil.ignore_patterns(".prefect", ".lock*"))
    assert main(["analyse", "--workspace", str(ws.root), "--json"]) == 0
    first, drawn = json.loads(capsys.readouterr().out), _drawn(ws)
    assert main(["analyse", "--workspace", str(ws.root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == first  # the same result, read back
    assert _drawn(ws) == drawn  # not drawn again
    # a catalog row the report reads changes: drawn again
    with duckdb.connect(str(ws.catalog_path)) as con:
        con.execute(
            "UPDATE sim_power SET power_mw = power_mw * 1.01 WHERE t_s = (SELECT min(t_s) FROM sim_power)"
        )
    assert main(["analyse", "--workspace", str(ws.root), "--json"]) == 0
    capsys.readouterr()
    assert _drawn(ws) != drawn
    drawn = _drawn(ws)
    # the rehearsal's result, which the report shows, changes: drawn again
    rehearsal = ws.root / "rehearsal" / "result.json"
    rehearsal.parent.mkdir(exist_ok=True)
    rehearsal.write_text(json.dumps({"details": {"passed": False, "problems": ["edited"]}, "curves": {}}))
    assert main(["analyse", "--workspace", str(ws.root), "--json"]) == 0
    capsys.readouterr()
    assert _drawn(ws) != drawn
    drawn = _drawn(ws)
    # a report file removed: drawn again
    (ws.report_dir / "report.md").unlink()
    assert main(["analyse", "--workspace", str(ws.root), "--json"]) == 0
    capsys.readouterr()
    assert _drawn(ws) != drawn and (ws.report_dir / "report.md").is_file()

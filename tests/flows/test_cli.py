"""The `campaign` command as a user meets it: exit codes, JSON contracts, messages without tracebacks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from campaign_cli.cli import main
from tests.helpers.paths import DEMO, REPO, set_args
from tests.helpers.saved import SavedFolder

LLAMA = REPO / "configs" / "campaigns" / "llama3-405b.yaml"


def _cli(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    return subprocess.run(
        [sys.executable, "-m", "campaign_cli.cli", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


@pytest.mark.parametrize(
    "command", ["run", "prepare", "validate", "commit", "execute", "analyse", "plan", "simulate"]
)
def test_every_command_has_help(command, capsys):
    assert main([command, "--help"]) == 0
    assert "Usage" in capsys.readouterr().out


def test_bad_config_exits_2_with_file_line_field_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    text = DEMO.read_text().replace("  layers: 24\n", "  layers: 24\n  layerz: 3\n")
    bad.write_text(text.replace("../../workspace/_demo_inputs", str(REPO / "workspace" / "_demo_inputs")))
    line = text.splitlines().index("  layerz: 3") + 1
    for command in ("run", "prepare", "validate", "commit", "execute", "plan", "simulate"):
        result = _cli(command, str(bad))
        assert result.returncode == 2, (command, result.stderr)
        assert f"bad.yaml:{line}: model.layerz: unknown key 'layerz'" in result.stderr
        assert "fix:" in result.stderr and "Traceback" not in result.stderr + result.stdout


def test_impossible_layout_exits_2():
    result = _cli("plan", str(DEMO), "--set", "plan.layout.tp=3")
    assert result.returncode == 2
    assert "plan.layout" in result.stderr and "Traceback" not in result.stderr


def test_missing_data_exits_2_naming_the_source_and_field(tmp_path):
    result = _cli(
        "prepare",
        str(DEMO),
        "--workspace",
        str(tmp_path / "w"),
        "--set",
        "data.demo_corpus_dir=null",
        "--set",
        f"data.sources.0.path={tmp_path}/nothing/*.jsonl",
    )
    assert result.returncode == 2, result.stderr
    assert "matched no files" in result.stderr and "data.sources" in result.stderr
    assert "Traceback" not in result.stderr


def test_python_dash_m_runs_one_stage(tmp_path, demo_inputs):
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flows.prepare",
            str(DEMO),
            "--workspace",
            str(tmp_path / "w"),
            *set_args(demo_inputs),
        ],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "prepared:" in result.stdout and (tmp_path / "w" / "data" / "manifest.json").exists()


def test_plan_json_has_the_contract_keys(capsys):
    assert main(["plan", str(LLAMA), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    for key in (
        "gpus",
        "layout",
        "memory_gib_per_gpu",
        "step_time_s",
        "mfu",
        "tokens_per_s",
        "checkpoint",
        "job_mtbf_h",
        "expected_ettr",
        "expected_days",
        "fits",
        "violations",
    ):
        assert key in plan
    assert plan["gpus"] == 16384 and set(plan["layout"]) >= {"tp", "pp", "dp", "cp"}
    assert set(plan["checkpoint"]) >= {"size_gb", "write_s", "interval_s"}
    assert 0 < plan["mfu"] < 1 and plan["fits"] is True and plan["violations"] == []


def test_plan_that_does_not_fit_exits_1_with_violations(capsys):
    assert main(["plan", str(LLAMA), "--json", "--set", "cluster.accelerator.hbm_gib=40"]) == 1
    plan = json.loads(capsys.readouterr().out)
    assert plan["fits"] is False and any(v.startswith("memory") for v in plan["violations"])


def test_plan_search_ranks_layouts(capsys):
    assert main(["plan", str(DEMO), "--json", "--search"]) == 0
    found = json.loads(capsys.readouterr().out)["search"]
    assert found and all(p["gpus"] == 128 for p in found)
    speeds = [p["tokens_per_s"] for p in found if p["fits"]]
    assert speeds == sorted(speeds, reverse=True)


def test_simulate_json_has_the_contract_keys(capsys, tmp_path):
    ws = ["--workspace", str(tmp_path / "ws")]  # its report goes there, not into the current folder
    assert main(["simulate", str(DEMO), "--replicas", "4", "--seed", "3", "--json", *ws]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["replicas"] == 4 and out["seed"] == 3 and out["wall_s"] >= 0
    summary = out["summary"]
    for key in (
        "interruptions_unexpected",
        "interruptions_planned",
        "ettr",
        "tokens_trained",
        "completion_days",
    ):
        assert set(summary[key]) == {"mean", "p10", "p50", "p90"}
    assert 0 <= summary["p_complete_in_window"] <= 1
    assert set(summary["power_mw"]) >= {"peak", "mean", "min"} and summary["energy_mwh"] > 0
    assert isinstance(summary["by_category"], dict)
    # Deterministic for a seed.
    assert main(["simulate", str(DEMO), "--replicas", "4", "--seed", "3", "--json", *ws]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["summary"] == summary
    # The same whatever the number of workers (one batch each, on threads).
    assert (
        main(
            [
                "simulate",
                str(DEMO),
                "--replicas",
                "4",
                "--seed",
                "3",
                "--json",
                "--set",
                "runtime.max_workers=1",
                *ws,
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["summary"] == summary
    assert 0 <= summary["window_utilisation"]["mean"] <= summary["ettr"]["mean"] <= 1


def test_simulate_prints_its_figures_with_their_definitions_and_the_report_path(capsys, tmp_path):
    assert (
        main(["simulate", str(DEMO), "--replicas", "3", "--seed", "3", "--workspace", str(tmp_path / "ws")])
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "3 replicas (seed 3)" in out
        and "P(complete in window)" in out
        and "ettr = productive job time" in out
    )
    report = next(line for line in out.splitlines() if line.startswith("report: "))[len("report: ") :]
    assert report.startswith(str(tmp_path / "ws" / "simulate")) and report.endswith(".html")
    assert Path(report).is_file()


def test_simulate_refuses_more_replicas_than_memory_allows(capsys):
    assert main(["simulate", str(DEMO), "--replicas", "9000000"]) == 2
    err = capsys.readouterr().err
    assert "--replicas:" in err and "GB" in err and "fix: run at most about" in err and "Traceback" not in err


def test_a_bug_is_reported_as_an_internal_error_without_traceback(monkeypatch, capsys):
    import campaign.plan

    def broken(config):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(campaign.plan, "make_plan", broken)
    monkeypatch.delenv("CAMPAIGN_DEBUG", raising=False)
    assert main(["plan", str(DEMO)]) == 70
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError: boom" in err and "CAMPAIGN_DEBUG=1" in err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def _prepared_demo(tmp_path_factory) -> SavedFolder:
    """One prepare of the shipped demo (its corpus generated inside the workspace), saved."""
    ws = tmp_path_factory.mktemp("cli") / "w"
    assert main(["prepare", str(DEMO), "--workspace", str(ws)]) == 0
    return SavedFolder(ws, "prepared")


@pytest.fixture()
def prepared_demo(_prepared_demo) -> Path:
    """The workspace as that prepare left it, at the same path for every test that starts from a plain prepare."""
    return _prepared_demo.restore()


def test_a_bug_inside_a_stage_exits_70_in_one_line_without_a_traceback(prepared_demo):
    from prefect.settings import PREFECT_API_URL

    ws = prepared_demo
    bug = (
        "import sys, tasks.validate as t\n"
        "def boom(*a, **k):\n    raise ZeroDivisionError('a bug planted by the test')\n"
        "t.make_plan = boom\nfrom campaign_cli.cli import main\n"
        f"sys.exit(main(['validate', {str(DEMO)!r}, '--workspace', {str(ws)!r}]))\n"
    )
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    result = subprocess.run(
        [sys.executable, "-c", bug],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 70, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "ZeroDivisionError" in result.stderr and "CAMPAIGN_DEBUG=1" in result.stderr
    debug = subprocess.run(
        [sys.executable, "-c", bug],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**env, "CAMPAIGN_DEBUG": "1"},
    )
    assert debug.returncode == 70 and "Traceback" in debug.stderr


@pytest.mark.parametrize("case", ["lock_wait", "manifest_files_int", "damaged_catalog", "empty_catalog"])
def test_bad_workspace_state_exits_2_with_the_place_and_the_fix(prepared_demo, case):
    ws = prepared_demo
    env = {}
    if case == "lock_wait":
        env["CAMPAIGN_LOCK_WAIT_S"] = "abc"
    elif case == "manifest_files_int":
        manifest = json.loads((ws / "data" / "manifest.json").read_text())
        manifest["files"] = 7
        (ws / "data" / "manifest.json").write_text(json.dumps(manifest))
    elif case == "damaged_catalog":
        catalog = ws / "campaign.duckdb"
        catalog.write_bytes(catalog.read_bytes()[:5000])
    else:
        (ws / "campaign.duckdb").write_bytes(b"")
    from prefect.settings import PREFECT_API_URL

    result = subprocess.run(
        [sys.executable, "-m", "campaign_cli.cli", "validate", str(DEMO), "--workspace", str(ws)],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), **env},
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "fix:" in result.stderr
    expected = {
        "lock_wait": "CAMPAIGN_LOCK_WAIT_S",
        "manifest_files_int": "manifest.json",
        "damaged_catalog": "campaign.duckdb",
        "empty_catalog": "campaign.duckdb",
    }[case]
    assert expected in result.stderr


def test_plan_that_misses_its_window_still_exits_0_with_the_schedule_verdict(capsys):
    """Exit 1 means the layout cannot run (layout rules or memory); a schedule miss is a performance answer that
    stays in the output (and in validate's schedule gate)."""
    assert main(["plan", str(DEMO), "--json", "--set", "window.days=0.01"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["runs"] is True and plan["fits"] is False
    assert [v.split(":")[0] for v in plan["violations"]] == ["schedule"]


def test_the_terminal_drops_outcomes_the_command_prints_itself():
    """A refusal or failed gate is said once, by the command: Prefect's console keeps other lines."""
    import logging

    from campaign_cli.terminal import _said_once

    def record(msg, **extra):
        rec = logging.LogRecord("prefect.flow_runs", logging.INFO, __file__, 1, msg, None, None)
        rec.__dict__.update(extra)
        return rec

    assert not _said_once(record("Finished in state Failed('refused')"))
    assert not _said_once(record("Task run failed with exception: Refused(...)", campaign_expected=True))
    assert _said_once(record("Finished in state Completed()"))
    assert _said_once(record("Beginning flow run 'validate-demo-20261201-000000' for flow 'validate'"))


def test_a_full_disk_inside_a_flow_ends_it_cleanly_as_disk_full_not_a_bug():
    """Great Expectations, DuckDB or Arrow wrap the OSError of a full disk in their own errors: the flow still
    ends in a clean Failed state carrying DiskFull (exit 74), never an internal error (exit 70)."""
    import errno

    from campaign.errors import DiskFull
    from campaign_cli.terminal import finish
    from flows.common import fails_cleanly

    @fails_cleanly
    def stage() -> None:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/ws/checks/validations/result.json")
        except OSError as exc:
            raise RuntimeError("the store could not save the result") from exc

    state = stage()
    assert state.is_failed() and isinstance(state.data, DiskFull)
    with pytest.raises(DiskFull) as err:
        finish(state)
    assert err.value.exit_code == 74 and err.value.where == "/ws/checks/validations/result.json"

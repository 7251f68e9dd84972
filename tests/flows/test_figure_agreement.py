"""One value per figure on every what-if surface: `campaign simulate` (its text, its JSON, its artifacts, its report)
and `campaign plan` (the window verdict the schedule gate reaches) agree on ETTR, window utilisation, P(target in
window), the target-day and completion-day quantiles, lost, released and cost, and the window verdict, for the
demo, the Llama 3 config and a window that is too short. A replica is one history whatever the window, and a
measured step of another model is refused by every command that plans. The executed run's surfaces (report,
analysis.json, the artifacts, the gate messages, the catalog's view) are held to the same in
tests/flows/test_lifecycle.py."""

import json
from pathlib import Path

import pytest

from campaign.config import load_config
from campaign_cli.cli import main
from tasks.artifacts import artifact_key
from tests.helpers.figure_agreement import simulate_disagreements, simulate_outputs
from tests.helpers.paths import DEMO, LLAMA
from tests.helpers.prefect_api import latest_artifact

# (config, replicas, overrides): the plan judges from the same replicas as simulate (window_replicas = replicas).
CASES = {
    "demo": (DEMO, 40, []),
    "llama3": (LLAMA, 6, []),
    "demo-miss": (DEMO, 40, ["plan.target_tokens=4.6e11"]),
}


def _run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("case", list(CASES))
def test_every_whatif_figure_reads_the_same_on_every_surface(case, capsys, tmp_path):
    config, replicas, overrides = CASES[case]
    sets = [*overrides, f"gates.config.window_replicas={replicas}"]
    args = [a for s in sets for a in ("--set", s)]
    ws = ("--workspace", str(tmp_path / "ws"))
    simulate = ("simulate", str(config), "--replicas", str(replicas), *args, *ws)
    result = json.loads(_run(capsys, *simulate, "--json"))
    text = _run(capsys, *simulate)
    name = load_config(config, sets).config.name
    artifacts = {}
    for kind in ("simulate", "simulate-table", "simulate-report"):
        found = latest_artifact(artifact_key(name, kind))
        assert found is not None, kind
        artifacts[kind] = {"data": found.data}
    plan = json.loads(_run(capsys, "plan", str(config), "--json", *args))
    plan_text = _run(capsys, "plan", str(config), *args)
    outputs = simulate_outputs(text, artifacts, Path(result["report_html"]).read_text(), plan_text)
    assert simulate_disagreements(outputs, result, plan) == []
    if case == "demo-miss":  # a miss is a miss on every surface
        summary = result["summary"]
        assert summary["p_target_in_window"] < 0.9 and summary["window_length"]["verdict"] == "too_short"
        assert plan["fits"] is False and "the window is too short" in plan_text


def test_a_replica_is_one_history_whatever_the_window(capsys, tmp_path):
    """The same seeds in a 2- and a 3-day window: a replica that reaches the target within 2 days in both reaches
    it at the same time, as simulate's JSON says it (the schedule gate reads the same histories at 1x and 1.5x)."""
    target_days = []
    for days in (2, 3):
        args = ("--replicas", "40", "--seed", "7", "--json", "--set", f"window.days={days}")
        out = _run(capsys, "simulate", str(DEMO), *args, "--workspace", str(tmp_path / "ws"))
        target_days.append(json.loads(out)["replica_values"]["target_days"])
    both = [
        (a, b)
        for a, b in zip(*target_days, strict=True)
        if a is not None and b is not None and max(a, b) <= 2
    ]
    assert len(both) >= 30 and all(a == b for a, b in both), both


@pytest.mark.parametrize("model", ["mt-nlg-530b", None])
def test_a_measured_step_of_another_model_is_refused_by_plan_and_simulate(model, capsys, tmp_path):
    """A measured row of another model, or one that names none, is refused by every command that plans (exit 2,
    the field named), never taken as this model's step."""
    row = (
        "{nodes: 16, layout: {tp: 2, pp: 1, dp: 64, cp: 1}, global_batch_tokens: 2097152, step_time_s: 0.6, "
        f"source: a pasted run{f', model: {model}' if model else ''}}}"
    )
    simulate = ["simulate", str(DEMO), "--replicas", "4", "--workspace", str(tmp_path / "ws")]
    for command in (["plan", str(DEMO)], simulate):
        capsys.readouterr()
        assert main([*command, "--set", f"plan.measured=[{row}]"]) == 2
        err = capsys.readouterr().err
        said = "measured on 'mt-nlg-530b', this config plans 'demo-2b'" if model else "name the model the run"
        assert "plan.measured[0].model" in err and said in err, err


def test_a_sweep_of_identical_points_marks_no_best_on_any_surface(capsys, tmp_path):
    """Two targets that no replica reaches in the window give the same histories: no best beyond the replicas' noise,
    in the text and in the JSON alike."""
    sweep = ("simulate", str(DEMO), "--replicas", "20", "--sweep", "plan.target_tokens=1e15,2e15")
    ws = ("--workspace", str(tmp_path / "ws"))
    result = json.loads(_run(capsys, *sweep, "--json", *ws))
    text = _run(capsys, *sweep, *ws)
    assert result["sweep"]["best"] is None and len(result["sweep"]["tied"]) == 2, result["sweep"]
    assert "no best beyond the replicas' noise: tied" in text, text

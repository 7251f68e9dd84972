"""One value per figure on every what-if surface: `campaign simulate` (its text, its JSON, its artifacts, its report)
and `campaign plan` (the window verdict the schedule gate reaches) agree on ETTR, window utilisation, P(target in
window), the target-day and completion-day quantiles, lost, released and cost, and the window verdict, for the
demo, the Llama 3 config and a window that is too short. The executed run's surfaces (report, analysis.json, the
artifacts, the gate messages, the catalog's view) are held to the same in tests/flows/test_lifecycle.py."""

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

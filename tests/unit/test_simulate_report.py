"""The report of a `campaign simulate` run: per-replica values, P(finish) with its Wilson interval, the figures and
the page, on real replicas of the demo window (no Prefect)."""

from __future__ import annotations

import base64
import re

import pytest

from campaign.analysis.simulate_report import (
    MAX_REPLICA_VALUES,
    finish_probability,
    render_simulate_report,
    replica_values,
    report_stem,
    wilson_interval,
)
from campaign.analysis.simulate_run import ReplicaValues, SimulateRun
from campaign.config import load_config
from campaign.sim import simulate_batch, summarise_replicas
from campaign.window import window_inputs
from tests.helpers.paths import DEMO


@pytest.fixture(scope="module")
def simulated():
    loaded = load_config(DEMO, ["sim.replicas=12"])
    inputs = window_inputs(loaded.config)
    summaries = simulate_batch(inputs, range(12))
    result = {
        "replicas": 12,
        "seed": loaded.config.seed,
        "config_digest": loaded.digest,
        "wall_s": 0.1,
        "summary": summarise_replicas(summaries, inputs.window_s),
    }
    return result, summaries


def test_replica_values_are_the_replicas_own_figures(simulated):
    result, summaries = simulated
    values = replica_values(summaries)
    assert {len(v) for v in values.to_json().values()} == {12}
    assert values.ettr == [s.ettr for s in summaries]
    assert values.interruptions_unexpected == [s.interruptions.unexpected for s in summaries]
    finished = [d for d in values.completion_days if d is not None]
    assert len(finished) == sum(s.completed for s in summaries)
    assert min(finished) == pytest.approx(result["summary"]["completion_days"]["p10"], abs=0.2)
    assert (
        replica_values([summaries[0]] * (MAX_REPLICA_VALUES + 1)) is None
    )  # percentiles only, above the cap


def test_finish_probability_agrees_with_the_summary(simulated):
    result, summaries = simulated
    finish = finish_probability(replica_values(summaries), result["summary"]["window_days"])
    assert finish.p == result["summary"]["p_complete_in_window"]
    assert finish.interval_lo <= finish.p <= finish.interval_hi
    never = finish_probability(ReplicaValues.from_json({"completion_days": [None, None, 1.0, None]}), 2.0)
    assert never.p == 0.25 and never.day_50pct is None and never.day_90pct is None


def test_wilson_interval_matches_published_values():
    # Newcombe (1998), Statistics in Medicine 17:857, Table I: 81/263 -> 0.2553 to 0.3662; 0/20 -> 0 to 0.1611.
    lo, hi = wilson_interval(81, 263)
    assert (lo, hi) == (pytest.approx(0.2553, abs=5e-5), pytest.approx(0.3662, abs=5e-5))
    assert wilson_interval(0, 20) == (0.0, pytest.approx(0.1611, abs=5e-5))
    assert wilson_interval(20, 20)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_the_report_draws_the_distributions(simulated):
    result, summaries = simulated
    html, markdown, facts = render_simulate_report(
        SimulateRun.from_json(result), "demo", replica_values(summaries)
    )
    assert html.count("<svg") == 3 and "<script" not in html and "**" not in html
    assert "P(target reached inside the window)" in html and "95% Wilson interval" in html and "ECDF" in html
    images = re.findall(r"!\[[^\]]*\]\(([^)]*)\)", markdown)
    assert len(images) == 3 and all(src.startswith("data:image/svg+xml;base64,") for src in images)
    assert "P(target inside the window)" in base64.b64decode(images[0].split(",", 1)[1]).decode()
    assert facts.finish.replicas == 12 and facts.window_length
    assert (
        report_stem(SimulateRun.from_json(result))
        == f"{result['config_digest'][:12]}-seed{result['seed']}-12"
    )


def test_a_result_without_replica_values_still_reports_its_percentiles(simulated):
    result, _ = simulated
    html, markdown, facts = render_simulate_report(SimulateRun.from_json(result), "demo", None)
    assert "<svg" not in html and "percentiles only" in html and facts.finish is None
    assert "P(finish inside the window)" in markdown and "![" not in markdown


def test_compare_of_simulate_runs_draws_their_distributions(simulated, tmp_path):
    import json

    from campaign.analysis.compare import load_run, render_compare

    result, summaries = simulated
    with_values = {**result, "replica_values": replica_values(summaries).to_json()}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(with_values))
    b.write_text(
        json.dumps(
            {
                **with_values,
                "replica_values": {**with_values["replica_values"], "completion_days": [None] * 12},
            }
        )
    )
    html = render_compare([load_run(str(a)), load_run(str(b))]).html
    assert "ECDF over replicas" in html
    b.write_text(json.dumps(result))  # a file from before replica_values: the percentile spread instead
    html = render_compare([load_run(str(a)), load_run(str(b))]).html
    assert "ECDF" not in html and "p10-p90, p50" in html


def test_a_snapshot_window_leads_with_the_share_that_reaches_its_target():
    # A snapshot window (sim.stop_at_target: false) never completes, but reaches its target: the report, the text
    # summary and the gate's rule all read p_target_in_window, not P(finish) = 0.
    from campaign.sim.replicas import summary_markdown

    loaded = load_config(DEMO, ["sim.stop_at_target=false"])
    inputs = window_inputs(loaded.config)
    summaries = simulate_batch(inputs, range(6))
    summary = summarise_replicas(summaries, inputs.window_s, stop_at_target=False)
    assert summary["p_complete_in_window"] == 0.0
    assert summary["p_target_in_window"] == 1.0 and summary["window_length"]["suffices"]
    assert summary["target_days"]["p90"] < summary["window_days"]
    result = {
        "replicas": 6,
        "seed": loaded.config.seed,
        "config_digest": loaded.digest,
        "wall_s": 0.1,
        "summary": summary,
    }
    html, markdown, facts = render_simulate_report(
        SimulateRun.from_json(result), "demo", replica_values(summaries)
    )
    assert facts.finish.p == summary["p_target_in_window"] and facts.finish.finished == 6
    assert "100.0%</div><b>P(target reached inside the window)" in html and "never" in html
    assert facts.window_length.startswith("fits")
    assert "**P(target reached inside the window)** | **100.0%**" in markdown
    assert "the window suffices" in summary_markdown("demo", 6, loaded.config.seed, summary)


def test_a_summary_written_by_an_older_campaign_is_refused_naming_what_it_lacks():
    from campaign.errors import DataError
    from campaign.sim.summary import ReplicaSummary

    inputs = window_inputs(load_config(DEMO).config)
    summary = simulate_batch(inputs, range(1))[0]
    again = ReplicaSummary.from_json(summary.to_json())
    assert again == summary  # the catalog's JSON reads back as the same record
    old = summary.to_json()
    del old["energy_mwh"]  # a figure an older campaign did not record
    with pytest.raises(DataError, match="a summary without energy_mwh") as err:
        ReplicaSummary.from_json(old)
    assert err.value.exit_code == 2 and "run the stage that wrote it again" in str(err.value)

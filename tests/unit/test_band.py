"""Plan against actual: a real run beside the plan's expectation and the band of replicas of it as executed."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from campaign.analysis.band import (
    BAND_REPLICAS,
    LOST_KEYS,
    injected_rate_per_s,
    replica_band,
    run_as_executed,
)
from campaign.analysis.recorded_config import RecordedConfig
from campaign.execution.external import external_report_inputs, journal_from_metrics
from campaign.execution.measured import measured_summary
from campaign.plan.checkpointing import daly_expected_wall_s
from campaign.plan.trainer_logs import TimedLine

T0 = 1_800_000_000.0
STEPS, EVERY = 40, 5


def _run(failed_after=(), injected=False, step_s=1.0, gap_s=2.0):
    """A run of STEPS steps, `step_s` apart, a checkpoint every EVERY steps (0.2 s each); after each step of
    `failed_after` it fails and resumes from its last checkpoint `gap_s` later. Its summary and events."""
    rows, t, step, done = [], T0, 0, set()
    while step < STEPS:
        step += 1
        t += step_s
        rows.append(TimedLine(t, "step", step, 100))
        if step % EVERY == 0:
            t += 0.2
            rows.append(TimedLine(t, "checkpoint", step))
        if step in failed_after and step not in done:
            done.add(step)
            t += gap_s
            step = step // EVERY * EVERY
            rows.append(TimedLine(t, "resumed", step))
    journal, final, tokens = journal_from_metrics(rows, None)
    if injected:
        journal.events = [
            dataclasses.replace(e, category="kill", detail="injected: SIGKILL of the trainer's process group")
            if e.kind == "failure"
            else e
            for e in journal.events
        ]
    summary = measured_summary(journal, final, tokens, EVERY, 7, 2.0, max_wall_s=200.0)
    return summary, journal.frame()


def _config(per_job_hour):
    failures = [
        {
            "name": "software_bug",
            "scope": "job",
            "per_job_hour": per_job_hour,
            "detect_s": 1,
            "restart_s": 1,
            "repair_h": 0,
        }
    ]
    return RecordedConfig.from_mapping({"cluster": {"failures": failures}})


def _row(band, figure):
    return next(f for f in band["figures"] if f["figure"] == figure)


def test_a_run_without_failures_lies_on_the_plan_and_every_replica_agrees():
    summary, events = _run()
    band = replica_band(summary, events, RecordedConfig.from_mapping({"cluster": {"failures": []}})).to_json()
    assert band["replicas"] == BAND_REPLICAS and len(band["figures"]) == 4
    for f in band["figures"]:
        assert f["p10"] == pytest.approx(f["p90"]) and f["p10"] <= f["p50"] <= f["p90"]
    assert _row(band, "interruptions")["real"] == _row(band, "interruptions")["p50"] == 0
    assert _row(band, "tokens_trained")["p50"] == _row(band, "tokens_trained")["plan"] == STEPS * 100
    ettr = _row(band, "ettr")
    assert ettr["plan"] == pytest.approx(ettr["p50"], rel=0.01) and ettr["real"] == pytest.approx(
        ettr["p50"], rel=0.01
    )


def test_the_replicas_simulate_the_run_at_its_own_scale_and_pace():
    summary, events = _run(failed_after=(12, 27), injected=True)
    run = run_as_executed(summary, events, _config(0.01))
    assert not isinstance(run, str)
    assert run.step_time_s == pytest.approx(1.0) and run.checkpoint_interval_s == pytest.approx(EVERY)
    assert run.checkpoint_write_s == pytest.approx(0.2) and run.window_s == 200.0
    assert (run.job_nodes, run.spare_nodes, run.world_sizes) == (1, 0, (1,))  # read from its files: one node
    assert run.detect_s + run.restart_s == pytest.approx(2.0)  # the gap from its last line to its resume
    assert [c.name for c in run.failures] == ["software_bug", "injected"]
    assert all(
        c.detect_s == run.detect_s for c in run.failures
    )  # the run's own restart path, not the cluster's
    band = replica_band(summary, events, _config(0.01)).to_json()
    assert band == replica_band(summary, events, _config(0.01)).to_json()  # seeded
    assert band["cancelled"] is False
    summary = dataclasses.replace(
        summary,
        measured=dataclasses.replace(
            summary.measured, end="cancelled: SIGTERM received; stopped after step 30"
        ),
    )
    assert replica_band(summary, events, _config(0.01)).cancelled is True  # the report says so
    hits = _row(band, "interruptions")
    assert hits["real"] == 2 and hits["plan"] == pytest.approx(2.0, abs=0.01) and hits["is_inside"]
    assert hits["p10"] < hits["p90"]  # failures come by chance in the replicas


def test_the_injected_faults_rate_expects_their_count_over_the_expected_wall_time():
    rate = injected_rate_per_s(3, 40.0, 5.0, 0.2, 3.0, 0.0)
    assert rate * daly_expected_wall_s(40.0, 5.0, 0.2, 3.0, 1.0 / rate) == pytest.approx(3.0, rel=1e-9)
    assert rate < 3 / 40.0  # the faults also fall in the time they cost


def test_a_run_with_far_more_failures_than_its_rates_falls_outside_the_band():
    summary, events = _run(failed_after=(7, 13, 22, 33))
    band = replica_band(summary, events, _config(0.01)).to_json()
    hits, ettr = _row(band, "interruptions"), _row(band, "ettr")
    assert hits["real"] == 4 and hits["p90"] == 0 and not hits["is_inside"]
    assert ettr["real"] < ettr["p10"] and not ettr["is_inside"] and band["n_inside"] < 4


def test_analyse_metrics_shows_the_band_in_the_json_and_both_reports(tmp_path):
    from campaign.analysis.report import write_report

    lines = [{"step": k, "loss": 3.0 - k / 100, "tokens": 256, "time": T0 + k} for k in range(1, 21)]
    lines.insert(10, {"event": "checkpoint", "step": 10, "time": T0 + 10.2})
    lines.append({"event": "resumed", "step": 10, "time": T0 + 24})
    lines += [{"step": k, "loss": 3.0 - k / 100, "tokens": 256, "time": T0 + 14 + k} for k in range(11, 31)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    inputs = external_report_inputs(tmp_path / "metrics.jsonl", None)
    band = inputs.result.to_json()["band"]  # as analysis.json has it
    assert [f["figure"] for f in band["figures"]] == ["ettr", "tokens_trained", "interruptions", "lost_gpu_h"]
    assert band["model"]["organic_rates"].startswith("the run's own failures")
    html, _, markdown = write_report(tmp_path / "report", inputs)
    assert "### Plan against actual" in markdown and "| unexpected interruptions | 1 |" in markdown
    assert "<h2>Plan against actual</h2>" in html.read_text()


def test_the_band_conditions_on_the_runs_failure_count_when_enough_replicas_had_it():
    from campaign.analysis.band import MIN_CONDITIONED, conditioned_on_failures

    counts = np.array([2] * MIN_CONDITIONED + [0] * 50 + [1] * 30)
    same, said = conditioned_on_failures(counts, 2.0)
    assert (
        same is not None
        and int(same.sum()) == MIN_CONDITIONED
        and said.startswith(f"the {MIN_CONDITIONED} of")
    )
    none, why = conditioned_on_failures(counts[MIN_CONDITIONED - 1 :], 2.0)
    assert none is None and "only 1 of" in why and "cannot be conditioned" in why

    # A run whose two failures the modelled rate makes common: its band is over the replicas that had two.
    summary, events = _run(failed_after=(12, 27))
    band = replica_band(summary, events, _config(2 * 3600.0 / STEPS)).to_json()
    assert (
        band["conditioned_on"].startswith("the ") and "had the run's 2 unexpected" in band["conditioned_on"]
    )


def test_a_band_without_spread_places_no_figure_outside_and_says_why():
    """A run with failures its modelled rates almost never give: every replica alike, so no figure is called
    outside a band of zero width; the band says it could not condition on the run's failures."""
    summary, events = _run(failed_after=(7, 13, 22, 33))
    band = replica_band(summary, events, _config(0.01)).to_json()
    flat = [f for f in band["figures"] if f["no_spread"]]
    assert flat and all(f["is_inside"] is not False for f in flat)
    assert any(
        f["is_inside"] is None for f in flat
    )  # the run's figure off a band without spread: n/a, not "no"
    assert "only 0 of" in band["conditioned_on"]
    assert band["n_judged"] == len(band["figures"]) - sum(f["is_inside"] is None for f in flat)


def test_a_short_measured_run_reads_at_its_own_scale(tmp_path):
    from campaign.analysis.report import write_report
    from campaign.figures import token_unit, when_in_window

    assert when_in_window(0.0038, 0.0038) == "after 5.5 min of 5.5 min"
    assert (
        when_in_window(0.25, 0.5) == "after 6.00 h of 12.00 h"
        and when_in_window(1.5, 2) == "on day 1.50 of 2.00"
    )
    assert (
        token_unit(10_240) == (1e3, "K")
        and token_unit(4.3e11) == (1e9, "B")
        and token_unit(512) == (1, "tokens")
    )
    lines = [{"step": k, "loss": 3.0 - k / 100, "tokens": 256, "time": T0 + k} for k in range(1, 21)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    inputs = external_report_inputs(tmp_path / "metrics.jsonl", None)
    html, _md_path, markdown = write_report(tmp_path / "report", inputs)
    page = html.read_text()
    assert "replica -1" not in page and "a measured run" in page
    assert "of 0.0" not in page and "0.00000" not in page
    # One plan figure for the run as executed: the headline's is the plan-against-actual table's.
    ettr = _row(inputs.result.to_json()["band"], "ettr")["plan"]
    assert inputs.result.plan_expected_ettr == ettr
    assert f"plan expected {ettr:.3f}, for the run as executed" in markdown


def _multinode_run(tmp_path, wait=False, compile_s=0.0):
    """A multi-node run's records as its supervisor writes them: 3 job nodes (and 1 spare, or none with `wait`),
    STEPS steps 1 s apart with a checkpoint every EVERY steps; node n2 lost on purpose after step 22, replaced by the
    spare, or (with `wait`) waited for 6 s until it is repaired; the run resumes from step 20, its second step after
    the restore `compile_s` slower (a compile). Its summary and events."""
    from campaign.execution.journal import Journal
    from campaign.execution.multinode_summary import multinode_summary

    spares = 0 if wait else 1
    names = ("n0", "n1", "n2", "n3")[: 3 + spares]
    j = Journal.open(tmp_path)
    j.add(0.0, "job_start", detail=f"target_step={STEPS} job_nodes=3 spare_nodes={spares}", started_at=T0)
    j.add(0.5, "start", node=0, detail="world=3 nodes=n0,n1,n2", nodes=names[:3], names=names[:3])
    t = 2.0

    def train(first, last, attempt):
        nonlocal t
        for step in range(first, last + 1):
            t += 1.0 + (compile_s if attempt and step == first + 1 else 0.0)
            j.add_step(t, step, attempt)
            if step % EVERY == 0:
                t += 0.2
                j.add(t, "checkpoint_end", node=0, detail=f"step={step}", attempt=attempt, step=step)

    train(1, 22, 0)
    j.add(t + 0.5, "failure", "node_lost", "node", 2, detail="injected: node n2 lost (set DOWN)", step=22)
    t += 1.5
    j.add(t, "detected", "node_lost", "node", 2)
    j.add(t, "node_excluded", "node_lost", "node", 2, detail="node=n2 failures=1")
    ranks = ("n0", "n1", "n3")
    if wait:
        ranks = names
        j.add(t, "spares_exhausted", detail="2 of 3 nodes healthy; elastic=wait", attempt=1)
        j.add(t, "waiting_start", detail="no spare left; waiting for a repaired node", attempt=1)
        t += 6.0
        j.add(t, "waiting_end", node=2, detail="node=n2 back in service", attempt=1)
        j.add(t, "repair_done", node=2, detail="node=n2", attempt=1)
    else:
        j.add(t, "spare_swap", node=3, detail="slot=2 node=n3 replaces=n2", attempt=1)
    j.add(t, "restart_start", node=0, attempt=1)
    t += 2.0
    j.add(t, "start", node=0, detail=f"world=3 nodes={','.join(ranks)}", attempt=1, nodes=ranks, names=names)
    train(21, STEPS, 1)
    j.add(t, "job_complete", node=0, attempt=1)
    j.add(t, "window_end", detail="target step reached", attempt=1)
    summary = multinode_summary(j, STEPS, 96, EVERY, 3, 2.0, 3, spares, max_wall_s=200.0)
    return summary, j.frame()


def _gpu_config():
    failures = [
        {
            "name": "faulty_gpu",
            "scope": "gpu",
            "per_gpu_year": 500,
            "detect_s": 1,
            "restart_s": 1,
            "repair_h": 1,
        }
    ]
    return RecordedConfig.from_mapping({"cluster": {"failures": failures}})


def test_a_multi_node_run_is_simulated_on_its_job_nodes_with_its_spares_and_priced_with_them(tmp_path):
    from campaign.analysis.band import INJECTED_NODE_LOSS, band_inputs, plan_expectation
    from campaign.analysis.report import environment

    summary, events = _multinode_run(tmp_path)
    run = run_as_executed(summary, events, _gpu_config())
    assert not isinstance(run, str)
    assert (run.job_nodes, run.spare_nodes, run.world_sizes) == (3, 1, (3, 3))
    inputs = band_inputs(run)
    assert (inputs.nodes, inputs.gpus_per_node, inputs.spare_nodes) == (3, 1, 1)
    # the price per GPU-hour from the run's compute cost over its job and spare GPUs: the price it was given
    assert run.gpu_hour_usd == pytest.approx(2.0)
    # a per-GPU rate at the job's 3 nodes; the injected node loss a node's failure (it takes the spare), its node
    # out for the rest of the run (the run returned it only at its end)
    organic, lost = run.failures
    assert organic.job_rate_per_hour(3, 1) == pytest.approx(3 * 500 / 8760)
    assert (lost.name, lost.scope) == (INJECTED_NODE_LOSS, "node")
    failed_s = float(events[events["kind"] == "failure"]["t_s"].iloc[0])
    assert lost.repair_h * 3600 == pytest.approx(events["t_s"].max() - failed_s - run.detect_s)
    # lost GPU-hours are of 3 nodes: the plan and the replicas' median near the run's own, not a third of it
    band = replica_band(summary, events, _gpu_config()).to_json()
    lost_h = _row(band, "lost_gpu_h")
    assert lost_h["real"] == pytest.approx(sum(summary.goodput_breakdown_gpu_h[k] for k in LOST_KEYS))
    assert lost_h["plan"] == pytest.approx(lost_h["real"], rel=0.2)
    assert lost_h["p50"] == pytest.approx(lost_h["real"], rel=0.2) and lost_h["is_inside"]
    assert plan_expectation(run)["lost_gpu_h"] == lost_h["plan"]
    assert band["model"]["job_nodes"] == 3 and band["model"]["spare_nodes"] == 1
    assert band["model"]["organic_rates"].endswith("at the job's 3 nodes")
    counts = {
        **summary.to_json()["interruptions"],
        "injected": 1,
        "organic": 0,
        "injected_by_category": {"node_lost": 1},
    }
    r = {**summary.to_json(), "interruptions": counts, "band": band}
    for name in ("measured.md.j2", "measured.html.j2"):
        text = environment().get_template(name).render(r=r)
        assert "3 job nodes and 1 spare, world size 3, a 1.000 s step" in text


def test_an_elastic_wait_runs_replicas_wait_for_the_repair_the_run_waited_for(tmp_path):
    summary, events = _multinode_run(tmp_path, wait=True)
    run = run_as_executed(summary, events, _gpu_config())
    assert not isinstance(run, str) and (run.job_nodes, run.spare_nodes) == (3, 0)
    (lost,) = [c for c in run.failures if c.scope == "node" and c.name != "faulty_gpu"]
    assert lost.repair_h * 3600 == pytest.approx(
        6.0
    )  # from its detection to its repair, as the simulator repairs
    assert summary.goodput_breakdown_gpu_h["waiting"] == pytest.approx(3 * 6.0 / 3600)
    band = replica_band(summary, events, _gpu_config()).to_json()
    lost_h = _row(band, "lost_gpu_h")
    assert lost_h["p10"] <= lost_h["real"] <= lost_h["p90"] and lost_h["is_inside"]


def test_the_scale_reads_job_nodes_spares_and_the_world_sizes():
    from campaign.analysis.band import run_scale, scale_text

    assert scale_text(3, 1, [3, 3]) == "3 job nodes and 1 spare, world size 3"
    assert scale_text(2, 0, [2, 1]) == "2 job nodes and no spare, world size 2, then 1"
    assert scale_text(1, 2, []) == "1 job node and 2 spares, world size 1"
    one_node = pd.DataFrame({"kind": ["job_start"], "detail": ["started_at=x target_step=9 nodes=n0,n1"]})
    assert run_scale(one_node) == (1, 1, (1,))  # a one-node run: the others stand by


def test_a_slow_step_after_the_restore_is_in_the_replicas_pace_as_it_is_in_the_runs_ettr(tmp_path):
    """The compile after a restore makes one step 9 s where the others take 1 s: the run counts it as productive
    time, so the replicas, at the median pace, have its 8 s beyond the pace as productive time too, and the run's
    ETTR lies in their band."""
    summary, events = _multinode_run(tmp_path, compile_s=8.0)
    assert summary.measured.median_step_s == pytest.approx(1.0)
    run = run_as_executed(summary, events, _gpu_config())
    assert not isinstance(run, str)
    assert run.step_time_s == pytest.approx(1.0) and run.slow_steps_s == pytest.approx(8.0)
    ettr = _row(replica_band(summary, events, _gpu_config()).to_json(), "ettr")
    assert ettr["p10"] <= ettr["real"] <= ettr["p90"] and ettr["plan"] == pytest.approx(
        ettr["real"], rel=0.05
    )


def test_the_shutdown_is_the_time_from_the_last_checkpoint_at_the_target_to_the_jobs_end():
    from campaign.analysis.band import shutdown_s

    events = pd.DataFrame(
        {
            "kind": ["checkpoint_end", "checkpoint_end", "job_complete"],
            "t_s": [10.0, 20.0, 21.5],
            "detail": ["step=30", "step=60", "world=3"],
        }
    )
    assert shutdown_s(events, 60) == pytest.approx(1.5)  # a final evaluation, the ranks' exit
    assert (
        shutdown_s(events, 70) == 0.0
    )  # its last checkpoint not at the target: not known where training ended
    assert shutdown_s(events[events["kind"] != "job_complete"], 60) == 0.0  # a run that did not end

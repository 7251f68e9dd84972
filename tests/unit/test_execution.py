"""The real-execution pieces without a trainer: injected faults, the journal, the measured summary, the config."""

import json

import pytest

from campaign import goodput
from campaign.config import load_config
from campaign.errors import ConfigError
from campaign.execution.injection import plan_injections
from campaign.execution.journal import EVENT_COLUMNS, Journal
from campaign.execution.measured import measured_summary, rework_steps_expected
from tests.helpers.paths import DEMO


def test_injections_are_seeded_distinct_after_the_first_checkpoint_and_before_the_target():
    a = plan_injections(5, 7, ("kill", "hang", "node_loss"), 100, 10)
    assert a == plan_injections(5, 7, ("kill", "hang", "node_loss"), 100, 10)
    assert a != plan_injections(5, 8, ("kill", "hang", "node_loss"), 100, 10)
    steps = [i.step for i in a]
    assert steps == sorted(set(steps)) and steps[0] >= 11 and steps[-1] <= 99
    assert {i.kind for i in a[:3]} == {"kill", "hang", "node_loss"}  # three faults of three kinds: one each
    assert not plan_injections(0, 7, ("kill",), 100, 10)
    with pytest.raises(ValueError, match="distinct steps"):
        plan_injections(20, 7, ("kill",), 20, 10)


def test_the_journal_keeps_the_simulators_columns_and_survives_a_cut_off_line(tmp_path):
    from campaign.sim.simulator import EVENT_COLUMNS as SIM_COLUMNS

    assert EVENT_COLUMNS == SIM_COLUMNS
    journal = Journal.open(tmp_path)
    journal.add(0.0, "job_start", started_at=1.0)
    journal.add(1.5, "failure", "kill", "job", 0, detail="injected: kill", attempt=0)
    with open(journal.events_path, "a") as handle:
        handle.write('{"event_id": 2, "t_s": 2')  # a supervisor killed mid-write
    again = Journal.open(tmp_path)
    assert [e.kind for e in again.events] == ["job_start", "failure"]
    row = again.add(3.0, "detected", "kill", "job", 0)
    assert row.event_id == 2
    frame = Journal.open(tmp_path).frame()
    assert list(frame.columns) == list(EVENT_COLUMNS) and frame["event_id"].tolist() == [0, 1, 2]


def _journal(tmp_path):
    """Steps 1-10 at 1 s each with a checkpoint at 5 (written 0.5 s after the step), a kill at 8.5 s, detection
    at 9 s, a restart whose first step (6) lands at 11 s, then steps 7-10 and the end."""
    j = Journal.open(tmp_path)
    j.add(0.0, "job_start", started_at=1_800_000_000.0)
    for k in range(1, 6):
        j.add_step(float(k), k, 0)
    j.add(5.5, "checkpoint_end", step=5, detail="step=5")
    for k in (6, 7):
        j.add_step(k + 0.5, k, 0)
    j.add(8.5, "failure", "kill", "job", 0, detail="injected: kill", injection=0, step=7)
    j.add(9.0, "detected", "kill", "job", 0)
    j.add(9.0, "restart_start", node=1, attempt=1)
    for k in range(6, 11):
        j.add_step(11.0 + (k - 6), k, 1)
    j.add(15.0, "job_complete", node=1, attempt=1)
    j.add(15.0, "window_end", attempt=1, detail="target step reached")
    return j


def test_the_measured_buckets_sum_to_the_runs_wall_time_with_the_rework_as_lost(tmp_path):
    summary = measured_summary(_journal(tmp_path), 10, 100, 5, 7, 2.0)
    s = summary.job_time_s
    assert summary.window_s == 15.0 and summary.completion_s == 15.0
    assert sum(s[k] for k in goodput.JOB_TIME_KEYS) == pytest.approx(15.0)
    assert goodput.buckets_sum_gpu_h(summary.goodput_breakdown_gpu_h) == pytest.approx(15.0 / 3600)
    assert s["checkpoint"] == pytest.approx(0.5)
    # steps 6 and 7 of the first start (2 s) and the cut step (1 s) are lost; the detection (0.5 s) and the restart
    # until one median step (1 s) before the second start's first step are restart time; steps 1-5 and 6-10 kept
    assert s["lost_rework"] == pytest.approx(3.0)
    assert s["restart"] == pytest.approx(0.5 + 1.0)
    assert s["productive"] == pytest.approx(10.0)
    m = summary.measured
    assert m.failures_injected == 1 and m.failures_organic == 0 and m.final_step == 10
    assert m.steps_trained_again == 2 == m.rework_steps_expected
    assert summary.interruptions.by_category == {"kill": 1}
    assert summary.tokens_trained == summary.tokens_target == 1000
    assert m.started_at.startswith("2027-01-15T08:00:00")


def test_rework_is_counted_from_the_newest_checkpoint_of_any_earlier_start(tmp_path):
    j = _journal(tmp_path)
    assert rework_steps_expected(j) == 2
    json.dumps(measured_summary(j, 10, 100, 5, 7, 2.0).to_json())  # JSON-ready for the catalog


def test_execute_backend_is_simulate_by_default_and_outside_the_config_digest():
    base = load_config(DEMO)
    local = load_config(DEMO, ["execute.backend=local", "execute.inject.failures=3"])
    assert base.config.execute.backend == "simulate" and local.config.execute.backend == "local"
    assert base.digest == local.digest  # how a committed window runs is chosen at execute time


def test_more_faults_than_steps_after_the_first_checkpoint_are_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"execute\.inject\.failures.*inject fewer"):
        load_config(DEMO, ["execute.steps=20", "execute.checkpoint_every=10", "execute.inject.failures=15"])
    with pytest.raises(ConfigError, match=r"execute\.backend"):
        load_config(DEMO, ["execute.backend=cloud"])

"""How the Slurm backend reads a start's end from Slurm's own records, without a cluster: sacct's lines (accounting
database or job completion log), node states, and the end a start is given."""

import time

import pytest

from campaign.execution import slurm
from campaign.execution.injection import Injection
from campaign.execution.slurm import JobEnd, JobState, end_state, is_node_lost, parse_sacct
from campaign.execution.supervisor import NODE_LOSS_WAIT_S
from campaign.rehearsal.contract import Metrics

# `sacct --completion --duplicates --parsable2 --noheader --format=State,NodeList,ExitCode` on Slurm 22.05 for a job
# failed by its node, killed, requeued by scontrol (the completion log writes that as a PENDING line) and cancelled.
COMPLETION_LOG = """NODE_FAIL|n0|0:0
CANCELLED by 0|n1|0:0
PENDING|n1|0:15
FAILED|None assigned|75:0
"""


def test_sacct_lines_give_each_ended_start_oldest_first_and_skip_a_requeue_line():
    assert parse_sacct(COMPLETION_LOG) == [
        JobEnd("NODE_FAIL", "n0", 0, 0),
        JobEnd("CANCELLED", "n1", 0, 0),
        JobEnd("FAILED", "", 75, 0),
    ]
    assert parse_sacct("") == [] and parse_sacct("garbage\n") == []


@pytest.mark.parametrize(
    ("state", "lost"),
    [
        ("DOWN", True),
        ("IDLE+DRAIN", True),
        ("DOWN+NOT_RESPONDING", True),
        ("down*", True),
        ("IDLE+NOT_RESPONDING", True),
        ("IDLE", False),
        ("MIXED", False),
        ("ALLOCATED+COMPLETING", False),
        ("", False),
    ],
)
def test_a_node_is_lost_when_slurm_says_it_is_down_drained_failed_or_not_responding(state, lost):
    assert is_node_lost(state) is lost


def test_a_start_ended_by_its_node_is_node_fail_from_any_of_slurms_records(monkeypatch):
    pending = JobState("PENDING", 0, 0, "", 1)
    monkeypatch.setattr(slurm, "node_state", lambda node: {"n0": "DOWN", "n1": "IDLE"}[node])
    # recorded as such (accounting or completion log), or seen ending NODE_FAIL (a job that may not be requeued)
    assert end_state(pending, True, [JobEnd("NODE_FAIL", "n0", 0, 0)], "n0") == "NODE_FAIL"
    assert end_state(JobState("NODE_FAIL", 0, 0, "n0", 0), False, [], "n0") == "NODE_FAIL"
    # no record kept (no accounting, no completion log): requeued by Slurm off a node that is down now
    assert end_state(pending, True, [], "n0") == "NODE_FAIL"
    # requeued by Slurm with its node up (preempted, or requeued by an operator): not a node loss
    assert end_state(pending, True, [], "n1") == "REQUEUED"
    # otherwise the state Slurm recorded, or the state now
    assert (
        end_state(JobState("FAILED", 75, 0, "n1", 0), False, [JobEnd("FAILED", "n1", 75, 0)], "n1")
        == "FAILED"
    )
    assert end_state(JobState("COMPLETED", 0, 0, "n1", 0), False, [], "n1") == "COMPLETED"
    assert end_state(None, False, [], "") == ""


def test_a_node_the_run_set_down_is_remembered_until_it_is_resumed(monkeypatch, tmp_path):
    calls: list[list[str]] = []
    monkeypatch.setattr(slurm, "_run", lambda args, env=None: calls.append(args) or "")
    (tmp_path / "slurm.json").write_text('{"job_id": "7"}\n')
    assert slurm.lose_node(tmp_path, "", "why") == "the job's node is not known"
    assert slurm.lose_node(tmp_path, "n0", "campaign: injected node loss") is None
    assert calls[-1] == [
        "scontrol",
        "update",
        "NodeName=n0",
        "State=DOWN",
        "Reason=campaign: injected node loss",
    ]
    assert slurm.current_job(tmp_path) == "7"  # the job's record kept beside the node
    # Slurm has a RESUMEd node IDLE+NOT_RESPONDING until its slurmd answers: returned once it is back in service
    answers = iter(["State=IDLE+NOT_RESPONDING", "State=IDLE+NOT_RESPONDING", "State=IDLE", "State=IDLE"])
    monkeypatch.setattr(
        slurm, "_run", lambda args, env=None: calls.append(args) or (next(answers) if "show" in args else "")
    )
    assert slurm.return_nodes(tmp_path) == ["n0"]
    resumed = calls.index(["scontrol", "update", "NodeName=n0", "State=RESUME"])
    shown = [c for c in calls[resumed:] if c[:3] == ["scontrol", "show", "node"]]
    assert len(shown) == 3 and next(answers) == "State=IDLE"  # asked until it was back, then no more
    assert slurm.return_nodes(tmp_path) == []  # returned once


def test_a_finished_run_cancels_a_job_slurm_requeued_and_leaves_an_ended_one(monkeypatch, tmp_path):
    """Every node excluded after Slurm requeued the job itself: the job is PENDING and no start will follow."""
    calls: list[list[str]] = []
    monkeypatch.setattr(slurm, "_run", lambda args, env=None: calls.append(args) or "")
    (tmp_path / "slurm.json").write_text('{"job_id": "7", "downed_nodes": ["n0"]}\n')
    monkeypatch.setattr(slurm, "job_state", lambda job: JobState("PENDING", 0, 0, "", 2))
    slurm.finish(tmp_path)
    assert [c for c in calls if c[1] != "show"] == [
        ["scontrol", "update", "NodeName=n0", "State=RESUME"],
        ["scancel", "7"],
    ]
    calls.clear()
    monkeypatch.setattr(slurm, "job_state", lambda job: JobState("COMPLETED", 0, 0, "n1", 2))
    slurm.finish(tmp_path)
    assert calls == []


def _watch(tmp_path, lose_node):
    from campaign.execution.journal import Journal
    from campaign.execution.supervisor import RealRunSettings, _Watch

    settings = RealRunSettings(
        [], {}, 60, 128, 60.0, injections=(Injection(15, "node_loss"),), backend="slurm"
    )
    marker = tmp_path / "nodes" / "n0.lost"
    watch = _Watch(settings, Journal.open(tmp_path), 0.0, 0, 0, tmp_path / "s.json", marker, [], set())
    watch.lose_node = lose_node
    return watch, marker


def test_an_injected_node_loss_waits_for_slurm_to_end_the_start_once_the_node_is_down(tmp_path):
    watch, marker = _watch(tmp_path, lambda: None)
    at_15 = Metrics(losses=[(step, 1.0) for step in range(1, 16)])
    assert watch(at_15) is False and watch.reason == "node_loss" and not marker.exists()
    assert watch(at_15) is False  # no hang kill while Slurm fails and requeues the job
    watch.killed_at = time.time() - NODE_LOSS_WAIT_S - 1
    assert watch(at_15) is True  # Slurm never ended it: the supervisor kills it


def test_an_injected_node_loss_kills_the_start_when_the_node_may_not_be_set_down(tmp_path):
    watch, marker = _watch(tmp_path, lambda: "Access/permission denied")
    assert watch(Metrics(losses=[(step, 1.0) for step in range(1, 16)])) is True
    assert watch.reason == "node_loss" and marker.exists() and watch.lose_error == "Access/permission denied"

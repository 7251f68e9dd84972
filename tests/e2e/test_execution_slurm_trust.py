"""The Slurm backend's restarts that survive their own history, against the suite's real cluster (two nodes on this
host), with the trainer written from the contract alone (tests/helpers/contract_trainer.py): a restart after an
exclusion once the job has ended (requeuehold, ExcNodeList, release), a supervisor that adopts a job whose long
evaluation must not look like a hang, steps and checkpoints trained while no supervisor watched, and an operator's
scancel, which is a stop by a person."""

import json
import os
import pickle
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from campaign.execution.journal import Journal
from campaign.execution.measured import measured_summary
from campaign.execution.policy import outcome
from campaign.execution.supervisor import RealRunSettings, supervise
from campaign.rehearsal.harness import HarnessSettings, contract_env
from tests.helpers.paths import REPO
from tests.helpers.slurm_cluster import final_job_state as _final_state

TRAINER = REPO / "tests" / "helpers" / "contract_trainer.py"
VOCAB, STEPS, EVERY = 16, 60, 10
SCRIPT = (
    "import pickle, sys, pathlib; from campaign.execution.supervisor import supervise; "
    "supervise(pickle.load(open(sys.argv[1], 'rb')), pathlib.Path(sys.argv[2]))"
)


def settings(cluster, tmp_path, trainer=None, **kw):
    rows = np.random.default_rng(0).integers(0, VOCAB, size=(STEPS * 4, 33)).astype(np.uint32)
    np.save(tmp_path / "train.npy", rows)
    np.save(tmp_path / "heldout.npy", rows[:20])
    folder = tmp_path / "run"
    harness = HarnessSettings([], STEPS, 3, EVERY, 120, 0, 0, 128, batch_sequences=4)
    env = contract_env(
        tmp_path / "train.npy",
        tmp_path / "heldout.npy",
        VOCAB,
        harness,
        folder / "checkpoints",
        folder / "metrics.jsonl",
        tmp_path / "cache",
    )
    extra = {"CONTRACT_TRAINER_STEP_S": "0.05", "CONTRACT_TRAINER_LOG": str(tmp_path / "trainer-log.jsonl")}
    options = {
        "max_wall_s": 100,
        "hang_min_s": 1.0,
        "backoff_s": 0.1,
        "stop_grace_s": 2.0,
        "nodes": tuple(cluster.nodes),
        "backend": "slurm",
        **kw,
    }
    return folder, RealRunSettings(
        command=[sys.executable, str(TRAINER)],
        env={**os.environ, **env, **extra, **(trainer or {})},
        steps=STEPS,
        tokens_per_step=128,
        **options,
    )


def _steps_seen(folder, at_least):
    for _ in range(1200):
        steps = folder / "steps.jsonl"
        if steps.exists() and len(steps.read_text().splitlines()) >= at_least:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} steps")


def _supervisor(tmp_path, folder, run):
    (tmp_path / "s.pkl").write_bytes(pickle.dumps(run))
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path / "s.pkl"), str(folder)])


def test_a_restart_after_an_exclusion_requeues_the_ended_job_held_then_releases_it(cluster, tmp_path):
    """A hang after progress points at its node; with exclude_after 1 the node is excluded and the job, already
    ended, goes back through requeuehold, ExcNodeList and release, then finishes on the other node."""
    folder, run = settings(cluster, tmp_path, {"CONTRACT_TRAINER_HANG_AT": "15"}, exclude_after=1)
    journal = supervise(run, folder)
    excluded = journal.kinds("node_excluded")
    assert journal.kinds("job_complete") and outcome(journal) == "target", journal.end_detail()
    assert len(excluded) == 1 and journal.kinds("failure")[0].blame == "node"
    node = excluded[0].detail.split()[0].removeprefix("node=")
    shown = _final_state(json.loads((folder / "slurm.json").read_text())["job_id"])
    assert "JobState=COMPLETED" in shown and f"ExcNodeList={node}" in shown and "Restarts=1" in shown
    assert "SIGTERM" in journal.kinds("failure")[0].detail  # stopped gracefully (scancel --signal=TERM)


def test_an_adopting_supervisor_keeps_the_hang_limits_history_through_a_long_evaluation(cluster, tmp_path):
    """Steps of 0.1 s and an evaluation of 1.2 s every 10 steps: the hang limit (8 median steps) holds it. A
    supervisor killed for 2.5 s leaves some 25 lines that a new one reads at once; the limit it works with is the
    one measured, not the floor, so the next evaluation is no hang."""
    folder, run = settings(
        cluster,
        tmp_path,
        {
            "CONTRACT_TRAINER_STEP_S": "0.1",
            "CONTRACT_TRAINER_EVAL_EVERY": "10",
            "CONTRACT_TRAINER_EVAL_S": "1.2",
            "CAMPAIGN_SUPERVISOR_TIMEOUT_S": "30",
        },
        hang_factor=16.0,
        hang_min_s=0.5,
    )
    proc = _supervisor(tmp_path, folder, run)
    _steps_seen(folder, 12)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(2.5)
    journal = supervise(run, folder)
    assert journal.kinds("supervisor_resumed") and not journal.kinds("failure"), journal.kinds("failure")
    assert journal.kinds("job_complete")
    assert sorted(s.step for s in journal.steps) == list(range(1, STEPS + 1))


def test_steps_and_checkpoints_trained_while_no_supervisor_watched_are_read_back(cluster, tmp_path):
    """The supervisor dies; the job trains on until its heartbeat goes stale (3 s), writing steps and checkpoints
    nobody reads, then stops itself. The next supervisor reads them back into the journal before the gap is a
    failure, and restarts from the newest checkpoint: nothing trained is lost to the accounting."""
    folder, run = settings(
        cluster, tmp_path, {"CONTRACT_TRAINER_STEP_S": "0.1", "CAMPAIGN_SUPERVISOR_TIMEOUT_S": "3"}
    )
    proc = _supervisor(tmp_path, folder, run)
    _steps_seen(folder, 5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    seen = max(s.step for s in Journal.open(folder).steps)
    job = json.loads((folder / "slurm.json").read_text())["job_id"]
    _final_state(job)  # the job stops itself once the heartbeat is stale
    journal = supervise(run, folder)
    unsupervised = [s.step for s in journal.steps if s.attempt == 0 and s.step > seen]
    assert unsupervised and max(unsupervised) >= seen + 10
    read_back = [e for e in journal.kinds("checkpoint_end") if "read back" in e.detail]
    assert read_back
    resumed = journal.kinds("restart_end")[0].step
    assert resumed == max(e.step for e in read_back)  # the restart resumed from what was read back
    m = measured_summary(journal, STEPS, 128, EVERY, 3, 2.0).to_json()["measured"]
    assert m["final_step"] == STEPS and m["steps_trained_again"] == m["rework_steps_expected"]


@pytest.mark.parametrize("mode", ["stop", "requeue"])
def test_an_operators_scancel_is_a_stop_by_a_person_never_a_nodes_failure(cluster, tmp_path, mode):
    folder, run = settings(cluster, tmp_path, {"CONTRACT_TRAINER_STEP_S": "0.1"}, on_operator_cancel=mode)
    proc = _supervisor(tmp_path, folder, run)
    _steps_seen(folder, 5)
    job = json.loads((folder / "slurm.json").read_text())["job_id"]
    subprocess.run(["scancel", job], check=True)
    proc.wait(timeout=100)
    journal = Journal.open(folder)
    assert not journal.kinds("node_excluded")
    if mode == "stop":
        assert outcome(journal) == "stopped" and not journal.kinds("failure")
        assert "cancelled outside campaign" in journal.end_detail()
    else:
        failure = journal.kinds("failure")[0]
        assert failure.category == "operator_cancel" and failure.blame == "none"
        assert outcome(journal) == "target"

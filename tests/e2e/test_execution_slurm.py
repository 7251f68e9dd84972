"""The Slurm backend against a real cluster on this host (Debian's slurmctld, munge and two slurmd, nodes n0 and n1,
started and stopped by the fixture): one batch job submitted with --requeue, killed for real (scancel
--signal=KILL) and requeued under the same job id, hung (SIGSTOP) and detected, then its node set DOWN so that Slurm
itself fails it (NODE_FAIL) and requeues it; the node is excluded, the job finishes on the other node and the lost
node is back in service. A job left by a supervisor killed with SIGKILL stops by itself; one left by a supervisor
started again in time is adopted."""

import json
import os
import subprocess
import sys
import time

import numpy as np

from campaign.execution.injection import Injection
from campaign.execution.measured import measured_summary
from campaign.execution.supervisor import RealRunSettings, supervise
from campaign.rehearsal.harness import HarnessSettings, contract_env
from tests.helpers.paths import NUMPY_TRAINER
from tests.helpers.slurm_cluster import final_job_state as _final_state

VOCAB, STEPS = 16, 60


def _node_state(node: str, limit_s: float = 10.0) -> str:
    """sinfo's state of `node` once it is idle, or as it is after `limit_s`: a RESUMEd node shows "idle*" (not
    responding) until slurmctld's next ping of it."""
    until = time.monotonic() + limit_s
    while True:
        shown = subprocess.run(
            ["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True, text=True, check=True
        )
        if shown.stdout.strip() == "idle" or time.monotonic() > until:
            return shown.stdout.strip()
        time.sleep(0.2)


def test_a_slurm_job_is_requeued_after_a_kill_a_hang_and_a_node_slurm_failed_then_ends_on_another_node(
    cluster, tmp_path
):
    rows = np.random.default_rng(0).integers(0, VOCAB, size=(STEPS * 4, 33)).astype(np.uint32)
    np.save(tmp_path / "train.npy", rows)
    np.save(tmp_path / "heldout.npy", rows[:20])
    folder = tmp_path / "run"
    harness = HarnessSettings([], STEPS, 3, 10, 120, 0, 0, 128, batch_sequences=4)
    env = contract_env(
        tmp_path / "train.npy",
        tmp_path / "heldout.npy",
        VOCAB,
        harness,
        folder / "checkpoints",
        folder / "metrics.jsonl",
        tmp_path / "cache",
    )
    settings = RealRunSettings(
        command=[sys.executable, str(NUMPY_TRAINER)],
        env={**os.environ, **env, "NUMPY_TRAINER_STEP_S": "0.03"},
        steps=STEPS,
        tokens_per_step=128,
        max_wall_s=120,
        hang_min_s=2.0,  # the default: a busy machine stalls a 0.03 s step for half a second now and then
        backoff_s=0.1,
        stop_grace_s=2.0,  # the hung (SIGSTOPped) start: SIGTERM, then SIGKILL after 2 s
        nodes=tuple(cluster.nodes),
        exclude_after=3,  # the kill and the hang exclude no node; the node loss excludes its node at once
        injections=(Injection(15, "kill"), Injection(27, "hang"), Injection(44, "node_loss")),
        backend="slurm",
    )
    journal = supervise(settings, folder)
    job = json.loads((folder / "slurm.json").read_text())["job_id"]
    kinds = [e.kind for e in journal.events if e.kind != "checkpoint_end"]
    assert kinds[:2] == ["job_start", "job_submitted"] and kinds.count("job_requeued") == 3
    failures = journal.kinds("failure")
    assert [f.category for f in failures] == ["kill", "hang", "node_lost"]
    assert all(f.detail.startswith("injected") for f in failures)
    # the node loss was Slurm's own: the node set DOWN, Slurm ended the start NODE_FAIL and requeued the job
    assert "NODE_FAIL" in failures[2].detail
    lost = journal.kinds("node_excluded")[0].detail.split()[0].removeprefix("node=")
    other = next(n for n in cluster.nodes if n != lost)
    assert [e.detail.split()[0] for e in journal.kinds("node_excluded")] == [f"node={lost}"]
    # one job throughout: requeued after the kill and the hang by campaign, after the node failure by Slurm, and
    # finished on the other node with the lost one excluded; the lost node is back in service
    shown = _final_state(job)
    ended = subprocess.run(
        [
            "sacct",
            "--completion",
            "-j",
            job,
            "--duplicates",
            "--parsable2",
            "--noheader",
            "-o",
            "State,NodeList",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert f"NODE_FAIL|{lost}" in ended and ended[-1] == f"COMPLETED|{other}"
    assert "JobState=COMPLETED" in shown and "Restarts=3" in shown
    assert f"ExcNodeList={lost} " in shown and f" NodeList={other} " in shown
    assert _node_state(lost) == "idle"
    assert journal.kinds("job_complete") and journal.kinds("window_end")[0].detail == "target step reached"
    # each restart resumed at the checkpoint before its fault, and nothing was trained twice beyond that rework
    metrics = (folder / "metrics.jsonl").read_text()
    # A fault lands at or a little after its injected step (15, 27, 44) on a busy machine, so each restart resumed at
    # the last checkpoint the failed start wrote: at or after the one before the injected step, never past the
    # step the start failed at.
    resumed = [json.loads(line)["step"] for line in metrics.splitlines() if '"event": "resumed"' in line]
    assert len(resumed) == 3 and all(r % 10 == 0 for r in resumed)
    for r, f, before in zip(resumed, failures, (10, 20, 40), strict=True):
        assert before <= r <= f.step
    m = measured_summary(journal, STEPS, 128, 10, 3, 2.0).to_json()["measured"]
    assert m["steps_trained_again"] == m["rework_steps_expected"]


def test_a_slurm_job_stops_when_campaigns_supervisor_is_killed(cluster, tmp_path):
    """kill -9 of the supervisor: its heartbeat file stops, and the batch script kills the trainer."""
    import pickle
    import signal

    rows = np.random.default_rng(0).integers(0, VOCAB, size=(STEPS * 4, 33)).astype(np.uint32)
    np.save(tmp_path / "train.npy", rows)
    np.save(tmp_path / "heldout.npy", rows[:20])
    folder = tmp_path / "run"
    harness = HarnessSettings([], STEPS, 3, 10, 120, 0, 0, 128, batch_sequences=4)
    env = contract_env(
        tmp_path / "train.npy",
        tmp_path / "heldout.npy",
        VOCAB,
        harness,
        folder / "checkpoints",
        folder / "metrics.jsonl",
        tmp_path / "cache",
    )
    settings = RealRunSettings(
        command=[sys.executable, str(NUMPY_TRAINER)],
        env={**os.environ, **env, "NUMPY_TRAINER_STEP_S": "1", "CAMPAIGN_SUPERVISOR_TIMEOUT_S": "2"},
        steps=STEPS,
        tokens_per_step=128,
        max_wall_s=120,
        nodes=tuple(cluster.nodes),
        backend="slurm",
    )
    (tmp_path / "s.pkl").write_bytes(pickle.dumps(settings))
    script = (
        "import pickle, sys, pathlib; from campaign.execution.supervisor import supervise; "
        "supervise(pickle.load(open(sys.argv[1], 'rb')), pathlib.Path(sys.argv[2]))"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "s.pkl"), str(folder)])
    for _ in range(600):  # until the job trains
        if (folder / "steps.jsonl").exists():
            break
        time.sleep(0.05)
    job = json.loads((folder / "slurm.json").read_text())["job_id"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    shown = _final_state(job)  # the script sees the stale heartbeat within about 3 s, then the job ends
    assert "JobState=FAILED" in shown and "ExitCode=75:0" in shown
    assert "heartbeat stopped" in next((folder / "logs").glob("slurm-*.err")).read_text()


def test_a_supervisor_started_again_adopts_the_job_that_still_trains(cluster, tmp_path):
    """kill -9 of the supervisor, then a new one before the heartbeat goes stale: it supervises the same job to
    its end, with no failure and no requeue, and loses no event."""
    import pickle
    import signal

    from campaign.execution.journal import Journal

    rows = np.random.default_rng(0).integers(0, VOCAB, size=(STEPS * 4, 33)).astype(np.uint32)
    np.save(tmp_path / "train.npy", rows)
    np.save(tmp_path / "heldout.npy", rows[:20])
    folder = tmp_path / "run"
    harness = HarnessSettings([], STEPS, 3, 10, 120, 0, 0, 128, batch_sequences=4)
    env = contract_env(
        tmp_path / "train.npy",
        tmp_path / "heldout.npy",
        VOCAB,
        harness,
        folder / "checkpoints",
        folder / "metrics.jsonl",
        tmp_path / "cache",
    )
    settings = RealRunSettings(
        command=[sys.executable, str(NUMPY_TRAINER)],
        env={**os.environ, **env, "NUMPY_TRAINER_STEP_S": "0.05", "CAMPAIGN_SUPERVISOR_TIMEOUT_S": "30"},
        steps=STEPS,
        tokens_per_step=128,
        max_wall_s=120,
        nodes=tuple(cluster.nodes),
        backend="slurm",
    )
    (tmp_path / "s.pkl").write_bytes(pickle.dumps(settings))
    script = (
        "import pickle, sys, pathlib; from campaign.execution.supervisor import supervise; "
        "supervise(pickle.load(open(sys.argv[1], 'rb')), pathlib.Path(sys.argv[2]))"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "s.pkl"), str(folder)])
    # until the job has trained a few steps: at 0.05 s a step it has some 2.7 s left to train when the new supervisor
    # starts, so that one adopts a job that still runs, even on a busy machine
    for _ in range(600):
        steps = folder / "steps.jsonl"
        if steps.exists() and len(steps.read_text().splitlines()) >= 5:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = Journal.open(folder).events
    journal = supervise(settings, folder)
    assert journal.events[: len(before)] == before
    assert (
        journal.kinds("supervisor_resumed") and not journal.kinds("failure") and journal.kinds("job_complete")
    )
    job = json.loads((folder / "slurm.json").read_text())["job_id"]
    shown = _final_state(job)
    assert "JobState=COMPLETED" in shown and "Restarts=0" in shown
    # every step of the one start was seen once, by one supervisor or the other
    assert sorted(s.step for s in journal.steps) == list(range(1, STEPS + 1))

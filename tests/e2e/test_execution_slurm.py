"""The Slurm backend against a real one-node cluster (Debian's slurmctld, slurmd and munge, started and stopped by
the fixture): one batch job submitted with --requeue, killed for real (scancel --signal=KILL) and requeued under
the same job id, then hung (SIGSTOP), detected and its node excluded; and a job left by a supervisor killed with
SIGKILL stops by itself."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from campaign.execution.injection import Injection
from campaign.execution.measured import measured_summary
from campaign.execution.supervisor import RealRunSettings, supervise
from campaign.rehearsal.harness import HarnessSettings, contract_env
from tests.helpers.paths import NUMPY_TRAINER
from tests.helpers.slurm_cluster import start_cluster

VOCAB, STEPS = 16, 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running, reason = start_cluster(tmp_path_factory.mktemp("slurm"))
    if running is None:
        pytest.skip(reason)
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(running.conf)
    yield running
    running.stop()
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old


def test_a_slurm_job_is_requeued_after_a_real_kill_and_its_node_excluded_after_a_hang(cluster, tmp_path):
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
        hang_min_s=0.5,
        backoff_s=0.1,
        nodes=(cluster.host,),
        exclude_after=2,
        injections=(Injection(15, "kill"), Injection(33, "hang")),
        backend="slurm",
    )
    journal = supervise(settings, folder)
    job = json.loads((folder / "slurm.json").read_text())["job_id"]
    kinds = [e["kind"] for e in journal.events if e["kind"] != "checkpoint_end"]
    assert kinds[:2] == ["job_start", "job_submitted"] and "job_requeued" in kinds
    failures = journal.kinds("failure")
    assert [f["category"] for f in failures] == ["kill", "hang"]
    assert all(f["detail"].startswith("injected") for f in failures)
    # the same job came back after the kill: Slurm counts its restart; the hang's node is excluded (2 failures)
    shown = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, check=True)
    assert "Restarts=1" in shown.stdout
    assert journal.kinds("node_excluded")[0]["detail"].startswith(f"node={cluster.host}")
    assert journal.kinds("window_end")[0]["detail"].startswith("no node left")
    # the restart resumed at the checkpoint before the kill, and nothing was trained twice beyond that rework
    metrics = (folder / "metrics.jsonl").read_text()
    assert '{"event": "resumed", "step": 10}' in metrics
    m = measured_summary(journal, STEPS, 128, 10, 3, 2.0)["measured"]
    assert m["steps_trained_again"] == m["rework_steps_expected"]


def test_a_slurm_job_stops_when_campaigns_supervisor_is_killed(cluster, tmp_path):
    """kill -9 of the supervisor: its heartbeat file stops, and the batch script kills the trainer."""
    import pickle
    import signal
    import time

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
        nodes=(cluster.host,),
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
    for _ in range(300):
        shown = subprocess.run(
            ["scontrol", "show", "job", "-o", job], capture_output=True, text=True, check=True
        )
        if "JobState=RUNNING" not in shown.stdout:
            break
        time.sleep(0.1)
    assert "JobState=FAILED" in shown.stdout and "ExitCode=75:0" in shown.stdout
    assert "heartbeat stopped" in next((folder / "logs").glob("slurm-*.err")).read_text()


def test_a_supervisor_started_again_adopts_the_job_that_still_trains(cluster, tmp_path):
    """kill -9 of the supervisor, then a new one before the heartbeat goes stale: it supervises the same job to
    its end, with no failure and no requeue, and loses no event."""
    import pickle
    import signal
    import time

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
        env={**os.environ, **env, "NUMPY_TRAINER_STEP_S": "0.03", "CAMPAIGN_SUPERVISOR_TIMEOUT_S": "30"},
        steps=STEPS,
        tokens_per_step=128,
        max_wall_s=120,
        nodes=(cluster.host,),
        backend="slurm",
    )
    (tmp_path / "s.pkl").write_bytes(pickle.dumps(settings))
    script = (
        "import pickle, sys, pathlib; from campaign.execution.supervisor import supervise; "
        "supervise(pickle.load(open(sys.argv[1], 'rb')), pathlib.Path(sys.argv[2]))"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "s.pkl"), str(folder)])
    for _ in range(600):  # until the job has trained a few steps
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
    shown = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, check=True)
    assert "JobState=COMPLETED" in shown.stdout and "Restarts=0" in shown.stdout
    # every step of the one start was seen once, by one supervisor or the other
    assert sorted(s["step"] for s in journal.steps) == list(range(1, STEPS + 1))

"""A real run of a contract-following trainer (the NumPy bigram model) under the execution supervisor: injected
kills, a hang and a lost node, each restarted from the last checkpoint; an organic hang; a supervisor killed
with SIGKILL that leaves no trainer behind and resumes without losing events."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from campaign import goodput
from campaign.execution.injection import Injection
from campaign.execution.journal import Journal
from campaign.execution.measured import measured_summary
from campaign.execution.supervisor import RealRunSettings, supervise
from campaign.rehearsal.harness import HarnessSettings, contract_env
from campaign.rehearsal.processes import group_members
from tests.helpers.paths import NUMPY_TRAINER

VOCAB = 16
STEPS = 60


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokens")
    rows = np.random.default_rng(0).integers(0, VOCAB, size=(STEPS * 4, 33)).astype(np.uint32)
    np.save(root / "train.npy", rows)
    np.save(root / "heldout.npy", rows[:20])
    return root


def settings(data, folder, injections=(), mode="good", **kw):
    harness = HarnessSettings(
        command=[],
        steps=STEPS,
        seed=3,
        checkpoint_every=10,
        timeout_s=120,
        min_loss_drop=0,
        restore_tolerance=0,
        tokens_per_step=128,
        batch_sequences=4,
        extra_env={"NUMPY_TRAINER_MODE": mode},
    )
    env = contract_env(
        data / "train.npy",
        data / "heldout.npy",
        VOCAB,
        harness,
        folder / "checkpoints",
        folder / "metrics.jsonl",
        data / "cache",
    )
    return RealRunSettings(
        command=[sys.executable, str(NUMPY_TRAINER)],
        env={**os.environ, **env},
        steps=STEPS,
        tokens_per_step=128,
        injections=tuple(injections),
        **{
            "max_wall_s": 120,
            "hang_min_s": 0.5,
            "backoff_s": 0.1,
            "stop_grace_s": 1.0,
            "nodes": ("n0", "n1", "n2"),
            **kw,
        },
    )


def test_injected_kill_hang_and_node_loss_restart_from_the_last_checkpoint_and_reach_the_target(
    data, tmp_path
):
    faults = (Injection(15, "kill"), Injection(33, "hang"), Injection(47, "node_loss"))
    journal = supervise(settings(data, tmp_path / "run", faults), tmp_path / "run")
    failures = journal.kinds("failure")
    assert [f.category for f in failures] == ["kill", "hang", "node_lost"]
    assert all(f.detail.startswith("injected") for f in failures)
    assert len(journal.kinds("restart_start")) == 3 and journal.kinds("job_complete")
    # every restart resumed at the newest checkpoint completed before its failure (the trainer says so in its
    # metrics): the fault fires at its step, the start ends a poll later, and a checkpoint the trainer was still
    # writing when it was killed is not one (then the one before it is, and no start fell back below a complete one)
    resumed = [
        int(line.split(":")[-1].rstrip("}\n"))
        for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
        if '"resumed"' in line
    ]
    ends = journal.kinds("checkpoint_end")
    completed = [max((c.at_step for c in ends if c.event_id < f.event_id), default=0) for f in failures]
    assert resumed == completed and not journal.kinds("checkpoint_fallback")
    assert all(0 <= f.step - step < 20 for f, step in zip(failures, completed, strict=True))
    # the lost node is excluded at once; the injected kill and hang point at no node and exclude none
    excluded = [e.detail.split()[0] for e in journal.kinds("node_excluded")]
    assert excluded == [f"node={('n0', 'n1', 'n2')[failures[2].node]}"]
    assert [f.blame for f in failures] == ["injected", "injected", "node"]
    times = [e.t_s for e in journal.events]
    assert times == sorted(times)
    summary = measured_summary(journal, STEPS, 128, 10, 3, 2.0)
    m = summary.measured
    assert m.final_step == STEPS and m.steps_trained_again == m.rework_steps_expected > 0
    assert summary.interruptions.unexpected == 3 and m.failures_injected == 3
    assert goodput.buckets_sum_gpu_h(summary.goodput_breakdown_gpu_h) == pytest.approx(
        summary.window_s / 3600
    )
    hang = journal.kinds("detected")[1].t_s - failures[1].t_s
    assert hang >= 0.5  # never declared before the stated limit (its floor here)


def test_a_trainer_that_stops_writing_steps_is_a_hang_detected_after_the_limit(data, tmp_path):
    journal = supervise(settings(data, tmp_path / "run", mode="hang", max_restarts=0), tmp_path / "run")
    failure, detected = journal.kinds("failure")[0], journal.kinds("detected")[0]
    assert failure.category == "hang" and failure.detail.startswith("organic: no new step for")
    limit = float(failure.detail.split("limit ")[1].split(" s")[0])
    assert detected.t_s - failure.t_s >= limit
    assert journal.kinds("window_end")[0].detail.endswith("more than execute.max_restarts")


def test_a_killed_supervisor_leaves_no_trainer_and_the_next_one_resumes_without_losing_events(data, tmp_path):
    folder = tmp_path / "run"
    script = (
        "import pickle, sys; from campaign.execution.supervisor import supervise; "
        "supervise(pickle.load(open(sys.argv[1], 'rb')), __import__('pathlib').Path(sys.argv[2]))"
    )
    import pickle

    (tmp_path / "s.pkl").write_bytes(pickle.dumps(settings(data, folder, mode="hang", hang_min_s=60)))
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "s.pkl"), str(folder)])
    status = folder / "logs" / "attempt-0.supervisor.json"
    trainer = None
    for _ in range(600):  # the trainer hangs at step 3: wait for its steps, then kill the supervisor
        if status.exists() and (folder / "steps.jsonl").exists():
            trainer = __import__("json").loads(status.read_text()).get("trainer_pid")
            if trainer and len((folder / "steps.jsonl").read_text().splitlines()) >= 3:
                break
        time.sleep(0.05)
    assert trainer
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for _ in range(200):  # the kernel tells the process supervisor, which kills the trainer's group
        if not group_members(trainer):
            break
        time.sleep(0.05)
    assert not group_members(trainer)
    before = Journal.open(folder).events
    journal = supervise(settings(data, folder, max_restarts=1), folder)  # a good trainer this time
    assert journal.events[: len(before)] == before
    lost = journal.kinds("failure")[0]
    assert lost.category == "supervisor_lost" and journal.kinds("job_complete")
    assert Journal.open(folder).is_finished()


def test_each_event_is_heard_as_it_is_written_and_a_stop_request_ends_the_run_cancelled(data, tmp_path):
    """The supervisor's `on_event` hears every event once it is on disk, in order, while the run goes; a stop
    requested (here once the second failure is heard) ends the run before the next start, its end `cancelled`."""
    from campaign.execution.stopping import StopRequest

    folder = tmp_path / "run"
    heard, on_disk, occurred = [], [], []

    def on_event(event, occurred_at):
        heard.append(event)
        occurred.append(occurred_at)
        on_disk.append(len((folder / "events.jsonl").read_text().splitlines()))

    stop = StopRequest(
        poll=lambda: "asked by the test" if sum(e.kind == "failure" for e in heard) >= 2 else None,
        poll_every_s=0.0,
    )
    journal = supervise(settings(data, folder, mode="crash"), folder, on_event=on_event, stop=stop)
    kinds = [e.kind for e in heard]
    assert kinds == [e.kind for e in journal.events]
    assert kinds[:5] == ["job_start", "failure", "detected", "restart_start", "restart_end"]
    assert kinds[-1] == "window_end" and kinds.count("failure") == 2 and kinds.count("restart_end") == 1
    assert all(n == e.event_id + 1 for n, e in zip(on_disk, heard, strict=True))  # written, then heard
    started = journal.events[0].started_at
    assert all(at == pytest.approx(started + e.t_s) for e, at in zip(heard, occurred, strict=True))
    assert heard[1].category == "exit_code" and heard[1].detail.startswith("organic: exit code 3")
    assert journal.end_detail() == "cancelled: asked by the test"
    assert supervise(settings(data, folder), folder).events == journal.events  # ended: not run again


def test_sigterm_to_a_running_execute_stops_the_trainer_and_records_a_cancelled_end(data, tmp_path):
    """SIGTERM (what a cancelled flow run's process gets) asks the supervisor to stop: it kills the trainer's
    group, records `window_end` with reason cancelled, then hands the signal back to its previous handler."""
    import json
    import pickle

    folder = tmp_path / "run"
    script = (
        "import pickle, sys, pathlib\n"
        "from campaign.execution.stopping import StopRequest, stop_on_signals\n"
        "from campaign.execution.supervisor import supervise\n"
        "stop = StopRequest()\n"
        "with stop_on_signals(stop):\n"
        "    supervise(pickle.load(open(sys.argv[1], 'rb')), pathlib.Path(sys.argv[2]), stop=stop)\n"
        "print('not reached: the signal was handed back')\n"
    )
    (tmp_path / "s.pkl").write_bytes(pickle.dumps(settings(data, folder, mode="hang", hang_min_s=60)))
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "s.pkl"), str(folder)], stdout=subprocess.PIPE
    )
    status = folder / "logs" / "attempt-0.supervisor.json"
    trainer = None
    for _ in range(600):  # the trainer hangs at step 3 (for 600 s): wait for its steps
        if status.exists() and (folder / "steps.jsonl").exists():
            trainer = json.loads(status.read_text()).get("trainer_pid")
            if trainer and len((folder / "steps.jsonl").read_text().splitlines()) >= 3:
                break
        time.sleep(0.05)
    assert trainer and group_members(trainer)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM and b"not reached" not in out
    assert not group_members(trainer)
    journal = Journal.open(folder)
    end = journal.kinds("window_end")
    assert len(end) == 1 and end[0].detail.startswith("cancelled: SIGTERM received")
    assert "stopped after step 3" in end[0].detail and not journal.kinds("failure")
    summary = measured_summary(journal, STEPS, 128, 10, 3, 2.0)
    assert summary.measured.end == end[0].detail and not summary.completed

"""The harness against a third-party trainer (a NumPy bigram model that knows only the trainer contract)."""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from campaign.rehearsal import contract
from campaign.rehearsal.harness import HarnessSettings, choose_kill_step, rehearse
from campaign.rehearsal.processes import group_members
from campaign.rehearsal.sandbox import sandbox_problem
from tests.helpers.paths import NUMPY_TRAINER

TRAINER = NUMPY_TRAINER
VOCAB = 16


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Tokens a bigram model can learn: each token is mostly followed by (3 x token + 1) mod 16."""
    rng = np.random.default_rng(0)
    n = 20_000
    stream = np.empty(n, dtype=np.uint32)
    stream[0] = 0
    for i in range(1, n):
        stream[i] = (3 * stream[i - 1] + 1) % VOCAB if rng.random() < 0.9 else rng.integers(VOCAB)
    rows = stream[: n // 33 * 33].reshape(-1, 33)
    root = tmp_path_factory.mktemp("tokens")
    np.save(root / "train.npy", rows[:-40])
    np.save(root / "heldout.npy", rows[-40:])
    return root / "train.npy", root / "heldout.npy"


def settings(mode="good", steps=40, tolerance=0.0, timeout_s=60.0, lr=1.0, command=None, **env):
    return HarnessSettings(
        command=command or [sys.executable, str(TRAINER)],
        steps=steps,
        seed=3,
        checkpoint_every=10,
        timeout_s=timeout_s,
        min_loss_drop=0.5,
        restore_tolerance=tolerance,
        tokens_per_step=4 * 32,
        batch_sequences=4,
        extra_env={"NUMPY_TRAINER_MODE": mode, contract.ENV_LEARNING_RATE: str(lr), **env},
    )


def run(data, tmp_path, **kwargs):
    train, heldout = data
    return rehearse(train, heldout, VOCAB, settings(**kwargs), tmp_path / "work")


def test_a_third_party_trainer_that_resumes_correctly_passes(data, tmp_path):
    result = run(data, tmp_path)
    assert result.passed, result.problems
    d = result.details
    assert (
        d["kill_after_checkpoint"] < d["kill_step"] < 40 and d["kill_after_checkpoint"] <= d["resumed_step"]
    )
    assert d["killed_at_step"] >= d["kill_step"]
    assert d["restore_check"].startswith("bit-identical over")
    assert d["loss_drop"] >= 0.5 and d["heldout_last"] < d["heldout_first"]
    assert (
        result.timings["tokens_per_s"] > 0 and "tokens_per_s" not in d
    )  # details repeat exactly; timings vary
    # what each start cost in CPU seconds, the trainer's processes included (reaped by the supervisor)
    assert all(
        result.timings[f"{run}_cpu_s"] > 0 for run in ("reference", "control", "faulted_1", "faulted_2")
    )
    # the reference and the restarted run wrote what the contract asks; the env file reproduces a start
    env = json.loads((tmp_path / "work" / "env.json").read_text())["env"]
    assert set(contract.REQUIRED_ENV) <= set(env)
    assert "PASS" not in result.summary() and "killed at step" in result.summary()
    # the verdict says what was checked: data dependence, the checkpoint folder, a restore without the old rows
    checks = " | ".join(d["checks"])
    assert "a control run on shifted rows differs at step" in checks and d["control_differs_at_step"] >= 1
    assert "checkpoint folder held new files" in checks and "without the rows of steps 1 to" in checks
    assert d["blanked_rows"] == d["resumed_step"] * 4


def test_a_start_the_kill_could_not_stop_before_the_last_checkpoint_is_tried_again(data, tmp_path):
    # The first faulted start (the trainer's third) shows every step at once, as a trainer too fast for the kill
    # on a busy machine does: no step would be left to compare after a restore, so it proves nothing either way.
    result = run(data, tmp_path, NUMPY_TRAINER_BUFFERED_STARTS="3")
    assert result.passed, result.problems
    d = result.details
    assert result.timings["faulted_1_starts"] == 2
    assert d["resumed_step"] < d["killed_at_step"] and d["restore_compared_steps"] == 40 - d["resumed_step"]
    assert (tmp_path / "work" / "faulted" / "logs" / "faulted-1-attempt-2.stderr.log").exists()


def test_a_trainer_the_kill_never_stops_before_its_last_checkpoint_fails_saying_so(data, tmp_path):
    result = run(data, tmp_path, NUMPY_TRAINER_BUFFERED_STARTS="3,4,5")
    assert not result.passed
    assert "in 3 starts the trainer wrote its last checkpoint (step 40) before the kill" in result.problems[0]
    assert "raise rehearsal.steps" in result.fixes[0]
    assert "bit-identical" not in result.summary()


def test_a_trainer_that_never_reads_the_data_and_writes_no_checkpoint_files_fails(data, tmp_path):
    """A made-up falling curve, checkpoint events without files, a "resume" read from its own metrics."""
    result = run(data, tmp_path, mode="no_data")
    assert not result.passed
    assert (
        "the checkpoint folder was empty when the trainer reported the checkpoint of step 10"
        in (result.problems[0])
    )
    assert "CAMPAIGN_REHEARSAL_CHECKPOINT_DIR" in result.fixes[0]


def test_a_trainer_whose_curve_does_not_depend_on_the_data_fails_the_control_run(data, tmp_path):
    """The same, with checkpoint files that change and are restored from: only the control run catches it."""
    result = run(data, tmp_path, mode="no_data_files")
    assert not result.passed
    assert (
        "the training curve does not depend on the data: a control run on shifted rows" in result.problems[0]
    )
    assert "steps 1 to 3" in result.problems[0] and "CAMPAIGN_REHEARSAL_TRAIN" in result.fixes[0]
    assert result.details["restore_check"].startswith("not run")


def test_a_restart_that_replays_from_scratch_instead_of_restoring_fails(data, tmp_path):
    """It claims `resumed` at its checkpoint but recomputes it from step 1: the rows it replays are blank."""
    result = run(data, tmp_path, mode="replay")
    assert not result.passed
    resumed = result.details["resumed_step"]
    message = " ".join(result.problems)
    assert f"resumed run differs from the uninterrupted run at step {resumed + 1}:" in message, message
    assert f"the rows of steps 1 to {resumed} were blank" in message
    assert "restore from the checkpoint instead of replaying" in " ".join(result.fixes)


def test_a_held_out_loss_far_below_the_training_loss_is_named_as_a_possible_leak(data, tmp_path):
    result = run(data, tmp_path, mode="leak")
    assert not result.passed
    assert "a possible leak of held-out data into training" in result.problems[0]
    assert "nats below the training loss of the last tenth" in result.problems[0]


def test_a_grandchild_that_double_forks_and_calls_setsid_is_reaped_and_named(data, tmp_path, monkeypatch):
    monkeypatch.setenv("CAMPAIGN_SANDBOX", "0")  # the trainer writes its child's pid to a file here
    pid_file = tmp_path / "escaped.pid"
    result = run(data, tmp_path, mode="escape", NUMPY_TRAINER_CHILD_PID=str(pid_file))
    assert not result.passed
    escaped = int(pid_file.read_text())
    assert "left its process group (a double fork or setsid)" in result.problems[0]
    assert f"pid {escaped} `" in result.problems[0] and "the harness killed them" in result.problems[0]
    assert not Path(f"/proc/{escaped}").exists(), "the escaped grandchild is still running"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"step": 4, "loss": 1.0, "tokens": 1e400}', "'tokens' must be a whole number"),
        ('{"step": ' + "7" * 5000 + ', "loss": 1.0}', "a 5000-digit integer"),
        ("[" * 200_000, "at most 65,536"),
    ],
)  # every other case at the parser: tests/unit/test_fuzz_metrics.py
def test_metrics_lines_that_are_json_but_not_finite_numbers_fail_naming_file_and_line(
    data, tmp_path, line, reason, monkeypatch
):
    monkeypatch.setenv("CAMPAIGN_SANDBOX", "0")  # the trainer reads its line from a file under /tmp
    (tmp_path / "line.txt").write_text(line)  # a 200,000-character variable is beyond what exec(2) takes
    result = run(data, tmp_path, mode="malformed", NUMPY_TRAINER_BAD_LINE=f"@{tmp_path / 'line.txt'}")
    assert not result.passed
    assert f"{tmp_path / 'work' / 'reference' / 'metrics.jsonl'}:6: " in result.problems[0]
    assert reason in result.problems[0], result.problems[0]


def test_a_trainer_that_forgets_its_optimizer_state_fails_naming_the_first_differing_step(data, tmp_path):
    result = run(data, tmp_path, mode="forget_momentum")
    assert not result.passed
    resumed = result.details["resumed_step"]
    message = " ".join(result.problems)
    # step resumed+1's loss comes before its update, so it still matches; the lost momentum shows one step later
    assert f"differs from the uninterrupted run at step {resumed + 2}:" in message, message
    assert f"first differing step {resumed + 2}, resumed at {resumed}" in message
    assert "optimizer state" in " ".join(result.fixes)


def test_a_non_deterministic_trainer_needs_a_restore_tolerance(data, tmp_path):
    strict = run(data, tmp_path / "strict", mode="jitter")
    assert not strict.passed and "not deterministic for a seed" in " ".join(strict.problems)
    assert "step 1:" in " ".join(strict.problems)
    tolerant = run(data, tmp_path / "tolerant", mode="jitter", tolerance=1e-5)
    assert tolerant.passed, tolerant.problems
    assert tolerant.details["restore_check"].startswith("within 1e-05")


def test_a_command_that_does_not_exist_fails_the_gate(data, tmp_path):
    result = run(data, tmp_path, command=["/no/such/trainer", "--tiny"])
    assert not result.passed
    assert "cannot start the trainer `/no/such/trainer --tiny`" in result.problems[0]
    assert "rehearsal.command" in result.fixes[0]


def test_a_trainer_that_exits_non_zero_fails_with_its_stderr(data, tmp_path):
    result = run(data, tmp_path, mode="crash")
    assert not result.passed
    assert "exited with code 3 after step 5" in result.problems[0]
    assert any("illegal memory access" in line for line in result.stderr_tail)
    assert "illegal memory access" in result.summary()


def test_malformed_metrics_fail_naming_the_line(data, tmp_path):
    result = run(data, tmp_path, mode="malformed")
    assert not result.passed
    assert "malformed metrics" in result.problems[0] and "not JSON" in result.problems[0]
    assert f"{tmp_path / 'work' / 'reference' / 'metrics.jsonl'}:6: " in result.problems[0]


def test_a_trainer_that_never_checkpoints_fails(data, tmp_path):
    result = run(data, tmp_path, mode="no_checkpoint")
    assert not result.passed
    assert "never reported a complete checkpoint" in result.problems[0]
    assert '"event": "checkpoint"' in result.fixes[0]


def test_a_trainer_that_never_resumes_fails(data, tmp_path):
    result = run(data, tmp_path, mode="no_resume")
    assert not result.passed
    assert "never reported resumed (its first step was 1" in result.problems[0]


def test_a_trainer_that_hangs_is_killed_at_the_timeout(data, tmp_path):
    result = run(data, tmp_path, mode="hang", timeout_s=3.0)
    assert not result.passed
    assert "hung past rehearsal.timeout_s = 3 s (last step reported: 3)" in result.problems[0]
    assert result.timings["reference_wall_s"] < 20


def test_no_process_of_the_trainers_group_survives(data, tmp_path, monkeypatch):
    monkeypatch.setenv("CAMPAIGN_SANDBOX", "0")  # the trainer writes its child's pid to a file here
    pid_file = tmp_path / "child.pid"
    result = run(data, tmp_path, mode="child", NUMPY_TRAINER_CHILD_PID=str(pid_file))
    assert result.passed, result.problems
    child = int(pid_file.read_text())
    try:  # gone, or a zombie waiting for init to reap it: either way nothing of the group runs on
        state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    assert state in ("gone", "Z", "X"), f"the trainer's child {child} survived in state {state}"


def test_a_divergent_learning_rate_fails_naming_the_first_nan(data, tmp_path):
    result = run(data, tmp_path, mode="naive_softmax", lr=1e6)
    assert not result.passed
    assert "(the first non-finite value; " in result.problems[0]
    assert f"{tmp_path / 'work' / 'reference' / 'metrics.jsonl'}:" in result.problems[0]
    assert result.details["first_non_finite_step"] >= 1
    assert "lower rehearsal.learning_rate" in result.fixes[0]
    assert result.details["restore_check"].startswith("not run")


def test_the_kill_step_is_chosen_by_the_seed_after_a_checkpoint():
    checkpoints = [10, 20, 30, 40]
    picks = {choose_kill_step(checkpoints, 40, seed) for seed in range(30)}
    assert choose_kill_step(checkpoints, 40, 5) == choose_kill_step(checkpoints, 40, 5)
    assert len(picks) > 3
    for after, kill in picks:
        assert after in (10, 20, 30) and after < kill <= after + 5
    assert choose_kill_step([40], 40, 1) is None


def test_group_members_sees_a_live_group():
    assert os.getpgrp() in {os.getpgrp()} and os.getpid() in group_members(os.getpgrp())


def test_a_trainer_dies_with_campaign_and_a_listed_group_is_killed_before_reuse(tmp_path):
    """campaign killed mid-rehearsal: the kernel kills the trainer (PDEATHSIG); its registry kills what is left."""
    import signal
    import subprocess
    import time

    from campaign.rehearsal.processes import kill_registered_groups

    registry = tmp_path / "trainers.json"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from pathlib import Path; from campaign.rehearsal.processes import run_start\n"
                f"run_start('t', [sys.executable, '-c', 'import time; time.sleep(300)'], {{}}, Path({str(tmp_path)!r}) / "
                f"'m.jsonl', Path({str(tmp_path)!r}) / 'logs', time.monotonic() + 300, registry=Path({str(registry)!r}))"
            ),
        ]
    )
    deadline = time.monotonic() + 30
    while not registry.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    trainer = json.loads(registry.read_text())[0]["pgid"]
    assert group_members(trainer)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    while group_members(trainer) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_members(trainer)
    # a group that outlived its campaign (no PDEATHSIG on this platform, or a child of the trainer) is killed
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    registry.write_text(json.dumps([{"pgid": orphan.pid, "start_time": None}]))
    assert kill_registered_groups(registry) == [orphan.pid]
    assert orphan.wait(timeout=10) == -signal.SIGKILL


@pytest.mark.parametrize("side", ["cache", "tmp", "home", "shm", "workdir", "metrics", "log"])
def test_a_trainer_that_keeps_its_state_in_a_side_channel_fails_the_restore(data, tmp_path, side):
    """Random bytes as the checkpoint and the real state beside it (the cache folder, /tmp, the home folder,
    /dev/shm, the rehearsal's own folder) or in what the first start wrote anyway (its checkpoint metrics lines, its
    stdout log): the restart, which reaches only its checkpoint folder, cannot restore."""
    if sandbox_problem():
        pytest.skip(f"needs the rehearsal's sandbox: {sandbox_problem()}")
    # a workspace outside /tmp, as a user's is: the sandbox's private /tmp would hide one under it anyway
    outside = Path(tempfile.mkdtemp(prefix="campaign-side-", dir="/var/tmp"))
    try:
        result = run(data, outside, mode="side_channel", NUMPY_TRAINER_SIDE=side)
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    assert not result.passed
    # the rehearsal's folder is read-only to every start: that side channel cannot even be written
    if side == "workdir":
        assert result.problems == ["reference run: the trainer exited with code 1 after step 0"], (
            result.problems
        )
        return
    assert any(
        "state kept anywhere but CAMPAIGN_REHEARSAL_CHECKPOINT_DIR was out of its reach" in p
        for p in result.problems
    ), result.problems


def test_an_honest_trainer_passes_and_the_checks_say_the_restart_was_isolated(data, tmp_path):
    if sandbox_problem():
        pytest.skip(f"needs the rehearsal's sandbox: {sandbox_problem()}")
    result = run(data, tmp_path)
    assert result.passed, result.problems
    assert any(c.startswith("restored from the checkpoint folder alone: ") for c in result.details["checks"])

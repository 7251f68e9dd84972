"""A real run of a trainer written from the documented contract alone (tests/helpers/contract_trainer.py), with
faults applied from outside, accounted against the trainer's own wall-clock log: a checkpoint it falls back from,
a checkpoint nothing can load, a crash on every start, a hang that gets SIGTERM before SIGKILL, a step number that
stops advancing, and the window's end."""

import os
import sys

import numpy as np
import pytest

from campaign.execution.injection import Injection
from campaign.execution.measured import measured_summary
from campaign.execution.policy import EXIT_CODES, outcome
from campaign.execution.supervisor import RealRunSettings, supervise
from campaign.rehearsal.harness import HarnessSettings, contract_env
from tests.helpers.contract_trainer import own_accounting
from tests.helpers.paths import REPO

TRAINER = REPO / "tests" / "helpers" / "contract_trainer.py"
VOCAB, STEPS, EVERY, TOKENS = 16, 60, 10, 128


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokens")
    rows = np.random.default_rng(0).integers(0, VOCAB, size=(STEPS * 4, 33)).astype(np.uint32)
    np.save(root / "train.npy", rows)
    np.save(root / "heldout.npy", rows[:20])
    return root


def settings(data, folder, injections=(), trainer=None, **kw):
    harness = HarnessSettings(
        command=[],
        steps=STEPS,
        seed=3,
        checkpoint_every=EVERY,
        timeout_s=120,
        min_loss_drop=0,
        restore_tolerance=0,
        tokens_per_step=TOKENS,
        batch_sequences=4,
        extra_env={
            "CONTRACT_TRAINER_LOG": str(folder.parent / "trainer-log.jsonl"),
            "CONTRACT_TRAINER_STEP_S": "0.12",
            **(trainer or {}),
        },
    )
    env = contract_env(
        data / "train.npy",
        data / "heldout.npy",
        VOCAB,
        harness,
        folder / "checkpoints",
        folder / "metrics.jsonl",
        folder.parent / "cache",
    )
    options = {
        "max_wall_s": 120,
        "hang_min_s": 1.0,
        "backoff_s": 0.1,
        "stop_grace_s": 3.0,
        "nodes": ("n0", "n1", "n2"),
        "max_no_progress_restarts": 2,
        **kw,
    }
    return RealRunSettings(
        command=[sys.executable, str(TRAINER)],
        env={**os.environ, **env},
        steps=STEPS,
        tokens_per_step=TOKENS,
        injections=tuple(injections),
        **options,
    )


def run(data, tmp_path, injections=(), trainer=None, **kw):
    folder = tmp_path / "run"
    journal = supervise(settings(data, folder, injections, trainer, **kw), folder)
    summary = measured_summary(journal, STEPS, TOKENS, EVERY, 3, 2.0)
    return journal, summary, own_accounting(tmp_path / "trainer-log.jsonl", STEPS)


def within_3_percent(summary, own):
    assert summary.ettr == pytest.approx(own["ettr"], rel=0.03), (summary.ettr, own)


def test_a_fallback_from_a_torn_checkpoint_is_its_own_event_and_its_steps_are_rework(data, tmp_path):
    """The checkpoint at step 30 is torn; a kill at 35 restarts the trainer, which refuses it (sha256) and resumes
    at 20: a `checkpoint_fallback`, steps 21-35 trained again as expected, the ETTR the trainer's own log gives."""
    journal, summary, own = run(data, tmp_path, [Injection(35, "kill")], {"CONTRACT_TRAINER_TORN": "30"})
    fallback = journal.kinds("checkpoint_fallback")
    assert len(fallback) == 1 and fallback[0].step == 20 and fallback[0].newest == 30
    m = summary.measured
    assert m.final_step == STEPS and summary.completed and outcome(journal) == "target"
    assert m.steps_trained_again == m.rework_steps_expected == own["trained_again"] >= 15
    assert m.checkpoint_fallbacks == [fallback[0].detail]
    within_3_percent(summary, own)


def test_a_checkpoint_nothing_can_load_is_never_counted_as_trained(data, tmp_path):
    """The same torn checkpoint, read by a trainer that does not check digests: every restart dies loading it
    (zipfile.BadZipFile). The run stops after the stated no-progress restarts, short, quoting the error; step 30
    is not counted; no node is blamed."""
    journal, summary, own = run(
        data,
        tmp_path,
        [Injection(35, "kill")],
        {"CONTRACT_TRAINER_TORN": "30", "CONTRACT_TRAINER_VERIFY": "0"},
    )
    end = journal.end_detail()
    assert end.startswith("software failure: 3 starts in a row failed without passing step 3")
    assert "BadZipFile" in end and outcome(journal) == "short" and EXIT_CODES[outcome(journal)] == 5
    assert summary.tokens_trained == 20 * TOKENS and summary.measured.final_step == 20
    assert not journal.kinds("node_excluded")
    assert {f.blame for f in journal.kinds("failure")} == {"injected", "software"}
    within_3_percent(summary, own)


def test_a_crash_on_every_start_is_a_software_failure_with_its_own_error_line_and_no_node_blamed(
    data, tmp_path
):
    journal, summary, _ = run(data, tmp_path, trainer={"CONTRACT_TRAINER_CRASH_ON_START": "1"})
    failures = journal.kinds("failure")
    assert len(failures) == 3 and all(f.blame == "software" for f in failures)
    assert not journal.kinds("node_excluded")
    assert len({f.node for f in failures}) == 3  # tried on other nodes: the same failure everywhere
    end = journal.end_detail()
    assert end.startswith("software failure: 3 starts in a row failed before any step")
    assert "config key 'optimizer.lr' is missing" in end and "no node is blamed" in end
    assert outcome(journal) == "short" and not summary.completed


def test_a_hung_trainer_gets_sigterm_then_its_grace_and_is_restarted(data, tmp_path):
    journal, summary, own = run(data, tmp_path, trainer={"CONTRACT_TRAINER_HANG_AT": "25"})
    failure = journal.kinds("failure")[0]
    assert failure.category == "hang" and "ended by SIGTERM within its grace" in failure.detail
    log = (tmp_path / "trainer-log.jsonl").read_text()
    assert '"event": "stop_signal", "signal": "SIGTERM"' in log  # the trainer heard SIGTERM itself
    assert summary.completed and outcome(journal) == "target"
    within_3_percent(summary, own)


def test_a_trainer_stopped_hard_gets_sigkill_only_after_the_grace(data, tmp_path):
    journal, _, _ = run(data, tmp_path, [Injection(25, "hang")], stop_grace_s=1.0)
    failure = journal.kinds("failure")[0]
    assert failure.category == "hang" and "SIGTERM, then SIGKILL after the 1 s grace" in failure.detail
    detected = journal.kinds("detected")[0]
    assert failure.blame == "injected" and detected.t_s > failure.t_s


@pytest.mark.parametrize("pattern", ["same", "back"])
def test_a_step_number_that_stops_advancing_is_a_hang_and_its_repeats_are_named_not_trained(
    data, tmp_path, pattern
):
    """Steps 1-25, then step 25 every 0.05 s forever (or 25, 24, 25, 24, ...): no new step, so a hang once the
    limit passes; the lines are named in its detail and none of them counts as trained."""
    trainer = {"CONTRACT_TRAINER_STALL_AT": "25", "CONTRACT_TRAINER_STALL_PATTERN": pattern}
    journal, summary, own = run(data, tmp_path, trainer=trainer)
    failure = journal.kinds("failure")[0]
    assert failure.category == "hang" and "at or below step 25 (repeated steps)" in failure.detail
    if pattern == "back":
        assert "the step number went back from 25 to 24" in failure.detail
    m = summary.measured
    assert summary.completed and m.steps_trained_again == m.rework_steps_expected <= 6
    within_3_percent(summary, own)


def test_the_window_end_stops_the_trainer_gracefully_and_the_run_ended_short(data, tmp_path):
    journal, summary, _ = run(data, tmp_path, max_wall_s=3.0)
    end = journal.end_detail()
    assert end.startswith("the window ended at step") and "ended by SIGTERM within its grace" in end
    assert outcome(journal) == "short" and not summary.completed


@pytest.mark.parametrize(
    ("outcome_", "code", "said"),
    [("target", 0, "reached its target"), ("short", 5, "ended short"), ("stopped", 6, "stopped by a person")],
)
def test_campaign_execute_exits_0_only_at_the_target_and_says_how_the_run_ended(
    monkeypatch, capsys, outcome_, code, said
):
    from campaign_cli.cli import main
    from tasks.execute import ExecutionRecord

    record = ExecutionRecord(
        "c-1", -1, False, 0.22, 2560.0, outcome_ == "target", None, "why", outcome_, 20, 60
    )
    monkeypatch.setattr("campaign_cli.commands.lifecycle.run_stage", lambda *a, **k: record)
    assert main(["execute", "any.yaml"]) == code
    out = capsys.readouterr().out
    assert said in out and "step 20 of 60" in out and "ETTR 0.220" in out


def test_progress_lines_say_each_tenth_each_failure_and_restart_and_never_go_quiet(data, tmp_path):
    from campaign.execution.progress import ProgressLines

    lines = []
    folder = tmp_path / "run"
    progress = ProgressLines(lines.append, STEPS, TOKENS, 0, ("n0", "n1", "n2"), quiet_s=0.5)
    supervise(settings(data, folder, trainer={"CONTRACT_TRAINER_HANG_AT": "25"}), folder, progress=progress)
    steps = [line for line in lines if line.startswith("execute: step ")]
    assert [line.split()[2] for line in steps][:2] == ["6/60", "12/60"]  # every tenth of the target
    assert all("tokens kept" in line and "ETTR so far" in line and "failure(s)" in line for line in steps)
    assert any(line.startswith("execute: failure on n0 at step 2") and "hang" in line for line in lines)
    assert any(line.startswith("execute: restart 1 on") for line in lines)
    assert any(line.startswith("execute: running;") for line in lines)  # while the hang was being timed
    assert lines[-1].startswith("execute: the run ended (target): target step reached")

"""The rehearsal's progress lines, read from growing metrics files (no trainer, no Prefect)."""

import json
import os

from campaign.rehearsal.progress import ProgressFollower


def _append(path, *records, partial=""):
    with path.open("a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records) + partial)


def test_a_line_every_n_steps_with_the_loss_and_the_last_step_and_resumes(tmp_path):
    stale = tmp_path / "earlier" / "metrics.jsonl"
    stale.parent.mkdir()
    _append(stale, {"step": 10, "loss": 9.0})
    os.utime(stale, (1e9, 1e9))  # left by an earlier validate: not news
    follower = ProgressFollower(tmp_path, steps=25, every=10)
    assert follower.poll() == []
    run = tmp_path / "reference" / "metrics.jsonl"
    run.parent.mkdir()
    _append(run, *({"step": s, "loss": 10.0 - s / 10} for s in range(11, 21)), partial='{"step": 21, "lo')
    assert follower.poll() == ["rehearsal reference: step 20/25, loss 8.000"]
    _append(run, partial='ss": 7.9}\n')
    assert follower.poll() == []  # the half-written line, completed, is step 21: no line for it
    fault = tmp_path / "fault" / "metrics.jsonl"
    fault.parent.mkdir()
    _append(
        fault,
        {"event": "resumed", "step": 12},
        {"step": 25, "loss": float("nan")},
        {"step": 24, "heldout_loss": 3.0},
    )
    assert follower.poll() == [
        "rehearsal fault: resumed from the checkpoint of step 12",
        "rehearsal fault: step 25/25, loss nan",
    ]


def test_a_rewritten_file_is_read_from_its_start_and_the_default_is_about_ten_lines(tmp_path):
    path = tmp_path / "run" / "metrics.jsonl"
    path.parent.mkdir()
    _append(path, *({"step": s, "loss": 1.0} for s in range(1, 151)))
    os.utime(path, (1e9, 1e9))
    follower = ProgressFollower(tmp_path, steps=150)
    path.write_text("")  # the next validate writes it anew
    _append(path, *({"step": s, "loss": 2.0} for s in range(1, 151)))
    lines = follower.poll()
    assert len(lines) == 10 and lines[-1] == "rehearsal run: step 150/150, loss 2.000"

"""The reference JAX trainer through the harness: it learns, it resumes bit-identically, a divergent rate fails."""

import json

import numpy as np
import pytest

from campaign.rehearsal import contract
from campaign.rehearsal.harness import HarnessSettings, rehearse

VOCAB = 16
# Small, but not so small that a step takes under a few milliseconds: the harness polls the metrics every 20 ms,
# and a trainer that runs from the chosen kill step past its last checkpoint before the kill lands leaves
# nothing to compare after a restore (the harness tries such a start again, three times at most).
TINY = {"layers": 2, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn_hidden": 512}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(1)
    stream = np.empty(12_000, dtype=np.uint32)
    stream[0] = 0
    for i in range(1, len(stream)):
        stream[i] = (5 * stream[i - 1] + 3) % VOCAB if rng.random() < 0.85 else rng.integers(VOCAB)
    rows = stream[: len(stream) // 33 * 33].reshape(-1, 33)
    root = tmp_path_factory.mktemp("tokens")
    np.save(root / "train.npy", rows[:-32])
    np.save(root / "heldout.npy", rows[-32:])
    return root / "train.npy", root / "heldout.npy"


def rehearse_reference(data, workdir, lr):
    settings = HarnessSettings(
        command=["python", "-m", "campaign.rehearsal.trainer"],
        steps=40,
        seed=11,
        checkpoint_every=10,
        timeout_s=300,
        min_loss_drop=0.5,
        restore_tolerance=0.0,
        tokens_per_step=8 * 32,
        batch_sequences=8,
        extra_env={
            contract.ENV_LEARNING_RATE: repr(lr),
            contract.ENV_WARMUP_STEPS: "4",
            contract.ENV_BATCH_SEQUENCES: "8",
            contract.ENV_EVAL_EVERY: "10",
            contract.ENV_MODEL: json.dumps(TINY),
        },
    )
    return rehearse(*data, VOCAB, settings, workdir)


def test_the_reference_trainer_learns_and_resumes_bit_identically(data, tmp_path):
    result = rehearse_reference(data, tmp_path / "work", lr=1e-2)
    assert result.passed, (result.problems, result.stderr_tail)
    d = result.details
    assert d["restore_check"].startswith("bit-identical over")
    # The kill lands at or after the chosen step; on a loaded machine the trainer may write one more checkpoint
    # first, and resuming from that newest checkpoint is right. A start that ran past its last checkpoint before
    # the kill landed is tried again, so there are always steps after the restore to compare.
    assert d["kill_after_checkpoint"] <= d["resumed_step"] <= d["killed_at_step"] and d["resumed_step"] < 40
    assert d["restore_compared_steps"] == 40 - d["resumed_step"]
    # the kill was real: the faulted run's metrics show the steps after the checkpoint twice
    lines = [
        json.loads(x) for x in (tmp_path / "work" / "faulted" / "metrics.jsonl").read_text().splitlines()
    ]
    redone = [x["step"] for x in lines if "loss" in x and x["step"] == d["resumed_step"] + 1]
    assert len(redone) == (2 if d["killed_at_step"] > d["resumed_step"] else 1)
    assert {"event": "resumed", "step": d["resumed_step"]} in lines
    # a checkpoint holds parameters, optimizer state, step and data position
    checkpoint = max((tmp_path / "work" / "reference" / "checkpoints").glob("step_*"))
    meta = json.loads((checkpoint / "meta.json").read_text())
    assert meta["step"] == 40 and meta["data_position"] == 40 * 8
    with np.load(checkpoint / "state.npz") as state:
        assert len(state.files) == meta["n_leaves"] > 2 * len(TINY)  # parameters + Adam moments + counts


def test_a_divergent_learning_rate_fails_naming_where(data, tmp_path):
    result = rehearse_reference(data, tmp_path / "work", lr=1e4)
    assert not result.passed
    message = " ".join(result.problems)
    assert "training diverged at step" in message or "(the first non-finite value; " in message
    assert "lower rehearsal.learning_rate (now 10000.0)" in result.fixes
    assert "divergence_step" in result.details or "first_non_finite_step" in result.details

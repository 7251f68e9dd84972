"""The data-parallel reference trainer on 2 ranks of this machine (`python -m campaign.rehearsal.launch --ranks 2`)
through the rehearsal gate: one rank killed with SIGKILL mid-run ends the job; started again, every rank restores
from the last complete sharded checkpoint and the losses are the uninterrupted run's, bit for bit, and the same
layout in one process (another world size) trains the same bits."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from campaign.rehearsal.harness import HarnessSettings, contract_env
from tests.helpers.paths import REPO

VOCAB, STEPS, EVERY, BATCH = 32, 14, 5, 6
MODEL = {"layers": 1, "hidden": 32, "heads": 2, "kv_heads": 1, "ffn_hidden": 64}


def _losses(folder):
    out = {}
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "loss" in row:
            out.setdefault(row["step"], []).append(row["loss"])
    return out


@pytest.mark.timeout(600)  # four starts of 2 JAX ranks: 67 s alone, 143 s beside the rest of the suite
def test_the_rehearsal_gate_kills_one_rank_and_sees_every_rank_restore_exactly(tmp_path):
    """`rehearsal.kill: one_process` with the launcher: the gate's fault is a SIGKILL of one rank, not of the job's
    process group; the launcher ends the job, and the restart of both ranks resumes from the sharded checkpoint
    with the uninterrupted run's losses, bit for bit."""
    from campaign.rehearsal.harness import rehearse

    rng = np.random.default_rng(
        0
    )  # a sequence with a rule to learn: the next token is (3 x + 1) mod V, mostly
    stream = np.empty(STEPS * BATCH * 17 * 2, dtype=np.int64)
    stream[0] = 0
    for i in range(1, len(stream)):
        stream[i] = (3 * stream[i - 1] + 1) % VOCAB if rng.random() < 0.9 else rng.integers(VOCAB)
    rows = stream.reshape(-1, 17).astype(np.uint32)
    np.save(tmp_path / "train.npy", rows[: STEPS * BATCH])
    np.save(tmp_path / "heldout.npy", rows[-12:])
    settings = HarnessSettings(
        [sys.executable, "-m", "campaign.rehearsal.launch", "--ranks", "2"],
        STEPS,
        3,
        EVERY,
        540,
        0.0,
        0.0,
        BATCH * 16,
        batch_sequences=BATCH,
        extra_env={
            "CAMPAIGN_REHEARSAL_MODEL": json.dumps(MODEL),
            "CAMPAIGN_REHEARSAL_LEARNING_RATE": "0.01",
            "CAMPAIGN_REHEARSAL_WARMUP_STEPS": "0",
            "CAMPAIGN_REHEARSAL_EVAL_EVERY": str(EVERY),
            "CAMPAIGN_DIST_SLOW": f"{os.uname().nodename}=0.3",  # steps slow enough to be killed between checkpoints
            "PYTHONPATH": str(REPO),
        },
        kill_one=True,
    )
    result = rehearse(tmp_path / "train.npy", tmp_path / "heldout.npy", VOCAB, settings, tmp_path / "work")
    assert result.passed, result.problems
    d = result.details
    assert "campaign.rehearsal.distributed" in d["killed_process"]  # a rank, not the launcher
    assert d["resumed_step"] % EVERY == 0 and d["restore_check"].startswith("bit-identical over")
    manifest = json.loads(
        next((tmp_path / "work" / "faulted" / "checkpoints").glob("step_*/manifest.json")).read_text()
    )
    assert manifest["world"] == 2 and len(manifest["parts"]) == 2
    # the same layout (2 gradient shards) in one process, another world size: the same bits as the 2 ranks
    one_folder = tmp_path / "one-process"
    one_env = contract_env(
        tmp_path / "work" / "data" / "train.npy",  # the rows in the order the gate's reference run read them
        tmp_path / "heldout.npy",
        VOCAB,
        settings,
        one_folder / "checkpoints",
        one_folder / "metrics.jsonl",
        tmp_path / "cache",
    )
    one_env = {**os.environ, **one_env, **settings.extra_env, "CAMPAIGN_DIST_SHARDS": "2"}
    subprocess.run(
        [sys.executable, "-m", "campaign.rehearsal.distributed"],
        env=one_env,
        check=True,
        timeout=170,
        capture_output=True,
    )
    two_ranks, one_process = _losses(tmp_path / "work" / "reference"), _losses(one_folder)
    assert sorted(one_process) == sorted(two_ranks) == list(range(1, STEPS + 1))
    assert all(value == one_process[step][0] for step, values in two_ranks.items() for value in values)

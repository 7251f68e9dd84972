"""The data-parallel reference trainer on 2 ranks of this machine (`python -m campaign.rehearsal.launch --ranks 2`,
a command the rehearsal gate takes): one rank killed with SIGKILL mid-run ends the job; started again, every rank
restores from the last complete sharded checkpoint and the losses are the uninterrupted run's, bit for bit."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

from campaign.rehearsal.harness import HarnessSettings, contract_env
from tests.helpers.paths import REPO

VOCAB, STEPS, EVERY, BATCH = 32, 14, 5, 6
MODEL = {"layers": 1, "hidden": 32, "heads": 2, "kv_heads": 1, "ffn_hidden": 64}


def _env(tmp_path, name, extra=None):
    folder = tmp_path / name
    harness = HarnessSettings([], STEPS, 3, EVERY, 170, 0, 0, BATCH * 16, batch_sequences=BATCH)
    env = contract_env(
        tmp_path / "train.npy",
        tmp_path / "heldout.npy",
        VOCAB,
        harness,
        folder / "checkpoints",
        folder / "metrics.jsonl",
        tmp_path / "cache",
    )
    env["CAMPAIGN_REHEARSAL_MODEL"] = json.dumps(MODEL)
    return folder, {**os.environ, **env, "PYTHONPATH": str(REPO), **(extra or {})}


def _losses(folder):
    out = {}
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "loss" in row:
            out.setdefault(row["step"], []).append(row["loss"])
    return out


def test_one_rank_killed_then_every_rank_restores_the_sharded_checkpoint_exactly(tmp_path):
    rows = np.random.default_rng(0).integers(0, VOCAB, size=(STEPS * BATCH, 17)).astype(np.uint32)
    np.save(tmp_path / "train.npy", rows)
    np.save(tmp_path / "heldout.npy", rows[:12])
    launch = [sys.executable, "-m", "campaign.rehearsal.launch", "--ranks", "2"]
    folder, env = _env(
        tmp_path,
        "run",
        {
            "CAMPAIGN_DIST_RANKS_DIR": str(tmp_path / "run" / "ranks"),
            "CAMPAIGN_DIST_SLOW": f"{os.uname().nodename}=0.3",
        },
    )
    proc = subprocess.Popen(launch, env=env, stderr=subprocess.DEVNULL)
    beat = folder / "ranks" / "rank-00001.jsonl"
    pid = None
    for _ in range(3000):  # until rank 1 is past the first checkpoint
        lines = [json.loads(x) for x in beat.read_text().splitlines()] if beat.exists() else []
        if any(x.get("step", 0) >= EVERY + 2 and "compute_s" in x for x in lines):
            pid = lines[0]["pid"]
            break
        time.sleep(0.05)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert proc.wait(timeout=60) != 0  # the launcher ended the other rank and failed
    killed_at = max(_losses(folder))
    assert killed_at < STEPS
    # started again with the same variables: both ranks restore from the last complete checkpoint
    assert subprocess.run(launch, env=env, stderr=subprocess.DEVNULL, timeout=170).returncode == 0
    resumed = [
        json.loads(x)["step"] for x in (folder / "metrics.jsonl").read_text().splitlines() if "resumed" in x
    ]
    assert len(resumed) == 1 and resumed[0] % EVERY == 0 and EVERY <= resumed[0] <= killed_at
    manifest = json.loads(next((folder / "checkpoints").glob("step_*/manifest.json")).read_text())
    assert manifest["world"] == 2 and len(manifest["parts"]) == 2
    # the uninterrupted run of the same layout (2 gradient shards), in one process: the same bits
    reference_folder, reference_env = _env(tmp_path, "reference", {"CAMPAIGN_DIST_SHARDS": "2"})
    subprocess.run(
        [sys.executable, "-m", "campaign.rehearsal.distributed"],
        env=reference_env,
        check=True,
        timeout=170,
        capture_output=True,
    )
    losses, reference = _losses(folder), _losses(reference_folder)
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert all(value == reference[step][0] for step, values in losses.items() for value in values)


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
        400,
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

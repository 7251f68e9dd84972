"""The bundled reference trainer's own metrics read by `campaign plan measure` as a measurement, with no flags:
the trainer (python -m campaign.rehearsal.trainer, JAX) writes each step's own seconds beside its tokens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from campaign_cli.cli import main


def test_the_reference_trainers_metrics_are_a_measurement_without_flags(tmp_path: Path, capsys) -> None:
    """The bundled trainer (python -m campaign.rehearsal.trainer) writes each step's own seconds."""
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 16, size=(24 * 4 + 8, 17)).astype(np.uint32)
    np.save(tmp_path / "train.npy", rows[:-8])
    np.save(tmp_path / "heldout.npy", rows[-8:])
    metrics = tmp_path / "metrics.jsonl"
    env = {
        **os.environ,
        "CAMPAIGN_REHEARSAL_TRAIN": str(tmp_path / "train.npy"),
        "CAMPAIGN_REHEARSAL_HELDOUT": str(tmp_path / "heldout.npy"),
        "CAMPAIGN_REHEARSAL_VOCAB": "16",
        "CAMPAIGN_REHEARSAL_STEPS": "24",
        "CAMPAIGN_REHEARSAL_SEED": "1",
        "CAMPAIGN_REHEARSAL_CHECKPOINT_EVERY": "12",
        "CAMPAIGN_REHEARSAL_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        "CAMPAIGN_REHEARSAL_METRICS": str(metrics),
        "CAMPAIGN_REHEARSAL_BATCH_SEQUENCES": "4",
        "CAMPAIGN_REHEARSAL_EVAL_EVERY": "12",
        "CAMPAIGN_REHEARSAL_MODEL": json.dumps(
            {"layers": 1, "hidden": 32, "heads": 2, "kv_heads": 1, "ffn_hidden": 64}
        ),
    }
    done = subprocess.run(
        [sys.executable, "-m", "campaign.rehearsal.trainer"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert main(["plan", "measure", str(metrics), "--json"]) == 0, capsys.readouterr().err
    got = json.loads(capsys.readouterr().out)
    assert got["format"] == "jsonl" and got["global_batch_tokens"] == 4 * 16 and got["step_time_s"] > 0
    assert got["measured"] is None  # nodes and layout: the entry needs them, the measurement does not
    args = ["--nodes", "1", "--layout", "dp=1", "--gpus-per-node", "1", "--json"]
    assert main(["plan", "measure", str(metrics), *args]) == 0
    assert json.loads(capsys.readouterr().out)["measured"]["nodes"] == 1

"""The gate end to end without Prefect: sample, contract files, harness, verdict, with a third-party trainer."""

import sys

import numpy as np

from campaign.config import ModelConfig, RehearsalConfig
from campaign.data.tokenizer import load_tokenizer
from campaign.rehearsal.gate import run_rehearsal
from tests.helpers.paths import NUMPY_TRAINER
from tests.helpers.rehearsal_docs import DOCS

TRAINER = NUMPY_TRAINER
MODEL = ModelConfig(layers=24, hidden=2048, heads=16, kv_heads=8, ffn_hidden=8192, vocab=128256, seq_len=4096)


def config(**kw):
    base = {
        "sample_tokens": 20_000,
        "seq_len": 32,
        "steps": 40,
        "checkpoint_every": 10,
        "eval_every": 5,
        "warmup_steps": 2,
        "learning_rate": 1.0,
        "min_loss_drop": 0.3,
        "timeout_s": 120,
        "command": (sys.executable, str(TRAINER)),
    }
    return RehearsalConfig(**{**base, **kw})


def test_the_gate_passes_a_contract_following_trainer_on_the_sample(tmp_path):
    result, sample = run_rehearsal(
        DOCS, load_tokenizer("utf8-bytes"), config(), MODEL, 5, tmp_path / "rehearsal"
    )
    assert result.passed, (result.problems, result.stderr_tail)
    work = tmp_path / "rehearsal"
    train = np.load(work / "sample" / "train.npy")
    assert (
        train.dtype == np.uint32 and train.shape == (sample.train.shape[0], 33) and train.max() < sample.vocab
    )
    assert (work / "sample" / "vocab_map.npy").exists() and (work / "sample" / "sample.json").exists()
    assert result.details["model"]["heads"] // result.details["model"]["kv_heads"] == 2


def test_a_sample_too_small_fails_the_gate_before_any_trainer_starts(tmp_path):
    result, _ = run_rehearsal(
        DOCS[:2],
        load_tokenizer("utf8-bytes"),
        config(sample_tokens=1_000, seq_len=4000),
        MODEL,
        5,
        tmp_path / "rehearsal",
    )
    assert not result.passed
    assert "sample: the sample is too small for one train sequence" in result.problems[0]
    assert "rehearsal.sample_tokens" in " ".join(result.fixes)
    assert not (tmp_path / "rehearsal" / "reference").exists()
    assert result.details["restore_check"].startswith("not run")


def test_a_second_rehearsal_starts_from_a_clean_folder(tmp_path):
    work = tmp_path / "rehearsal"
    stale = (
        work / "reference" / "checkpoints" / "ckpt-000030.npz"
    )  # an earlier rehearsal's: must not be resumed
    stale.parent.mkdir(parents=True)
    np.savez(stale, w=np.zeros((3, 3)), v=np.zeros((3, 3)), step=30)
    result, _ = run_rehearsal(DOCS, load_tokenizer("utf8-bytes"), config(), MODEL, 5, work)
    assert result.passed, result.problems
    assert result.curves.reference.loss[0][0] == 1  # the reference run started from step 1

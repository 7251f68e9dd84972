"""The rehearsal gate end to end: sample the clean data, write the contract's files, run the harness, judge.

Imports no JAX: only the trainer's own process does.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from campaign.config import ModelConfig, RehearsalConfig, RehearsalModelConfig
from campaign.data.tokenizer import Tokenizer
from campaign.files import atomic_write_bytes
from campaign.rehearsal import contract
from campaign.rehearsal.harness import REGISTRY, HarnessSettings, RehearsalResult, rehearse
from campaign.rehearsal.processes import kill_registered_groups
from campaign.rehearsal.sample import Document, Sample, build_sample

REHEARSAL_WIDTH = 128
REHEARSAL_LAYERS = 2
REHEARSAL_HEAD_DIM = 32


def rehearsal_model(model: ModelConfig, override: RehearsalModelConfig | None = None) -> RehearsalModelConfig:
    """The campaign's model scaled down: width 128, 2 layers, the same query-to-KV-head and FFN-to-width ratios.

    Heads are the larger of width / 32 and the campaign's heads-per-KV-head group, rounded up to a multiple of
    that group so the grouping survives; the FFN keeps its ratio to the width, rounded to a multiple of 16.
    """
    if override is not None:
        return override
    group = model.heads // model.kv_heads
    heads = max(REHEARSAL_WIDTH // REHEARSAL_HEAD_DIM, group)
    heads = -(-heads // group) * group
    while REHEARSAL_WIDTH % heads or (REHEARSAL_WIDTH // heads) % 2:
        heads += group
        if heads > REHEARSAL_WIDTH // 2:  # no exact split: plain multi-head attention keeps the shapes legal
            heads, group = REHEARSAL_WIDTH // REHEARSAL_HEAD_DIM, 1
            break
    ffn = max(16, round(model.ffn_hidden / model.hidden * REHEARSAL_WIDTH / 16) * 16)
    return RehearsalModelConfig(
        layers=REHEARSAL_LAYERS, hidden=REHEARSAL_WIDTH, heads=heads, kv_heads=heads // group, ffn_hidden=ffn
    )


def _save_npy(path: Path, array: np.ndarray) -> None:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    atomic_write_bytes(path, buffer.getvalue())


def run_rehearsal(
    docs: Sequence[Document],
    tokenizer: Tokenizer,
    config: RehearsalConfig,
    model: ModelConfig,
    seed: int,
    workdir: Path,
) -> tuple[RehearsalResult, Sample]:
    """Sample, pack and write the data, run the trainer twice (one real SIGKILL), and judge.

    `workdir` is the rehearsal's own folder: it is emptied first, so a rehearsal killed half-way leaves nothing
    a later one could mistake for its own (a stale checkpoint would be resumed from).
    """
    if workdir.exists():
        kill_registered_groups(workdir / REGISTRY)  # a trainer left running by a campaign that was killed
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    sample = build_sample(
        docs,
        tokenizer,
        sample_tokens=config.sample_tokens,
        seq_len=config.seq_len,
        heldout_fraction=config.heldout_fraction,
        vocab=config.vocab,
    )
    data_dir = workdir / "sample"
    data_dir.mkdir()
    (data_dir / "sample.json").write_text(json.dumps(sample.summary(), indent=1, default=str) + "\n")
    if sample.problems:
        result = RehearsalResult(passed=False)
        for problem, fix in zip(sample.problems, sample.fixes + [""] * len(sample.problems), strict=False):
            result.fail(
                f"sample: {problem}", fix or "see the sample's checks in rehearsal/sample/sample.json"
            )
        result.details["sample"] = sample.summary()
        result.details["restore_check"] = "not run (the sample failed its checks)"
        return result, sample
    train, heldout = data_dir / "train.npy", data_dir / "heldout.npy"
    _save_npy(train, sample.train)
    _save_npy(heldout, sample.heldout)
    if sample.vocab_map is not None:
        _save_npy(data_dir / "vocab_map.npy", sample.vocab_map)
    shape = rehearsal_model(model, config.model)
    command = list(config.command)
    settings = HarnessSettings(
        command=command,
        steps=config.steps,
        seed=seed,
        checkpoint_every=config.checkpoint_every,
        timeout_s=config.timeout_s,
        min_loss_drop=config.min_loss_drop,
        restore_tolerance=config.restore_tolerance,
        tokens_per_step=config.batch_sequences * config.seq_len,
        batch_sequences=config.batch_sequences,
        kill_one=config.kill == "one_process",
        extra_env={
            contract.ENV_LEARNING_RATE: repr(config.learning_rate),
            contract.ENV_WARMUP_STEPS: str(config.warmup_steps),
            contract.ENV_EVAL_EVERY: str(config.eval_every),
            contract.ENV_MODEL: json.dumps(shape.model_dump()),
        },
    )
    result = rehearse(train, heldout, sample.vocab, settings, workdir)
    result.details["sample"] = sample.summary()
    result.details["model"] = {**shape.model_dump(), "vocab": sample.vocab}
    return result, sample

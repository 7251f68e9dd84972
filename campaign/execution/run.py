"""What a real run of the committed window needs: its data, the trainer's contract environment, its faults.

A real run trains the rehearsal's trainer contract (docs/rehearsal.md) on the sample of the clean data the
rehearsal gate packed (`rehearsal/sample/`), laid out in training order for `execute.steps` steps, with the
rehearsal's model shape and learning rate; `execute.command` or else `rehearsal.command` is the trainer.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import numpy as np

from campaign.config import CampaignConfig
from campaign.errors import ConfigError, Refused
from campaign.execution.injection import plan_injections
from campaign.execution.supervisor import RealRunSettings
from campaign.files import atomic_write_bytes
from campaign.rehearsal import contract
from campaign.rehearsal.gate import rehearsal_model
from campaign.rehearsal.harness import HarnessSettings, contract_env, training_order
from campaign.rehearsal.processes import resolve_command

SAMPLE_DIR = Path("rehearsal") / "sample"


def real_run_settings(
    config: CampaignConfig, workspace: Path, folder: Path, python: str = sys.executable
) -> RealRunSettings:
    """The settings of a real run of `config` in `folder`; writes its training file once (kept for a resume)."""
    ex, r = config.execute, config.rehearsal
    sample = workspace / SAMPLE_DIR
    train, heldout, summary = sample / "train.npy", sample / "heldout.npy", sample / "sample.json"
    if not (train.is_file() and heldout.is_file() and summary.is_file()):
        raise Refused(
            f"a real run trains on the rehearsal's packed sample, and {sample} has none",
            where=str(sample),
            fix="run `campaign validate CONFIG` (its rehearsal gate packs the sample), then execute again",
        )
    vocab = int(json.loads(summary.read_text())["vocab"])
    ordered = folder / "data" / "train.npy"
    if not ordered.exists():
        rows = np.load(train, mmap_mode="r", allow_pickle=False)
        order = training_order(rows.shape[0], ex.steps, r.batch_sequences, config.seed)
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(rows[order], dtype=np.uint32), allow_pickle=False)
        atomic_write_bytes(ordered, buffer.getvalue())
    harness = HarnessSettings(
        command=list(ex.command or r.command),
        steps=ex.steps,
        seed=config.seed,
        checkpoint_every=ex.checkpoint_every,
        timeout_s=ex.max_wall_s,
        min_loss_drop=r.min_loss_drop,
        restore_tolerance=r.restore_tolerance,
        tokens_per_step=r.batch_sequences * r.seq_len,
        batch_sequences=r.batch_sequences,
        extra_env={
            contract.ENV_LEARNING_RATE: repr(r.learning_rate),
            contract.ENV_WARMUP_STEPS: str(min(r.warmup_steps, ex.steps - 1)),
            contract.ENV_EVAL_EVERY: str(r.eval_every),
            contract.ENV_MODEL: json.dumps(rehearsal_model(config.model, r.model).model_dump()),
        },
    )
    env = contract_env(
        ordered,
        heldout,
        vocab,
        harness,
        folder / "checkpoints",
        folder / "metrics.jsonl",
        workspace / "rehearsal" / "cache",
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("CAMPAIGN_REHEARSAL_")}
    seed = ex.inject.seed if ex.inject.seed is not None else config.seed
    try:
        injections = plan_injections(ex.inject.failures, seed, ex.inject.kinds, ex.steps, ex.checkpoint_every)
    except ValueError as err:
        raise ConfigError(
            str(err), where="execute.inject.failures", fix="inject fewer faults or raise execute.steps"
        ) from None
    return RealRunSettings(
        command=resolve_command(list(harness.command), python),
        env={**base, **env},
        steps=ex.steps,
        tokens_per_step=harness.tokens_per_step,
        max_wall_s=ex.max_wall_s,
        hang_factor=ex.hang_factor,
        hang_min_s=ex.hang_min_s,
        startup_s=ex.startup_s,
        backoff_s=ex.backoff_s,
        restart_backoff=ex.restart_backoff,
        backoff_max_s=ex.backoff_max_s,
        max_no_progress_restarts=ex.max_no_progress_restarts,
        stop_signal=ex.stop_signal,
        stop_grace_s=ex.stop_grace_s,
        on_operator_cancel=ex.on_operator_cancel,
        progress_every=ex.progress_every,
        max_restarts=ex.max_restarts,
        nodes=ex.nodes,
        exclude_after=ex.exclude_after,
        injections=tuple(injections),
        backend=ex.backend,
    )

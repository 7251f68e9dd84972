"""The `rehearsal:` section: the small real training loop the rehearsal gate runs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from campaign.config.schema.base import Frozen


class RehearsalModelConfig(Frozen):
    """The rehearsal model's shape; absent, it is derived from `model:` (same head and FFN ratios, width 128)."""

    layers: int = Field(2, ge=1, le=16, description="Transformer layers of the rehearsal model.")
    hidden: int = Field(128, ge=16, le=1024, description="Hidden size of the rehearsal model.")
    heads: int = Field(4, ge=1, le=64, description="Attention (query) heads of the rehearsal model.")
    kv_heads: int = Field(2, ge=1, le=64, description="Key/value heads of the rehearsal model.")
    ffn_hidden: int = Field(
        512, ge=16, le=8192, description="Feed-forward inner size of the rehearsal model."
    )

    @model_validator(mode="after")
    def _shapes(self) -> RehearsalModelConfig:
        if self.hidden % self.heads or (self.hidden // self.heads) % 2:
            raise ValueError(
                f"hidden ({self.hidden}) must divide by heads ({self.heads}) into an even head size "
                "(rotary embeddings rotate pairs of channels)"
            )
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be divisible by kv_heads ({self.kv_heads})")
        return self


class RehearsalConfig(Frozen):
    """The small-scale rehearsal gate: a real training loop on a sample of the clean data, killed and restored."""

    sample_tokens: int = Field(
        60_000,
        ge=1_000,
        le=100_000_000,
        description="Tokens of clean data to sample (whole documents, chosen by hash).",
    )
    seq_len: int = Field(64, ge=4, le=8192, description="Tokens per packed training sequence.")
    heldout_fraction: float = Field(
        0.1, ge=0.01, le=0.5, description="Share of sampled documents held out for evaluation."
    )
    vocab: Literal["sample", "tokenizer"] = Field(
        "sample",
        description="'sample': ids renumbered densely over the tokens the sample uses (a small "
        "embedding, fast on a CPU); 'tokenizer': the tokenizer's own ids and full vocabulary.",
    )
    steps: int = Field(150, ge=10, le=1_000_000, description="Optimizer steps of each rehearsal run.")
    batch_sequences: int = Field(8, ge=1, le=4096, description="Sequences per optimizer step.")
    checkpoint_every: int = Field(30, ge=1, le=1_000_000, description="Steps between checkpoints.")
    eval_every: int = Field(15, ge=1, le=1_000_000, description="Steps between held-out evaluations.")
    learning_rate: float = Field(3e-3, gt=0, le=1e6, description="Peak learning rate (AdamW).")
    warmup_steps: int = Field(15, ge=0, le=1_000_000, description="Linear warm-up steps before cosine decay.")
    min_loss_drop: float = Field(
        1.0,
        ge=0,
        le=100,
        description="Training loss (nats) must fall at least this "
        "much from the first tenth of the steps to the last tenth.",
    )
    restore_tolerance: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Largest relative loss difference between the "
        "resumed and the uninterrupted run (0 = bit-identical, the reference trainer).",
    )
    timeout_s: float = Field(
        600, gt=0, le=86_400, description="Seconds all trainer starts together may take."
    )
    kill: Literal["group", "one_process"] = Field(
        "group",
        description="What the faulted run's fault kills: the trainer's whole process group, or one process of it "
        "(the newest process with no child: one rank of a data-parallel trainer under its launcher, e.g. `python "
        "-m campaign.rehearsal.launch --ranks 2`), whose loss the trainer must turn into the job's end.",
    )
    command: tuple[str, ...] = Field(
        ("python", "-m", "campaign.rehearsal.trainer"),
        min_length=1,
        description="Trainer command (a list of arguments) obeying the trainer contract (docs/rehearsal.md); a first "
        "argument 'python' is the Python running campaign.",
    )
    model: RehearsalModelConfig | None = Field(
        None, description="Rehearsal model shape; absent = derived from `model:` (same ratios, width 128)."
    )

    @model_validator(mode="after")
    def _checkpoint_before_the_end(self) -> RehearsalConfig:
        if 2 * self.checkpoint_every > self.steps:
            raise ValueError(
                f"@checkpoint_every: {self.checkpoint_every} leaves no room for a kill after a "
                f"checkpoint and before step {self.steps}; use at most steps / 2 = {self.steps // 2}"
            )
        if self.warmup_steps >= self.steps:
            raise ValueError(f"@warmup_steps: {self.warmup_steps} must be below steps ({self.steps})")
        return self

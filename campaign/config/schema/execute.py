"""The `execute:` section: how the committed window runs (simulated, local or Slurm) and injected faults."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from campaign.config.schema.base import MAX_SEED, Frozen

INJECT_KINDS = ("kill", "hang", "node_loss")


class InjectConfig(Frozen):
    """Real faults driven into a real run (docs/execution.md), so a team sees its restart path work."""

    failures: int = Field(0, ge=0, le=1000, description="Faults to inject over the run (0: none).")
    seed: int | None = Field(
        None,
        ge=0,
        le=MAX_SEED,
        description="Seed of the faults' steps and kinds (absent: the campaign's seed).",
    )
    kinds: tuple[Literal["kill", "hang", "node_loss"], ...] = Field(
        ("kill",),
        min_length=1,
        description="Kinds drawn from: kill (SIGKILL of the trainer's process group), hang (SIGSTOP: the trainer "
        "stops writing steps), node_loss (the node is marked lost and the job killed on it).",
    )


class ExecuteConfig(Frozen):
    """How the committed window is executed: simulated, or a real run supervised on this machine or on Slurm.

    Not part of the config digest: how a committed window runs is chosen at execute time (`--backend`)."""

    backend: Literal["simulate", "local", "slurm"] = Field(
        "simulate",
        description="simulate: the discrete-event model of the window; local: the trainer as a process group on "
        "this machine, supervised; slurm: the same through sbatch (docs/execution.md).",
    )
    command: tuple[str, ...] | None = Field(
        None,
        min_length=1,
        description="Trainer command of a real run (the rehearsal's trainer contract); absent: rehearsal.command.",
    )
    steps: int = Field(
        300, ge=10, le=100_000_000, description="Target step of a real run: it ends there or at max_wall_s."
    )
    checkpoint_every: int = Field(
        30, ge=1, le=1_000_000, description="Steps between checkpoints of a real run."
    )
    max_wall_s: float = Field(
        1800,
        gt=0,
        le=2_592_000,
        description="A real run's window: it stops here if the target step is not reached.",
    )
    hang_factor: float = Field(
        10.0,
        ge=2,
        le=10_000,
        description="A trainer that writes no step for this many median step times is hung (killed, restarted).",
    )
    hang_min_s: float = Field(
        2.0,
        ge=0.1,
        le=86_400,
        description="Floor of the hang limit, seconds (the first steps have no median).",
    )
    startup_s: float = Field(
        300,
        gt=0,
        le=86_400,
        description="Seconds a start may take to write its first step before it is hung.",
    )
    backoff_s: float = Field(
        1.0, ge=0, le=3600, description="Back-off before a restart, seconds (the first, with exponential)."
    )
    restart_backoff: Literal["fixed", "exponential"] = Field(
        "fixed",
        description="fixed: every restart waits backoff_s; exponential: backoff_s doubled for each failure in a "
        "row that passed no new step, at most backoff_max_s.",
    )
    backoff_max_s: float = Field(
        300.0, ge=0, le=86_400, description="Cap of an exponential back-off, seconds."
    )
    max_restarts: int = Field(20, ge=0, le=10_000, description="Restarts before the run is given up.")
    max_no_progress_restarts: int = Field(
        3,
        ge=0,
        le=10_000,
        description="Restarts in a row that pass no new step (a crash before the first step, or at the same "
        "step) before the run stops as a software failure; such failures never exclude a node.",
    )
    stop_signal: Literal["SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2", "SIGHUP", "SIGQUIT"] = Field(
        "SIGTERM",
        description="What a stop (a hang, the window's end, a cancel) sends the trainer first, so it can save.",
    )
    stop_grace_s: float = Field(
        30.0, ge=0, le=3600, description="Seconds the trainer has after stop_signal before SIGKILL."
    )
    on_operator_cancel: Literal["stop", "requeue"] = Field(
        "stop",
        description="Slurm: the run's job cancelled by someone else (scancel): stop the run (a stop by a person), "
        "or requeue it and go on.",
    )
    progress_every: int = Field(
        0,
        ge=0,
        le=100_000_000,
        description="A progress line every this many steps (0: every tenth of the target); a line at least "
        "every 30 s whatever happens.",
    )
    nodes: tuple[str, ...] = Field(
        ("local-0", "local-1", "local-2"),
        min_length=1,
        description="Nodes a real run may use, in order (local: names of slots on this machine; slurm: hosts).",
    )
    exclude_after: int = Field(
        2,
        ge=1,
        le=1000,
        description="Failures on one node after which it is excluded (a lost node: at once).",
    )
    inject: InjectConfig = InjectConfig()

    @model_validator(mode="after")
    def _room_for_faults(self) -> ExecuteConfig:
        if 2 * self.checkpoint_every > self.steps:
            raise ValueError(
                f"@checkpoint_every: {self.checkpoint_every} leaves at most one checkpoint before step {self.steps}; "
                f"use at most steps / 2 = {self.steps // 2}"
            )
        room = self.steps - self.checkpoint_every - 1
        if self.inject.failures > room:
            raise ValueError(
                f"@inject.failures: {self.inject.failures} faults need as many distinct steps after the first "
                f"checkpoint and before step {self.steps}, and there are {room}; inject fewer or raise steps"
            )
        return self

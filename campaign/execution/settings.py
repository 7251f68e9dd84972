"""What a real run is told: the trainer, its contract environment, the target and the supervisor's limits; and the
names of what can end a start (failure categories) and what ends a run (outcomes)."""

from __future__ import annotations

from dataclasses import dataclass

from campaign.execution.injection import Injection

# Failure categories of a real run (the `category` of its failure events).
EXIT_CODE, SIGNAL, HANG, NODE_LOST, KILL, SUPERVISOR_LOST, BAD_METRICS, OPERATOR_CANCEL = (
    "exit_code",
    "signal",
    "hang",
    "node_lost",
    "kill",
    "supervisor_lost",
    "bad_metrics",
    "operator_cancel",
)
# Whom a failure points at (the `blame` of its failure event): only `node` counts towards excluding a node.
BLAME_NODE, BLAME_SOFTWARE, BLAME_INJECTED, BLAME_NONE = "node", "software", "injected", "none"


@dataclass(frozen=True)
class RealRunSettings:
    """One real run: the trainer, its contract environment, the target and the supervisor's limits."""

    command: list[str]
    env: dict[str, str]
    steps: int
    tokens_per_step: int
    max_wall_s: float
    hang_factor: float = 10.0
    hang_min_s: float = 2.0
    startup_s: float = 300.0
    backoff_s: float = 1.0
    max_restarts: int = 20
    nodes: tuple[str, ...] = ("local-0",)
    exclude_after: int = 2
    injections: tuple[Injection, ...] = ()
    backend: str = "local"  # local: a process group here; slurm: the run's requeued batch job
    max_no_progress_restarts: int = 3  # restarts in a row that pass no new step before the run stops
    stop_signal: str = "SIGTERM"  # what a stop sends first (a hang, the window's end, a cancel)
    stop_grace_s: float = 30.0  # then SIGKILL after this many seconds
    restart_backoff: str = (
        "fixed"  # fixed: backoff_s; exponential: backoff_s x 2^(n-1), at most backoff_max_s
    )
    backoff_max_s: float = 300.0
    on_operator_cancel: str = "stop"  # an operator's scancel: stop the run, or requeue it (Slurm)
    progress_every: int = 0  # a progress line every this many steps (0: every tenth of the target)

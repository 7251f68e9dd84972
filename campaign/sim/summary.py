"""The per-replica summary: what one simulated replica reports, read by the store, analysis, compare and the CLI.

It travels as JSON (the catalog's `sim_replicas.summary`, Prefect task results, `campaign simulate --json`), so it
is a TypedDict: the keys are checked where it is written and read, and it serialises to exactly these keys.
docs/design.md lists the keys the `--json` contracts promise.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from campaign.goodput import CostUsd

# The two day figures of a simulate summary, each labelled with what it is over (the same labels on every surface):
# target_days' percentiles are the schedule gate's, over every replica; completion_days' are over those that finished.
TARGET_DAYS_LABEL = (
    "target reached on day (p10-p90 over every replica, n/a past the window; mean of those that did)"
)
COMPLETION_DAYS_LABEL = "finished on day (over the replicas that finished only)"


class Interruptions(TypedDict):
    unexpected: int
    planned: int
    by_category: dict[str, int]  # failure category -> interruptions


class ReplicaSummary(TypedDict):
    replica: int
    seed: int
    window_s: float
    gpus: int
    spare_gpus: int
    ettr: float
    window_utilisation: float
    job_wall_s: float
    goodput_breakdown_gpu_h: dict[str, float]  # productive, lost_rework, checkpoint, restart, waiting, idle
    job_time_s: dict[str, float]  # productive, lost_rework, checkpoint, restart, waiting, released
    interruptions: Interruptions
    observed_job_mtbf_h: float | None
    checkpoint_interval_s: float
    n_checkpoints: int
    n_spares_exhausted: int
    n_quarantined: int  # nodes retired by the quarantine policy
    rework_s_per_failure: float | None
    lost_at_window_end_s: float
    tokens_trained: float
    tokens_target: float
    completed: bool
    completion_s: float | None
    # When the committed tokens first reached tokens_target (None: not inside the window).
    target_reached_s: float | None
    power_mw: dict[str, float]  # peak, mean, min, max_ramp_mw_per_s, largest swings and job_start_swing
    energy_mwh: float
    cost_usd: CostUsd
    # Added by execute to the replica it records (analyse reads them): the plan's optimal interval and the plan.
    checkpoint_interval_optimal_s: NotRequired[float]
    plan: NotRequired[dict[str, Any]]
    # A window run for real (campaign.execution.measured): the run's own figures; absent for a simulated replica.
    measured: NotRequired[dict[str, Any]]

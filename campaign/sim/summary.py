"""The per-replica summary: what one simulated replica reports, read by the store, analysis, compare and the CLI.

A frozen record read by attribute; it travels as JSON (the catalog's `sim_replicas.summary`, `campaign simulate
--json`) through `to_json()`, which gives exactly these keys in this order, and comes back through `from_json()`.
A window run for real adds its `measured` section (campaign.execution.measured), a multi-node run that section's
nodes and recoveries. docs/design.md lists the keys the `--json` contracts promise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from campaign.errors import DataError
from campaign.goodput import CostUsd
from campaign.records import JsonRecord

# The two day figures of a simulate summary, each labelled with what it is over (the same labels on every surface):
# target_days' percentiles are the schedule gate's, over every replica; completion_days' are over those that finished.
TARGET_DAYS_LABEL = (
    "target reached on day (p10-p90 over every replica, n/a past the window; mean of those that did)"
)
COMPLETION_DAYS_LABEL = "finished on day (over the replicas that finished only)"


@dataclass(frozen=True, slots=True)
class Interruptions(JsonRecord):
    """A replica's interruptions of the job: unexpected (failures), planned, and the failures per category."""

    unexpected: int
    planned: int
    by_category: dict[str, int]  # failure category -> interruptions


@dataclass(frozen=True, slots=True)
class Recovery(JsonRecord):
    """One failure of a multi-node run and what it cost (seconds written to the millisecond)."""

    node: str
    category: str
    injected: bool
    step: int
    resumed_at_step: int
    detection_s: float
    restart_s: float | None
    rework_steps: int
    rework_s: float

    JSON_ROUND: ClassVar[Mapping[str, int]] = {"detection_s": 3, "restart_s": 3, "rework_s": 3}


@dataclass(frozen=True, slots=True)
class Straggler(JsonRecord):
    """A node the supervisor reported slow: its name, the rank on it and the supervisor's line."""

    node: str
    rank: int
    detail: str


@dataclass(frozen=True, slots=True)
class NodeOutcome(JsonRecord):
    """What one node of a multi-node run did: its role at the first start, its failures and recovery seconds."""

    role: str  # job or spare
    failures: int
    excluded: bool
    straggler: bool
    recovery_s: float


@dataclass(frozen=True, slots=True)
class MultiNodeRun(JsonRecord):
    """A multi-node run's part of the `measured` section: its nodes, spares, exclusions and recoveries."""

    job_nodes: int
    spare_nodes: int
    world_size: int
    world_sizes: list[int]
    spares_used: list[str]
    nodes_excluded: list[str]
    spare_wait_s: float
    elastic: str | None  # how the job shrank when no spare was left (None: it kept its size)
    stragglers: list[Straggler]
    per_node: dict[str, NodeOutcome]
    recoveries: list[Recovery]


@dataclass(frozen=True, slots=True)
class RunSource(JsonRecord):
    """The files a run campaign did not launch was read from (campaign.execution.external)."""

    metrics: str
    incidents: str | None


@dataclass(frozen=True, slots=True)
class MeasuredRun(JsonRecord):
    """A window run for real: the run's own figures beside the simulator's keys (campaign.execution.measured)."""

    started_at: str | None
    target_step: int
    checkpoint_every_steps: int
    final_step: int
    failures_injected: int
    failures_organic: int
    injected_by_category: dict[str, int]
    restarts: int
    excluded_nodes: list[str]
    checkpoint_fallbacks: list[str]
    checkpoints_not_counted: list[int]
    outcome: str
    # A step trained more than once lay after the checkpoint a restart resumed from: the rework.
    steps_trained_again: int
    steps_trained: int
    rework_steps_expected: int
    median_step_s: float | None
    startup_s: float | None  # the first start's time before its first step (start-up, compile), in `restart`
    max_wall_s: float | None  # the window the run had (None: its own wall time)
    checkpoint_write_s: float | None
    end: str
    nodes: MultiNodeRun | None = None  # a multi-node run's, written flat after the rest
    source: RunSource | None = None  # a run read from its files, not launched

    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"source"})
    JSON_INLINE: ClassVar[frozenset[str]] = frozenset({"nodes"})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MeasuredRun:
        source = data.get("source")
        return cls(
            started_at=data["started_at"],
            target_step=data["target_step"],
            checkpoint_every_steps=data["checkpoint_every_steps"],
            final_step=data["final_step"],
            failures_injected=data["failures_injected"],
            failures_organic=data["failures_organic"],
            injected_by_category=dict(data["injected_by_category"]),
            restarts=data["restarts"],
            excluded_nodes=list(data["excluded_nodes"]),
            checkpoint_fallbacks=list(data["checkpoint_fallbacks"]),
            checkpoints_not_counted=list(data["checkpoints_not_counted"]),
            outcome=data["outcome"],
            steps_trained_again=data["steps_trained_again"],
            steps_trained=data["steps_trained"],
            rework_steps_expected=data["rework_steps_expected"],
            median_step_s=data["median_step_s"],
            startup_s=data["startup_s"],
            max_wall_s=data["max_wall_s"],
            checkpoint_write_s=data["checkpoint_write_s"],
            end=data["end"],
            nodes=MultiNodeRun(
                job_nodes=data["job_nodes"],
                spare_nodes=data["spare_nodes"],
                world_size=data["world_size"],
                world_sizes=list(data["world_sizes"]),
                spares_used=list(data["spares_used"]),
                nodes_excluded=list(data["nodes_excluded"]),
                spare_wait_s=data["spare_wait_s"],
                elastic=data["elastic"],
                stragglers=[Straggler(**s) for s in data["stragglers"]],
                per_node={name: NodeOutcome(**node) for name, node in data["per_node"].items()},
                recoveries=[Recovery(**r) for r in data["recoveries"]],
            )
            if "job_nodes" in data
            else None,
            source=RunSource(**source) if source else None,
        )


@dataclass(frozen=True, slots=True)
class ReplicaSummary(JsonRecord):
    """One replica's figures (a real run's: `replica` -1 and its `measured` section)."""

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
    # A window run for real (campaign.execution.measured): the run's own figures; absent for a simulated replica.
    measured: MeasuredRun | None = None
    # Added by execute to the replica it records (analyse reads them): the plan's optimal interval and the plan,
    # as the plan wrote it (Plan.to_json) and the catalog keeps it.
    checkpoint_interval_optimal_s: float | None = None
    plan: dict[str, Any] | None = None

    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset(
        {"measured", "checkpoint_interval_optimal_s", "plan"}
    )

    def measured_run(self) -> MeasuredRun:
        """The `measured` section of a run's summary (a bug to ask a simulated replica for one)."""
        if self.measured is None:
            raise ValueError(f"replica {self.replica} was simulated: its summary has no measured section")
        return self.measured

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReplicaSummary:
        """A summary as the catalog or a task result holds it; one written by an older campaign, without a figure
        this one records, is refused naming the figures (exit 2), never read with a figure made up."""
        missing = [name for name in (*_SUMMARY_KEYS, "interruptions") if name not in data]
        if missing:
            raise DataError(
                f"a summary without {', '.join(missing)}: it was written by an older version of campaign",
                where="the workspace's catalog (campaign.duckdb)",
                fix="run the stage that wrote it again (simulate, execute or validate) in this workspace",
            )
        measured = data.get("measured")
        return cls(
            **{name: data[name] for name in _SUMMARY_KEYS},
            interruptions=Interruptions(**data["interruptions"]),
            measured=MeasuredRun.from_json(measured) if measured is not None else None,
            checkpoint_interval_optimal_s=data.get("checkpoint_interval_optimal_s"),
            plan=data.get("plan"),
        )


_SUMMARY_KEYS = tuple(
    f.name
    for f in fields(ReplicaSummary)
    if f.name not in ("interruptions", "measured", "checkpoint_interval_optimal_s", "plan")
)

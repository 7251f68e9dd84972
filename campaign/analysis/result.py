"""The analysis of one window as typed records: every figure `analyse_window` computes, read by attribute.

`to_json()` gives exactly the analysis.json object (`campaign analyse --json`, docs/design.md): the keys, their
order and the keys present only for a measured run or once the report is drawn. JSON leaves here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from campaign.records import JsonRecord, json_value

if TYPE_CHECKING:
    import numpy as np

    from campaign.calendar.report_records import ReleasedCapacity
    from campaign.failures.fit import FittedRate
    from campaign.sim.summary import MeasuredRun


@dataclass(frozen=True, slots=True)
class PlannedFigures(JsonRecord):
    """The committed plan's expectations (None where the recorded summary carries no plan)."""

    expected_ettr: float | None
    expected_days: float | None
    job_mtbf_h: float | None
    tokens_per_s: float | None
    gpus: int | None


@dataclass(frozen=True, slots=True)
class InterruptionCounts(JsonRecord):
    """Interruptions of the job; a measured run adds the injected and organic counts."""

    unexpected: int
    planned: int
    by_category: dict[str, int]
    injected: int | None = None
    organic: int | None = None
    injected_by_category: dict[str, int] | None = None

    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"injected", "organic", "injected_by_category"})


@dataclass(frozen=True, slots=True)
class FailureRow(JsonRecord):
    """One failure category: observed count, the count its configured rate expected, and the central 95% Poisson
    range of that expectation."""

    category: str
    observed: int
    expected: float | None
    interval_lo: int | None
    interval_hi: int | None
    is_within: bool | None


@dataclass(frozen=True, slots=True)
class CheckpointIntervals(JsonRecord):
    used: float
    optimal: float | None
    optimal_for_observed_mtbf: float | None


@dataclass(frozen=True, slots=True)
class CheckpointSection(JsonRecord):
    """The interval used against Daly's optimum for the observed MTBF, and what the difference cost
    (`mean_restart_s` only where the optimum was computed)."""

    used_s: float
    write_s: float | None
    n_checkpoints: int | None
    optimal_for_observed_mtbf_s: float | None = None
    extra_gpu_h: float | None = None
    extra_cost_usd: float | None = None
    mean_restart_s: float | None = None

    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"mean_restart_s"})


@dataclass(frozen=True, slots=True)
class SparesSection(JsonRecord):
    spare_nodes: int | None
    n_exhausted: int
    n_waits: int
    waiting_for_spare_h: float
    waiting_for_spare_gpu_h: float
    more_spare_nodes_needed: int
    cost_of_more_usd: float | None
    saving_usd: float
    would_pay: bool


@dataclass(frozen=True, slots=True)
class PowerFigures(JsonRecord):
    peak: float | None
    mean: float | None
    min: float | None
    max_ramp_mw_per_s: float | None
    job_start_swing: float | None


@dataclass(frozen=True, slots=True)
class CostFigures(JsonRecord):
    compute: float
    energy: float
    lost: float
    lost_by_bucket: dict[str, float]
    checkpoint: float
    idle_spares: float
    released_early: float  # the idle tail priced as the calendar prices its early-finish gap


@dataclass(frozen=True, slots=True)
class WindowFigures(JsonRecord):
    """Every figure of one window from its summary and event log (`analysis.window_figures`)."""

    ettr: float
    window_utilisation: float
    ettr_whole_window: float
    definitions: dict[str, str]
    gpus: int
    spare_gpus: int
    job_wall_h: float
    planned: PlannedFigures
    goodput_breakdown_gpu_h: dict[str, float]
    window_gpu_h: float
    interruptions: InterruptionCounts
    failures: list[FailureRow]
    observed_job_mtbf_h: float | None
    planned_job_mtbf_h: float | None
    checkpoint_interval_s: CheckpointIntervals
    checkpoint: CheckpointSection
    spares: SparesSection
    power_mw: PowerFigures
    energy_mwh: float | None
    gpu_hour_usd: float
    energy_usd_per_mwh: float
    cost_usd: CostFigures
    released_early_h: float
    released_early: ReleasedCapacity  # calendar.gaps.released_capacity
    tokens_trained: float
    tokens_target: float
    completed: bool
    completion_days: float | None
    target_days: float | None
    window_days: float
    smoothing: Mapping[str, object] | None  # the committed config's plan.power_smoothing, as recorded


@dataclass(frozen=True, slots=True)
class WindowSpan(JsonRecord):
    """The window the report covers; for a measured run, the run's own start and length with the booked window."""

    start: str
    end: str
    hours: float
    booked: dict[str, str] | None = None

    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"booked"})


@dataclass(frozen=True, slots=True)
class MixtureRow(JsonRecord):
    """Kept documents and tokens of one source, with the achieved and the planned token share."""

    source: str
    n_input: int
    n_documents: int
    n_rejected: int
    n_tokens: int
    token_share: float
    planned_share: float | None


@dataclass(frozen=True, slots=True)
class RejectionRow(JsonRecord):
    reason: str
    n_documents: int
    n_tokens: int | None


@dataclass(frozen=True, slots=True)
class PiiRow(JsonRecord):
    source: str
    kind: str
    n_replaced: int


@dataclass(frozen=True, slots=True)
class DataSection(JsonRecord):
    """The data behind the window (`pii` None: not read, as for a run campaign did not prepare)."""

    mixture: list[MixtureRow]
    rejections: list[RejectionRow]
    pii: list[PiiRow] | None = None

    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"pii"})


@dataclass(frozen=True, slots=True)
class GateFigures(JsonRecord):
    """One gate as the catalog recorded it; `details` is its JSON details column as stored."""

    gate: str
    passed: bool
    summary: str
    details: Mapping[str, object]
    run_id: str


@dataclass(frozen=True, slots=True)
class ZoomPanel(JsonRecord):
    """The per-second facility power around one moment, with its swing and steepest ramp (the series are drawn,
    the figures go into analysis.json)."""

    title: str
    centre_s: float
    t_s: np.ndarray  # seconds of the window
    power_mw: np.ndarray  # MW, one per second
    swing_mw: float
    max_ramp_mw_per_s: float

    NOT_IN_JSON: ClassVar[frozenset[str]] = frozenset({"t_s", "power_mw"})


@dataclass(frozen=True, slots=True)
class WithWithout(JsonRecord):
    """One figure with the window's smoothing and without it."""

    with_: float
    without: float

    JSON_KEYS: ClassVar[Mapping[str, str]] = {"with_": "with"}


@dataclass(frozen=True, slots=True)
class FinishWithWithout(JsonRecord):
    """The day the job finished with the window's smoothing and without it (None: it did not finish)."""

    with_: float | None
    without: float | None

    JSON_KEYS: ClassVar[Mapping[str, str]] = {"with_": "with"}


@dataclass(frozen=True, slots=True)
class SmoothingEffect(JsonRecord):
    """What the window's power smoothing cost against the swing it removed (`power_detail.smoothing_effect`)."""

    energy_mwh: WithWithout
    extra_energy_mwh: float
    max_ramp_mw_per_s: WithWithout
    swing_mw: WithWithout
    tokens_trained: WithWithout
    completion_days: FinishWithWithout


@dataclass(frozen=True, slots=True)
class BandFigure(JsonRecord):
    """One headline figure of a measured run beside the plan and the p10-p90 band of its replicas."""

    figure: str
    label: str
    real: float
    plan: float | None
    p10: float
    p50: float
    p90: float
    is_inside: bool | None  # None: the band has no spread, so it calls no figure outside
    no_spread: bool


@dataclass(frozen=True, slots=True)
class BandModel(JsonRecord):
    """The run as executed, as the band's replicas simulate it."""

    job_nodes: int  # one rank, counted as one GPU, each
    spare_nodes: int
    world_sizes: list[int]  # each start's ranks (fewer than job_nodes where the run shrank)
    step_time_s: float
    tokens_per_step: int
    checkpoint_interval_s: float
    checkpoint_write_s: float
    window_s: float
    startup_s: float
    shutdown_s: float  # from the last checkpoint, at the target, to the job's end: added to each replica
    slow_steps_s: float  # the kept steps' time beyond the median pace: productive, added to each replica
    detect_s: float
    restart_s: float
    organic_rates: str  # where the organic rates came from
    failures_per_hour: dict[str, float]


@dataclass(frozen=True, slots=True)
class Band(JsonRecord):
    """A measured run's plan-against-actual band (`campaign.analysis.band.replica_band`)."""

    replicas: int
    seed: int
    figures: list[BandFigure]
    n_inside: int
    n_judged: int
    conditioned_on: str
    cancelled: bool  # the run was stopped before its end; the replicas run to theirs
    model: BandModel


@dataclass(frozen=True, slots=True)
class BandNotSimulated(JsonRecord):
    """A measured run whose band could not be simulated, and why."""

    replicas: int
    figures: list[BandFigure]
    not_simulated: str


@dataclass(frozen=True, slots=True)
class WindowAnalysis(JsonRecord):
    """The analysis of one executed window: its figures, where it came from, and the sections the report adds.

    `measured` and `band` are present for a run measured for real; `smoothing_effect` once the recorded window was
    simulated again (`smoothing_compared`), `power_zoom` and `fitted_rates` once the report is drawn."""

    figures: WindowFigures
    commitment_id: str
    replica: int
    seed: int
    window: WindowSpan
    simulated: bool
    title: str
    simulation_note: str
    config_digest: str
    data_digest: str
    data: DataSection
    gates: list[GateFigures]
    plan_expected_ettr: float | None
    plan_expected_ettr_basis: str | None
    recommendations: list[dict[str, str]] = field(default_factory=list)
    measured: MeasuredRun | None = None  # the measured-run summary's section (campaign.execution.measured)
    band: Band | BandNotSimulated | None = None
    smoothing_compared: bool = False
    smoothing_effect: SmoothingEffect | None = None
    power_zoom: list[ZoomPanel] | None = None
    fitted_rates: list[FittedRate] | None = None  # campaign.failures.profile.observed_rates

    def to_json(self) -> dict[str, Any]:
        """The analysis.json object, key for key and in the order the report and the contract tests read."""
        out = self.figures.to_json()
        out.update(
            commitment_id=self.commitment_id,
            replica=self.replica,
            seed=self.seed,
            window=self.window.to_json(),
            simulated=self.simulated,
            title=self.title,
            simulation_note=self.simulation_note,
            config_digest=self.config_digest,
            data_digest=self.data_digest,
            data=self.data.to_json(),
            gates=[g.to_json() for g in self.gates],
        )
        if self.measured is not None:
            out["measured"] = self.measured.to_json()
        if self.band is not None:
            out["band"] = self.band.to_json()
        out.update(
            plan_expected_ettr=self.plan_expected_ettr,
            plan_expected_ettr_basis=self.plan_expected_ettr_basis,
            recommendations=self.recommendations,
        )
        if self.smoothing_compared:
            out["smoothing_effect"] = json_value(self.smoothing_effect)
        if self.power_zoom is not None:
            out["power_zoom"] = json_value(self.power_zoom)
        if self.fitted_rates is not None:
            out["fitted_rates"] = json_value(self.fitted_rates)
        return out

"""A `campaign simulate` result read as typed records: the figures its report and `campaign analyse --compare` read
(the spreads over replicas, P(target inside the window), the window-length verdict, each replica's values), with
the JSON object as it was written kept beside them for the pages that show it whole.

`SimulateRun.from_json` is the one place those figures leave the JSON; a key an older file lacks reads as None (an
empty list for a replica's values), as the report and the comparison have always shown it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from campaign.records import JsonRecord

_SPREAD_STATS = ("mean", "p10", "p50", "p90")


def _number(value: object) -> float | None:
    """A figure as a float; None for null, a missing key or anything not a number (a bool is no number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass(frozen=True, slots=True)
class Spread(JsonRecord):
    """One figure over the replicas: its mean and its 10th, 50th and 90th percentiles (None: not in the file, or
    no replica has the figure)."""

    mean: float | None = None
    p10: float | None = None
    p50: float | None = None
    p90: float | None = None

    @classmethod
    def from_json(cls, data: object) -> Spread | None:
        """The spread of a summary's `{mean, p10, p50, p90}` object; None when the summary has none there."""
        if not isinstance(data, dict):
            return None
        return cls(*(_number(data.get(stat)) for stat in _SPREAD_STATS))


@dataclass(frozen=True, slots=True)
class SimulatePower:
    """The facility power of a simulate summary that compare reads: the highest peak of any replica (MW)."""

    peak: float | None


@dataclass(frozen=True, slots=True)
class WindowLength(JsonRecord):
    """The schedule gate's verdict on the window's length over the replicas (`window_verdict.window_sufficiency`),
    as the simulate summary records it."""

    verdict: str  # fits, too_short or too_long
    p_target_in_window: float
    p90_target_days: float | None
    p99_target_days: float | None


@dataclass(frozen=True, slots=True)
class SimulateSummary:
    """The figures of a simulate summary its report and the comparison read. `p_target_in_window` of a file
    written before that figure existed is its P(finish): its windows stopped at the target, so finishing was
    reaching it."""

    window_days: float | None
    p_complete_in_window: float | None
    p_target_in_window: float | None
    ettr: Spread | None
    window_utilisation: Spread | None
    completion_days: Spread | None
    target_days: Spread | None
    interruptions_unexpected: Spread | None
    interruptions_planned: Spread | None
    tokens_trained: Spread | None
    observed_job_mtbf_h: Spread | None
    power_mw: SimulatePower | None
    energy_mwh: float | None  # mean over replicas
    window_length: WindowLength | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SimulateSummary:
        power = data.get("power_mw")
        length = data.get("window_length")
        return cls(
            window_days=_number(data.get("window_days")),
            p_complete_in_window=_number(data.get("p_complete_in_window")),
            p_target_in_window=_number(
                data["p_target_in_window"]
                if "p_target_in_window" in data
                else data.get("p_complete_in_window")
            ),
            ettr=Spread.from_json(data.get("ettr")),
            window_utilisation=Spread.from_json(data.get("window_utilisation")),
            completion_days=Spread.from_json(data.get("completion_days")),
            target_days=Spread.from_json(data.get("target_days")),
            interruptions_unexpected=Spread.from_json(data.get("interruptions_unexpected")),
            interruptions_planned=Spread.from_json(data.get("interruptions_planned")),
            tokens_trained=Spread.from_json(data.get("tokens_trained")),
            observed_job_mtbf_h=Spread.from_json(data.get("observed_job_mtbf_h")),
            power_mw=SimulatePower(_number(power.get("peak"))) if isinstance(power, dict) else None,
            energy_mwh=_number(data.get("energy_mwh")),
            window_length=WindowLength(
                verdict=length["verdict"],
                p_target_in_window=length["p_target_in_window"],
                p90_target_days=length["p90_target_days"],
                p99_target_days=length.get("p99_target_days"),
            )
            if length
            else None,
        )


@dataclass(frozen=True, slots=True)
class ReplicaValues(JsonRecord):
    """Each replica's figures in replica order, as the simulate result carries them (`replica_values`): the
    completion and target days None where a replica did not get there."""

    ettr: list[float]
    window_utilisation: list[float]
    completion_days: list[float | None]
    target_days: list[float | None]
    interruptions_unexpected: list[int]
    interruptions_planned: list[int]
    tokens_trained: list[float]

    KEYS: ClassVar[tuple[str, ...]] = (
        "ettr",
        "window_utilisation",
        "completion_days",
        "target_days",
        "interruptions_unexpected",
        "interruptions_planned",
        "tokens_trained",
    )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReplicaValues:
        """The values of a saved result; a list it lacks (a file from before that figure) reads as empty."""
        return cls(*(list(data.get(key) or []) for key in cls.KEYS))

    def target_or_completion_days(self) -> list[float | None]:
        """The days each replica reached its target; a result saved before target days existed gives its
        completion days (its windows stopped at the target)."""
        return self.target_days or self.completion_days


@dataclass(frozen=True, slots=True)
class SimulateRun:
    """One `campaign simulate` result: its figures typed, and `data`, the JSON object as written (the pages show
    its every figure, and the comparison's JSON carries it whole)."""

    replicas: int
    seed: int | None
    config_digest: str | None
    window_days: float | None  # a sweep's result carries it at the top as well as in the summary
    summary: SimulateSummary
    replica_values: ReplicaValues | None
    data: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SimulateRun:
        values = data.get("replica_values")
        return cls(
            replicas=data["replicas"],
            seed=data.get("seed"),
            config_digest=data.get("config_digest"),
            window_days=_number(data.get("window_days")),
            summary=SimulateSummary.from_json(data["summary"]),
            replica_values=ReplicaValues.from_json(values) if isinstance(values, dict) else None,
            data=data,
        )


def window_length_advice(run: SimulateRun) -> str | None:
    """Was the window too short or too long for the replicas' completion distribution?"""
    s = run.summary
    length = s.window_length
    if length:  # the schedule gate's rule (campaign.window_verdict.window_sufficiency)
        p90 = length.p90_target_days
        reached = f"{length.p_target_in_window:.0%} of replicas reach the target inside the window"
        if length.verdict == "too_short":
            return f"too short: only {reached}" + (f"; p90 is day {p90:.1f}" if p90 is not None else "")
        if length.verdict == "too_long":
            return f"longer than needed: {reached}, all but 1% of them by day {length.p99_target_days:.1f}"
        return f"fits: {reached}" + (f", 90% by day {p90:.1f}" if p90 is not None else "")
    p = s.p_complete_in_window
    done_p90 = s.completion_days.p90 if s.completion_days is not None else None
    window_days = run.window_days or s.window_days
    if p is None:
        return None
    if p < 0.9:
        return f"too short: only {p:.0%} of replicas finish inside the window" + (
            f"; p90 of those that finish is day {done_p90:.1f}" if done_p90 is not None else ""
        )
    if window_days and done_p90 is not None and done_p90 < 0.8 * window_days:
        return f"longer than needed: 90% of replicas finish by day {done_p90:.1f} of {window_days:.1f}"
    return f"fits: {p:.0%} of replicas finish inside the window" + (
        f", 90% by day {done_p90:.1f}" if done_p90 is not None else ""
    )

"""The facility power notice: what the utility should expect from the window, with and without smoothing.

Hourly facility MW (p10/p50/p90 over seeded replicas), the largest swing (net change over a monotone run of the
power curve: job start, stop, failures, checkpoints) and how often swings of at least 90% of it recur, the
steepest 1-s ramp, and the swings named by their causes, each with its size, duration and count per day: the
periodic ones (the checkpoint cadence, found in the curve as dips no longer than a checkpoint write; the pipeline
phases inside each step and the diurnal drift, from the model) apart from the non-periodic ones (the job stopping
for a failure or maintenance, and coming back up). An FFT of the 1-s series is not used to name them: a few
outages leak over the whole band and outweigh the checkpoint dips (`dominant_oscillation` shows it).
The smoothing trade-off gives, per GPU floor fraction, energy and cost added, slowdown (mean ETTR lost), what the
floor removes (the routine checkpoint dip) and what it cannot (the drop when the job stops: the floor does not hold
through a stop), and the ramp limit as a row of its own.
Source: Choukse et al. 2025, "Power Stabilization for AI Training Datacenters" (arXiv 2508.14318): operators
watch ramps (MW/s) and oscillation in roughly 0.1-20 Hz; NVML power-smoothing floor and ramp controls;
numpy.fft.rfft for the spectrum.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from campaign.sim.fast import simulate_curve
from campaign.sim.inputs import DAY_S, SimInputs
from campaign.sim.power import (
    COMM_POWER_FRACTION,
    COMPUTE_POWER_FRACTION,
    PowerCurve,
    one_second_series,
    power_levels,
    power_stats_from_curve,
)
from campaign.sim.summary import Interruptions

HOUR_S = 3600.0
DEFAULT_FLOORS = (0.5, 0.7, 0.9)
SWING_RECURRENCE_SHARE = 0.9  # a swing "recurs" when another is at least this share of the largest


def hourly_mw(curve: PowerCurve) -> np.ndarray:
    """Mean facility MW over each hour of the window (the last hour may be partial)."""
    edges = np.append(np.arange(0.0, curve.end_s, HOUR_S), curve.end_s)
    return curve.means_mw(edges)


def swings_mw(curve: PowerCurve) -> np.ndarray:
    """Net MW change over each maximal monotone run of the curve (signed), in time order."""
    # The value at every breakpoint (a step curve's levels; a ramp-limited curve's corners) and at the end.
    values = np.append(curve.mw, curve.mw[-1] + curve.slope[-1] * (curve.end_s - curve.t_s[-1]))
    steps = np.diff(values)
    steps = steps[steps != 0.0]
    if steps.size == 0:
        return steps
    run = np.cumsum(np.append(True, np.sign(steps[1:]) != np.sign(steps[:-1])))
    return np.bincount(run - 1, weights=steps)


# The band searched for the dominant oscillation: periods from 2 s (Nyquist of the 1-s series) to 1 hour; slower
# changes (job start and stop, the daily cycle) show in the hourly profile instead.
LONGEST_PERIOD_S = 3600.0


@dataclasses.dataclass(frozen=True)
class Dip:
    """A fall of the power curve followed by a rise: its start, time until the rise begins, and both sizes."""

    start_s: float
    duration_s: float
    drop_mw: float
    rise_mw: float


def dips(curve: PowerCurve) -> list[Dip]:
    """Every falling run of the curve followed by the next rising run, in time order."""
    t = np.asarray(curve.t_s, dtype=float)
    values = np.append(curve.mw, curve.mw[-1] + curve.slope[-1] * (curve.end_s - t[-1]))
    steps = np.diff(values)
    # A step function changes at the next breakpoint; a sloped segment changes from its own start.
    at = np.where(curve.slope != 0.0, t, np.append(t[1:], curve.end_s))
    moving = steps != 0.0
    steps, at = steps[moving], at[moving]
    out: list[Dip] = []
    if steps.size == 0:
        return out
    run = np.cumsum(np.append(True, np.sign(steps[1:]) != np.sign(steps[:-1]))) - 1
    sums = np.bincount(run, weights=steps)
    starts = at[np.searchsorted(run, np.arange(sums.size))]
    for i in range(sums.size - 1):
        if sums[i] < 0.0 < sums[i + 1]:
            out.append(
                Dip(float(starts[i]), float(starts[i + 1] - starts[i]), float(-sums[i]), float(sums[i + 1]))
            )
    return out


def routine_dip_max_s(inputs: SimInputs, drop_mw: float) -> float:
    """The longest a checkpoint dip lasts: its blocking write, the ramp limit's time to fall, and a second of
    slack for the 1-s grid; a longer dip is the job stopping (a failure or maintenance)."""
    fall_s = drop_mw / inputs.ramp_mw_per_s if inputs.ramp_mw_per_s else 0.0
    return inputs.checkpoint_write_s + fall_s + 1.0


def named_swings(curves: list[PowerCurve], inputs: SimInputs, interruptions: list[Interruptions]) -> dict:
    """The swings of the replicas' curves by cause, each with size (MW, median), duration (s, median) and count
    per day (mean over replicas): periodic (checkpoint cadence, pipeline phases, diurnal drift) and non-periodic
    (the job stops for a failure or maintenance; it comes back up). `interruptions` are the replicas' summary
    counts ({unexpected, planned})."""
    days = inputs.window_s / DAY_S
    routine: list[Dip] = []
    outages: list[Dip] = []
    n_routine, n_outage, periods = [], [], []
    for curve in curves:
        found = dips(curve)
        mine = [d for d in found if d.duration_s <= routine_dip_max_s(inputs, d.drop_mw)]
        others = [d for d in found if d.duration_s > routine_dip_max_s(inputs, d.drop_mw)]
        routine += mine
        outages += others
        n_routine.append(len(mine))
        n_outage.append(len(others))
        if len(mine) > 1:
            periods.append(float(np.median(np.diff([d.start_s for d in mine]))))

    def median(values: list[float]) -> float | None:
        return float(np.median(values)) if values else None

    levels = power_levels(inputs)
    tdp = inputs.gpu_tdp_w
    floor_w = (inputs.floor_fraction or 0.0) * tdp
    phase_w = max(COMPUTE_POWER_FRACTION * tdp, floor_w) - max(COMM_POWER_FRACTION * tdp, floor_w)
    phase_mw = inputs.gpus * phase_w * levels.pue / 1e6
    failures = float(np.mean([i.unexpected for i in interruptions])) / days if interruptions else 0.0
    planned = float(np.mean([i.planned for i in interruptions])) / days if interruptions else 0.0
    ramp = inputs.ramp_mw_per_s
    rise = median([d.rise_mw for d in outages])
    return {
        "periodic": [
            {
                "cause": "checkpoint cadence",
                "size_mw": median([d.drop_mw for d in routine]),
                "duration_s": median([d.duration_s for d in routine]),
                "period_s": median(periods),
                "per_day": float(np.mean(n_routine)) / days,
                "how": "dips in the curve no longer than a blocking checkpoint write",
            },
            {
                "cause": "pipeline phases",
                "size_mw": phase_mw,
                "duration_s": inputs.comm_fraction * inputs.step_time_s,
                "period_s": inputs.step_time_s,
                "per_day": DAY_S / inputs.step_time_s,
                "how": "communication and pipeline-bubble troughs inside each step, from the model: the 1-s "
                "series holds their mean",
            },
            {
                "cause": "diurnal drift",
                "size_mw": 0.0,
                "duration_s": DAY_S / 2.0,
                "period_s": DAY_S,
                "per_day": 1.0 if inputs.diurnal_amplitude else 0.0,
                "how": f"throughput drifts by +/-{inputs.diurnal_amplitude:.1%} over the day; the model holds "
                "the power levels through it",
            },
        ],
        "non_periodic": [
            {
                "cause": "job stops (failures and maintenance)",
                "size_mw": median([d.drop_mw for d in outages]),
                "duration_s": median([d.duration_s for d in outages]),
                "per_day": float(np.mean(n_outage)) / days,
                "failures_per_day": failures,
                "maintenance_per_day": planned,
                "how": "dips longer than a checkpoint write: the job is down until it restarts",
            },
            {
                "cause": "restarts (the job comes back up)",
                "size_mw": rise,
                "duration_s": (rise / ramp if ramp and rise is not None else 0.0),
                "per_day": float(np.mean(n_outage)) / days,
                "how": "the rise back to training after each stop; its duration is the ramp limit's climb",
            },
        ],
    }


def dominant_oscillation(curve: PowerCurve, fft_days: float) -> tuple[float, float]:
    """(frequency Hz, amplitude MW) of the largest frequency of the 1-s series over the first days, among
    periods of 2 s to LONGEST_PERIOD_S."""
    horizon = min(curve.end_s, fft_days * DAY_S)
    head = PowerCurve(
        curve.t_s[curve.t_s < horizon],
        curve.mw[curve.t_s < horizon],
        curve.slope[curve.t_s < horizon],
        horizon,
    )
    series = one_second_series(head)
    if series.size < 4:
        return 0.0, 0.0
    # Remove each hour's mean (steps from job start, stop and failures would otherwise leak over the whole band)
    # and taper with a Hann window; the amplitude is corrected for the window's gain.
    hours = np.arange(series.size) // int(LONGEST_PERIOD_S)
    residual = series - (np.bincount(hours, weights=series) / np.bincount(hours))[hours]
    window = np.hanning(series.size)
    spectrum = np.fft.rfft(residual * window)
    first = max(1, math.ceil(series.size / LONGEST_PERIOD_S))  # bin k is k / size Hz
    if first >= spectrum.size:
        return 0.0, 0.0
    k = first + int(np.argmax(np.abs(spectrum[first:])))
    return k / series.size, 2.0 * abs(spectrum[k]) / window.sum()


@dataclasses.dataclass(frozen=True)
class _Setting:
    ettr: float
    energy_mwh: float
    energy_usd: float
    largest_swing_mw: float
    swings_per_day: float
    max_ramp_mw_per_s: float
    hourly: np.ndarray  # replicas x hours
    swings: dict  # named_swings


def _run(inputs: SimInputs, replicas: int) -> tuple[_Setting, PowerCurve]:
    ettr, energy, usd, largest, per_day, ramp, hourly = [], [], [], [], [], [], []
    curves: list[PowerCurve] = []
    interruptions: list[Interruptions] = []
    first_curve: PowerCurve | None = None
    for r in range(replicas):
        summary, curve = simulate_curve(inputs, r)
        curves.append(curve)
        interruptions.append(summary.interruptions)
        if first_curve is None:
            first_curve = curve
        sw = np.abs(swings_mw(curve))
        big = float(sw.max()) if sw.size else 0.0
        largest.append(big)
        per_day.append(
            float((sw >= SWING_RECURRENCE_SHARE * big).sum()) / (inputs.window_s / DAY_S) if big else 0.0
        )
        ramp.append(power_stats_from_curve(curve)["max_ramp_mw_per_s"])
        ettr.append(summary.ettr)
        energy.append(summary.energy_mwh)
        usd.append(summary.cost_usd["energy"])
        hourly.append(hourly_mw(curve))
    setting = _Setting(
        float(np.mean(ettr)),
        float(np.mean(energy)),
        float(np.mean(usd)),
        float(np.max(largest)),
        float(np.mean(per_day)),
        float(np.max(ramp)),
        np.vstack(hourly),
        named_swings(curves, inputs, interruptions),
    )
    assert first_curve is not None, "a setting needs at least one replica"
    return setting, first_curve


def power_notice(inputs: SimInputs, replicas: int, floors: tuple[float, ...] = DEFAULT_FLOORS) -> dict:
    """The notice as a JSON-ready dict: without smoothing, with the config's smoothing (if any), and the trade-off.

    Args:
        replicas: seeded replicas per setting (hourly percentiles are over them).
        floors: GPU power floor fractions of TDP for the trade-off table (each with the config's ramp limit).
    """
    if replicas < 1:
        raise ValueError("power_notice needs at least one replica")
    bare = dataclasses.replace(inputs, floor_fraction=None, ramp_mw_per_s=None)
    settings = {"without_smoothing": bare}
    if inputs.floor_fraction is not None or inputs.ramp_mw_per_s is not None:
        settings["with_smoothing"] = inputs
    out: dict = {
        "replicas": replicas,
        "window_days": inputs.window_s / DAY_S,
        "smoothing": {"floor_fraction": inputs.floor_fraction, "ramp_mw_per_s": inputs.ramp_mw_per_s},
    }
    base: _Setting | None = None
    for name, x in settings.items():
        s, _ = _run(x, replicas)
        if base is None:
            base = s
        p10, p50, p90 = np.percentile(s.hourly, (10, 50, 90), axis=0)
        out[name] = {
            "hourly_mw": {
                "p10": p10.round(4).tolist(),
                "p50": p50.round(4).tolist(),
                "p90": p90.round(4).tolist(),
            },
            "largest_swing_mw": s.largest_swing_mw,
            "swings_of_that_size_per_day": s.swings_per_day,
            "steepest_ramp_mw_per_s": s.max_ramp_mw_per_s,
            "swings": s.swings,
            "energy_mwh": s.energy_mwh,
            "ettr": s.ettr,
        }
    assert base is not None  # the setting without smoothing always runs
    tradeoff = []
    for floor in floors:
        x = dataclasses.replace(inputs, floor_fraction=floor or None)
        s, _ = _run(x, replicas)
        tradeoff.append(_tradeoff_row(base, s, floor, inputs.ramp_mw_per_s))
    out["smoothing_tradeoff"] = tradeoff
    # The ramp limit alone, as a row of its own: it slows every change but removes no swing.
    out["ramp_limit_row"] = None
    if inputs.ramp_mw_per_s is not None:
        s, _ = _run(dataclasses.replace(inputs, floor_fraction=None), replicas)
        out["ramp_limit_row"] = _tradeoff_row(base, s, None, inputs.ramp_mw_per_s)
    return out


def _swing_size(swings: dict, kind: str, cause: str) -> float:
    row = next(r for r in swings[kind] if r["cause"] == cause)
    return row["size_mw"] or 0.0


def _tradeoff_row(base: _Setting, s: _Setting, floor: float | None, ramp: float | None) -> dict:
    """One setting against no smoothing: its cost, what it removes (the routine checkpoint dip, the steepest
    ramp) and what it cannot (the drop when the job stops, which the floor does not hold through)."""
    routine = _swing_size(s.swings, "periodic", "checkpoint cadence")
    routine_base = _swing_size(base.swings, "periodic", "checkpoint cadence")
    stop = _swing_size(s.swings, "non_periodic", "job stops (failures and maintenance)")
    return {
        "floor_fraction": floor,
        "ramp_mw_per_s": ramp,
        "energy_added_mwh": s.energy_mwh - base.energy_mwh,
        "energy_cost_added_usd": s.energy_usd - base.energy_usd,
        "slowdown_ettr_points": 100.0 * (base.ettr - s.ettr),
        "routine_swing_mw": routine,
        "routine_swing_removed_mw": routine_base - routine,
        "stop_swing_mw": stop,
        "stop_swing_added_mw": stop
        - _swing_size(base.swings, "non_periodic", "job stops (failures and maintenance)"),
        "largest_swing_mw": s.largest_swing_mw,
        "swing_removed_mw": base.largest_swing_mw - s.largest_swing_mw,
        "steepest_ramp_mw_per_s": s.max_ramp_mw_per_s,
        "ramp_removed_mw_per_s": base.max_ramp_mw_per_s - s.max_ramp_mw_per_s,
    }


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value >= 3600.0:
        return f"{value / 3600.0:,.1f} h"
    return f"{value:,.1f} s"


def notice_markdown(notice: dict, title: str) -> str:
    """The notice for people: a summary per setting, the trade-off table and a coarse daily profile."""
    lines = [
        f"# Facility power notice: {title}",
        "",
        f"{notice['replicas']} seeded replicas of the {notice['window_days']:g}-day window.",
        "",
    ]
    for name in ("without_smoothing", "with_smoothing"):
        if name not in notice:
            continue
        n = notice[name]
        hourly = n["hourly_mw"]
        lines += [
            f"## {name.replace('_', ' ').capitalize()}",
            "",
            (
                f"* Hourly facility MW: p50 {min(hourly['p50']):.2f} to {max(hourly['p50']):.2f}; p10 low "
                f"{min(hourly['p10']):.2f}, p90 high {max(hourly['p90']):.2f}"
            ),
            (
                f"* Largest swing {n['largest_swing_mw']:.2f} MW; swings of at least 90% of it "
                f"{n['swings_of_that_size_per_day']:.1f} times a day"
            ),
            f"* Steepest ramp {n['steepest_ramp_mw_per_s']:.2f} MW/s",
            f"* Energy {n['energy_mwh']:,.1f} MWh; mean ETTR {n['ettr']:.4f}",
            "",
            "| swing | kind | size MW | lasts | every | per day | from |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for kind, label in (("periodic", "periodic"), ("non_periodic", "not periodic")):
            for row in n["swings"][kind]:
                lines.append(
                    f"| {row['cause']} | {label} | {_fmt(row['size_mw'], '.2f')} | {_seconds(row['duration_s'])} | "
                    f"{_seconds(row.get('period_s'))} | {_fmt(row['per_day'], ',.1f')} | {row['how']} |"
                )
        lines.append("")
    ramp = notice["smoothing"]["ramp_mw_per_s"]
    lines += [
        "## Smoothing trade-off",
        "",
        "A GPU power floor lifts the routine dips (checkpoints, communication troughs) towards the training level: "
        "that is what it removes. It cannot remove the drop when the job stops (a failure or maintenance): the "
        "floor does not hold through a stop, and a higher floor drops from higher. The ramp limit removes no swing; "
        "it slows every change, and has its own row.",
        "",
        (
            "| setting | energy added MWh | energy cost added USD | slowdown (ETTR points) | checkpoint dip MW | "
            "removed MW | drop when the job stops MW | steepest ramp MW/s | ramp removed MW/s |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows = list(notice["smoothing_tradeoff"])
    if notice.get("ramp_limit_row"):
        rows.append(notice["ramp_limit_row"])
    for t in rows:
        setting = (
            f"ramp limit {t['ramp_mw_per_s']:g} MW/s, no floor"
            if t["floor_fraction"] is None
            else f"floor {t['floor_fraction']:.2f}" + (f" + ramp limit {ramp:g} MW/s" if ramp else "")
        )
        lines.append(
            f"| {setting} | {t['energy_added_mwh']:,.1f} | {t['energy_cost_added_usd']:,.0f} | "
            f"{t['slowdown_ettr_points']:.2f} | {t['routine_swing_mw']:.2f} | {t['routine_swing_removed_mw']:.2f} | "
            f"{t['stop_swing_mw']:.2f} | {t['steepest_ramp_mw_per_s']:.2f} | {t['ramp_removed_mw_per_s']:.2f} |"
        )
    p50 = notice["without_smoothing"]["hourly_mw"]["p50"]
    days = math.ceil(len(p50) / 24)
    lines += [
        "",
        "## Daily p50 profile without smoothing (mean of the hourly p50, MW)",
        "",
        "| day | MW |",
        "| ---: | ---: |",
    ]
    lines += [f"| {d + 1} | {np.mean(p50[24 * d : 24 * d + 24]):.2f} |" for d in range(days)]
    return "\n".join(lines) + "\n"

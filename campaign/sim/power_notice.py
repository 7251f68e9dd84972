"""The facility power notice: what the utility should expect from the window, with and without smoothing.

Hourly facility MW (p10/p50/p90 over seeded replicas), the largest swing (net change over a monotone run of the
power curve: job start, stop, failures, checkpoints) and how often swings of at least 90% of it recur, the
steepest 1-s ramp, the dominant oscillation (frequency and amplitude of the largest non-zero FFT bin of the
1-s series over the first `fft_days`), and the smoothing trade-off for a few GPU floor fractions: energy and cost
added, slowdown (mean ETTR lost), swing and ramp removed.
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
from campaign.sim.power import PowerCurve, one_second_series, power_stats_from_curve

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


def _run(inputs: SimInputs, replicas: int) -> tuple[_Setting, PowerCurve]:
    ettr, energy, usd, largest, per_day, ramp, hourly = [], [], [], [], [], [], []
    first_curve: PowerCurve | None = None
    for r in range(replicas):
        summary, curve = simulate_curve(inputs, r)
        if first_curve is None:
            first_curve = curve
        sw = np.abs(swings_mw(curve))
        big = float(sw.max()) if sw.size else 0.0
        largest.append(big)
        per_day.append(
            float((sw >= SWING_RECURRENCE_SHARE * big).sum()) / (inputs.window_s / DAY_S) if big else 0.0
        )
        ramp.append(power_stats_from_curve(curve)["max_ramp_mw_per_s"])
        ettr.append(summary["ettr"])
        energy.append(summary["energy_mwh"])
        usd.append(summary["cost_usd"]["energy"])
        hourly.append(hourly_mw(curve))
    setting = _Setting(
        float(np.mean(ettr)),
        float(np.mean(energy)),
        float(np.mean(usd)),
        float(np.max(largest)),
        float(np.mean(per_day)),
        float(np.max(ramp)),
        np.vstack(hourly),
    )
    assert first_curve is not None, "a setting needs at least one replica"
    return setting, first_curve


def power_notice(
    inputs: SimInputs, replicas: int, floors: tuple[float, ...] = DEFAULT_FLOORS, fft_days: float = 2.0
) -> dict:
    """The notice as a JSON-ready dict: without smoothing, with the config's smoothing (if any), and the trade-off.

    Args:
        replicas: seeded replicas per setting (hourly percentiles are over them).
        floors: GPU power floor fractions of TDP for the trade-off table (each with the config's ramp limit).
        fft_days: days of the 1-s series the spectrum is taken over (memory: 8 bytes x 86,400 x days).
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
        s, curve = _run(x, replicas)
        if base is None:
            base = s
        freq, amp = dominant_oscillation(curve, fft_days)
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
            "dominant_oscillation": {
                "frequency_hz": freq,
                "period_s": 1.0 / freq if freq else None,
                "amplitude_mw": amp,
                "over_days": min(fft_days, inputs.window_s / DAY_S),
            },
            "energy_mwh": s.energy_mwh,
            "ettr": s.ettr,
        }
    assert base is not None  # the setting without smoothing always runs
    tradeoff = []
    for floor in floors:
        x = dataclasses.replace(inputs, floor_fraction=floor or None)
        s, _ = _run(x, replicas)
        tradeoff.append(
            {
                "floor_fraction": floor,
                "ramp_mw_per_s": inputs.ramp_mw_per_s,
                "energy_added_mwh": s.energy_mwh - base.energy_mwh,
                "energy_cost_added_usd": s.energy_usd - base.energy_usd,
                "slowdown_ettr_points": 100.0 * (base.ettr - s.ettr),
                "largest_swing_mw": s.largest_swing_mw,
                "swing_removed_mw": base.largest_swing_mw - s.largest_swing_mw,
                "steepest_ramp_mw_per_s": s.max_ramp_mw_per_s,
                "ramp_removed_mw_per_s": base.max_ramp_mw_per_s - s.max_ramp_mw_per_s,
            }
        )
    out["smoothing_tradeoff"] = tradeoff
    return out


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
        osc = n["dominant_oscillation"]
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
            (
                f"* Dominant oscillation {osc['frequency_hz']:.5f} Hz (period {osc['period_s']:.0f} s), "
                f"amplitude {osc['amplitude_mw']:.3f} MW (FFT of the 1-s series over {osc['over_days']:g} days, "
                f"periods 2 s to 1 h)"
                if osc["frequency_hz"]
                else "* No oscillation"
            ),
            f"* Energy {n['energy_mwh']:,.1f} MWh; mean ETTR {n['ettr']:.4f}",
            "",
        ]
    lines += [
        "## Smoothing trade-off (GPU power floor, with the configured ramp limit)",
        "",
        (
            "| floor | energy added MWh | energy cost added USD | slowdown (ETTR points) | largest swing MW | "
            "swing removed MW | steepest ramp MW/s | ramp removed MW/s |"
        ),
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for t in notice["smoothing_tradeoff"]:
        lines.append(
            f"| {t['floor_fraction']:.2f} | {t['energy_added_mwh']:,.1f} | {t['energy_cost_added_usd']:,.0f} | "
            f"{t['slowdown_ettr_points']:.2f} | {t['largest_swing_mw']:.2f} | {t['swing_removed_mw']:.2f} | "
            f"{t['steepest_ramp_mw_per_s']:.2f} | {t['ramp_removed_mw_per_s']:.2f} |"
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

"""Diurnal drift of throughput: 1 - A cos(2 pi (t - t_slowest) / 1 day), its integral over a segment (seconds of
work at nominal speed), that integral summed over periodic checkpoint cycles, and its inverse. The event-by-event
model (campaign/sim/simulator.py) reads these; campaign/sim/compiled_time.py is the same arithmetic compiled.
"""

from __future__ import annotations

import math

import numpy as np

from campaign.sim.inputs import DAY_S, SimInputs

__all__ = ["diurnal_multiplier", "nominal_seconds", "nominal_seconds_periodic", "time_for_nominal_s"]


def diurnal_multiplier(inputs: SimInputs, t_s: float | np.ndarray) -> float | np.ndarray:
    """Throughput multiplier at time t: 1 - A cos(2 pi (t - t_slowest) / 1 day); its daily mean is 1."""
    return 1.0 - inputs.diurnal_amplitude * np.cos(
        2.0 * np.pi * (np.asarray(t_s) - inputs.diurnal_slowest_s) / DAY_S
    )


def nominal_seconds(inputs: SimInputs, start_s: float, end_s: float) -> float:
    """Integral of the diurnal multiplier over [start_s, end_s]: seconds of work at nominal speed."""
    if end_s <= start_s:
        return 0.0
    a = inputs.diurnal_amplitude
    if a == 0.0:
        return end_s - start_s
    w = 2.0 * math.pi / DAY_S
    t0 = inputs.diurnal_slowest_s
    return (end_s - start_s) - a / w * (math.sin(w * (end_s - t0)) - math.sin(w * (start_s - t0)))


def nominal_seconds_periodic(
    inputs: SimInputs, first_s: float, length_s: float, period_s: float, k: int
) -> float:
    """Sum of nominal_seconds over k intervals [first + i period, first + i period + length], i = 0..k-1.

    Closed form: the sines of an arithmetic progression sum to sin(k h / 2) / sin(h / 2) x sin(a + (k-1) h / 2).
    """
    if length_s <= 0.0 or k <= 0:
        return 0.0
    a = inputs.diurnal_amplitude
    if a == 0.0:
        return k * length_s
    w = 2.0 * math.pi / DAY_S
    h = w * period_s
    half = math.sin(h / 2.0)

    def sines(phase: float) -> float:
        if abs(half) < 1e-12:
            return k * math.sin(phase)
        return math.sin(k * h / 2.0) / half * math.sin(phase + (k - 1) * h / 2.0)

    t0 = inputs.diurnal_slowest_s
    return k * length_s - a / w * (sines(w * (first_s + length_s - t0)) - sines(w * (first_s - t0)))


def time_for_nominal_s(inputs: SimInputs, start_s: float, work_s: float) -> float:
    """The time t at which nominal_seconds(start_s, t) reaches work_s (Newton, bracketed; exact to ~1 ns)."""
    if work_s <= 0.0:
        return start_s
    a = inputs.diurnal_amplitude
    if a == 0.0:
        return start_s + work_s
    lo, hi = start_s + work_s / (1.0 + a), start_s + work_s / (1.0 - a)
    t = start_s + work_s
    for _ in range(60):
        f = nominal_seconds(inputs, start_s, t) - work_s
        if abs(f) < 1e-9:
            break
        if f > 0:
            hi = min(hi, t)
        else:
            lo = max(lo, t)
        t -= f / (1.0 - a * math.cos(2.0 * math.pi * (t - inputs.diurnal_slowest_s) / DAY_S))
        if not lo <= t <= hi:
            t = 0.5 * (lo + hi)
    return t

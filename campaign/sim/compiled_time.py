"""The compiled kernel's time arithmetic: the diurnal throughput integral (and its sum over periodic cycles and
its inverse) and the ramp limit's delay, campaign/sim/simulator.py's `nominal_seconds`, `nominal_seconds_periodic`,
`time_for_nominal_s` and campaign/sim/power.py's `ramp_delay_s` compiled with Numba (tests hold them equal).
"""

from __future__ import annotations

import math

from numba import njit

DAY_S = 86_400.0


@njit(cache=True, nogil=True, _nrt=False)
def _nominal(a, t0, start, end):
    if end <= start:
        return 0.0
    if a == 0.0:
        return end - start
    w = 2.0 * math.pi / DAY_S
    return (end - start) - a / w * (math.sin(w * (end - t0)) - math.sin(w * (start - t0)))


@njit(cache=True, nogil=True, _nrt=False)
def _sines(k, h, half, phase):
    if abs(half) < 1e-12:
        return k * math.sin(phase)
    return math.sin(k * h / 2.0) / half * math.sin(phase + (k - 1) * h / 2.0)


@njit(cache=True, nogil=True, _nrt=False)
def _nominal_periodic(a, t0, first, length, period, k):
    if length <= 0.0 or k <= 0:
        return 0.0
    if a == 0.0:
        return k * length
    w = 2.0 * math.pi / DAY_S
    h = w * period
    half = math.sin(h / 2.0)
    return k * length - a / w * (
        _sines(k, h, half, w * (first + length - t0)) - _sines(k, h, half, w * (first - t0))
    )


@njit(cache=True, nogil=True, _nrt=False)
def _time_for_nominal(a, t0, start, work):
    if work <= 0.0:
        return start
    if a == 0.0:
        return start + work
    lo, hi = start + work / (1.0 + a), start + work / (1.0 - a)
    t = start + work
    for _ in range(60):
        f = _nominal(a, t0, start, t) - work
        if abs(f) < 1e-9:
            break
        if f > 0:
            hi = min(hi, t)
        else:
            lo = max(lo, t)
        t -= f / (1.0 - a * math.cos(2.0 * math.pi * (t - t0) / DAY_S))
        if not lo <= t <= hi:
            t = 0.5 * (lo + hi)
    return t


@njit(cache=True, nogil=True, _nrt=False)
def _ramp_delay(rise, ramp):
    if ramp <= 0.0 or rise <= 0.0:  # ramp <= 0 encodes "no ramp limit"
        return 0.0
    return rise / (2.0 * ramp)

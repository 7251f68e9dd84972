"""The facility power curve compiled: coalescing a step function, the ramp limit and the 1-s statistics from the
breakpoints (campaign/sim/power.py's `_coalesce`, `rate_limited_curve` and `power_stats_from_curve`; tests hold them
equal). Only arrays in and out: none calls another module's kernel.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

RAMP_HEADROOM = 1e-8  # campaign.sim.power.RAMP_HEADROOM (a test holds them equal)


@njit(cache=True, nogil=True)
def coalesce(t, mw):
    """power._coalesce: the last level at each time, levels equal to the one before dropped."""
    n = t.size
    keep_t = np.empty(n)
    keep_mw = np.empty(n)
    m = 0
    for i in range(n):
        if i + 1 < n and t[i + 1] == t[i]:
            continue
        if m > 0 and keep_mw[m - 1] == mw[i]:
            continue
        keep_t[m] = t[i]
        keep_mw[m] = mw[i]
        m += 1
    return keep_t[:m].copy(), keep_mw[:m].copy()


@njit(cache=True, nogil=True)
def rate_limited(t, mw, end_s, ramp, start_mw):
    """power.rate_limited_curve on a coalesced step function: (times, levels, slopes); `ramp` is the limit, held
    with power.RAMP_HEADROOM as there."""
    ramp = ramp * (1.0 - RAMP_HEADROOM)
    n = t.size
    out_t = np.empty(2 * n)
    out_mw = np.empty(2 * n)
    out_slope = np.empty(2 * n)
    m = 0
    y = start_mw
    for i in range(n):
        a = t[i]
        b = t[i + 1] if i + 1 < n else end_s
        level = mw[i]
        if b <= a:
            continue
        if y == level:
            out_t[m], out_mw[m], out_slope[m] = a, y, 0.0
            m += 1
            continue
        slope = math.copysign(ramp, level - y)
        reach_s = abs(level - y) / ramp
        out_t[m], out_mw[m], out_slope[m] = a, y, slope
        m += 1
        if a + reach_s < b:
            out_t[m], out_mw[m], out_slope[m] = a + reach_s, level, 0.0
            m += 1
            y = level
        else:
            y += slope * (b - a)
    return out_t[:m].copy(), out_mw[:m].copy(), out_slope[:m].copy()


@njit(cache=True, nogil=True, _nrt=False)
def _second_value(t, mw, slope, end_s, lo, hi, k):
    """Mean MW over [lo, hi], segment k holding lo: the level at the midpoint inside one segment, else the
    pieces' integrals (stable however short the interval)."""
    n = t.size
    if k + 1 >= n or t[k + 1] >= hi:
        return mw[k] + slope[k] * ((lo - t[k]) + 0.5 * (hi - lo))
    total = 0.0
    a = lo
    j = k
    while a < hi:
        b = min(hi, t[j + 1]) if j + 1 < n else hi
        if b > a:
            total += (b - a) * (mw[j] + slope[j] * ((a - t[j]) + 0.5 * (b - a)))
        a = b
        j += 1
    return total / (hi - lo)


@njit(cache=True, nogil=True, _nrt=False)
def curve_stats(t, mw, slope, end_s):
    """power.power_stats_from_curve: (peak, min, largest 1-s change, energy MWh) of the 1-s series, from the
    seconds next to each breakpoint (their extremes and steps are there) and the sloped segments."""
    n_seg = t.size
    energy = 0.0
    for i in range(n_seg):
        length = (t[i + 1] if i + 1 < n_seg else end_s) - t[i]
        energy += mw[i] * length + 0.5 * slope[i] * length**2
    n = math.ceil(end_s)
    peak, low, ramp = -np.inf, np.inf, 0.0
    last_c = -2
    last_v = 0.0
    k = 0  # segment holding the candidate second's start
    for p in range(n_seg + 1):
        point = t[p] if p < n_seg else end_s
        base = math.floor(point)
        for c in range(base - 1, base + 2):
            if c <= last_c or c < 0 or c >= n:
                continue
            lo = float(c)
            hi = min(lo + 1.0, end_s)
            while k + 1 < n_seg and t[k + 1] <= lo:
                k += 1
            v = _second_value(t, mw, slope, end_s, lo, hi, k)
            peak = max(peak, v)
            low = min(low, v)
            if c == last_c + 1:
                ramp = max(ramp, abs(v - last_v))
            last_c, last_v = c, v
    for i in range(n_seg):
        if slope[i] != 0.0:
            end = t[i + 1] if i + 1 < n_seg else end_s
            if math.floor(end) - math.ceil(t[i]) >= 2.0:
                ramp = max(ramp, abs(slope[i]))
    return peak, low, ramp, energy / 3600.0

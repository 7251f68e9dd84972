"""Facility power from per-phase GPU levels, with an optional GPU power floor and a facility ramp limit.

A GPU draws a level set by what the job is doing (training, blocking checkpoint, idle); a node adds its
fixed overhead; a failed node in repair draws nothing; facility power is IT power x PUE. The simulator hands
over a step function (a level per state change); a ramp limit turns it into a piecewise-linear curve; the
1-second series and any coarser samples are exact interval means of that curve.
Source: Choukse et al. 2025, "Power Stabilization for AI Training Datacenters" (arXiv 2508.14318): compute
0.83-0.92 and troughs 0.24-0.33 of the normalising power (taken here as TDP); NVML power-smoothing controls
(floor as % of TDP, ramp limits); Llama 3 §3.3.4: swings of "tens of megawatts" at job start and stop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from campaign.sim.inputs import SimInputs

# GPU power while computing (GEMMs, attention), fraction of TDP: Choukse et al. 2025, 0.83-0.92.
COMPUTE_POWER_FRACTION = 0.9
# GPU power while waiting on communication or in the pipeline bubble, fraction of TDP: troughs 0.24-0.33.
COMM_POWER_FRACTION = 0.3
# Within a step the two phases alternate faster than 1 s matters here (their trough period ~17 s, depth
# ~2.3 s): the 1-s series uses the comm_fraction-weighted mean of the two levels while training.
# A blocking checkpoint leaves the GPUs waiting on host and storage I/O with no kernels running: we take the
# idle level (an assumption; no published trace of a checkpoint). Detection, restart, waiting for a spare,
# planned maintenance and a finished job are idle too; a node in repair is down (0 W, overhead included).

MW = 1e6
# A ramp limit is held with this relative headroom: the curve ramps at limit x (1 - RAMP_HEADROOM). Float times
# carry up to half an ulp (about 1e-9 s at day 54, 2e-9 s at day 366), so a corner of the curve sits up to that far
# from where the exact ramp would reach its level; at the exact limit a 1-s change could then read a hair over it
# (1.0000000298 MW/s against 1.0 once). 1e-8 of the limit covers every window up to 366 days and is far below any
# meter's resolution.
RAMP_HEADROOM = 1e-8


@dataclass(frozen=True)
class PowerLevels:
    """Per-GPU draw in each job phase (W) and what turns GPU watts into facility megawatts."""

    running_gpu_w: float
    checkpoint_gpu_w: float
    idle_gpu_w: float
    gpus_per_node: int
    node_overhead_w: float
    pue: float

    def facility_mw(self, job_nodes_up: int, job_gpu_w: float, idle_nodes: int) -> float:
        """Facility MW with `job_nodes_up` nodes at `job_gpu_w` per GPU and `idle_nodes` nodes idle."""
        g = self.gpus_per_node
        it_w = job_nodes_up * (g * job_gpu_w + self.node_overhead_w)
        it_w += idle_nodes * (g * self.idle_gpu_w + self.node_overhead_w)
        return it_w * self.pue / MW


def power_levels(inputs: SimInputs) -> PowerLevels:
    """Per-phase GPU levels for these inputs; a floor lifts training and checkpoint levels to floor x TDP.

    The floor acts while the job is up (its dips: communication troughs and checkpoints), not through long
    stops (restart, waiting, maintenance), where the ramp limit governs the fall instead.
    """
    tdp = inputs.gpu_tdp_w
    floor_w = (inputs.floor_fraction or 0.0) * tdp
    compute_w = max(COMPUTE_POWER_FRACTION * tdp, floor_w)
    comm_w = max(COMM_POWER_FRACTION * tdp, floor_w)
    running_w = (1.0 - inputs.comm_fraction) * compute_w + inputs.comm_fraction * comm_w
    return PowerLevels(
        running_gpu_w=running_w,
        checkpoint_gpu_w=max(inputs.gpu_idle_w, floor_w),
        idle_gpu_w=inputs.gpu_idle_w,
        gpus_per_node=inputs.gpus_per_node,
        node_overhead_w=inputs.node_overhead_w,
        pue=inputs.pue,
    )


def ramp_delay_s(rise_mw: float, ramp_mw_per_s: float | None) -> float:
    """Productive seconds lost when the facility ramp limit slows a rise of `rise_mw` into training.

    Model: during the ramp (rise / limit seconds) the job gets power linearly from its old level to its
    training level and runs at the same fraction of full speed, so it loses half the ramp's duration.
    """
    if ramp_mw_per_s is None or rise_mw <= 0.0:
        return 0.0
    return rise_mw / (2.0 * ramp_mw_per_s)


@dataclass(frozen=True, eq=False)
class PowerCurve:
    """A piecewise-linear power curve: segment k starts at t_s[k] at mw[k] and changes at slope[k] MW/s."""

    t_s: np.ndarray
    mw: np.ndarray
    slope: np.ndarray
    end_s: float
    cum_mws: np.ndarray = field(init=False, repr=False)  # energy up to each segment start, MW-seconds

    def __post_init__(self) -> None:
        lengths = np.diff(np.append(self.t_s, self.end_s))
        energy = self.mw * lengths + 0.5 * self.slope * lengths**2
        object.__setattr__(self, "cum_mws", np.concatenate(([0.0], np.cumsum(energy))))

    def integral_mws(self, t_s: np.ndarray) -> np.ndarray:
        """Energy from 0 to each time, MW-seconds (times within [0, end_s])."""
        k = np.searchsorted(self.t_s, t_s, side="right") - 1
        dt = t_s - self.t_s[k]
        return self.cum_mws[k] + self.mw[k] * dt + 0.5 * self.slope[k] * dt * dt

    def means_mw(self, edges_s: np.ndarray) -> np.ndarray:
        """Mean power over each interval between consecutive edges."""
        return np.diff(self.integral_mws(edges_s)) / np.diff(edges_s)

    @property
    def energy_mwh(self) -> float:
        return float(self.cum_mws[-1]) / 3600.0


def step_curve(t_s: np.ndarray, mw: np.ndarray, end_s: float) -> PowerCurve:
    """A step function (level mw[k] from t_s[k]) as a PowerCurve; later levels at the same time win."""
    t_s, mw = _coalesce(np.asarray(t_s, dtype=float), np.asarray(mw, dtype=float))
    return PowerCurve(t_s, mw, np.zeros_like(mw), end_s)


def rate_limited_curve(
    t_s: np.ndarray, mw: np.ndarray, end_s: float, ramp_mw_per_s: float, start_mw: float
) -> PowerCurve:
    """Follow the step function at no more than `ramp_mw_per_s`, starting from `start_mw` at t = 0.

    A fall is held up too (GPUs burn power on filler work while it lasts): this costs energy, not speed. The curve
    ramps at the limit less RAMP_HEADROOM, so every 1-s change of its series is at most the limit, exactly.
    """
    t_s, mw = _coalesce(np.asarray(t_s, dtype=float), np.asarray(mw, dtype=float))
    ramp_mw_per_s = held_ramp(ramp_mw_per_s)
    ends = np.append(t_s[1:], end_s)
    out_t: list[float] = []
    out_mw: list[float] = []
    out_slope: list[float] = []
    y = float(start_mw)
    for a, b, level in zip(t_s.tolist(), ends.tolist(), mw.tolist(), strict=False):
        if b <= a:
            continue
        if y == level:
            out_t.append(a)
            out_mw.append(y)
            out_slope.append(0.0)
            continue
        slope = math.copysign(ramp_mw_per_s, level - y)
        reach_s = abs(level - y) / ramp_mw_per_s
        out_t.append(a)
        out_mw.append(y)
        out_slope.append(slope)
        if a + reach_s < b:
            out_t.append(a + reach_s)
            out_mw.append(level)
            out_slope.append(0.0)
            y = level
        else:
            y += slope * (b - a)
    return PowerCurve(np.array(out_t), np.array(out_mw), np.array(out_slope), end_s)


def held_ramp(ramp_mw_per_s: float) -> float:
    """The slope a ramp-limited curve uses for a limit: the limit less RAMP_HEADROOM (see its comment)."""
    return ramp_mw_per_s * (1.0 - RAMP_HEADROOM)


def _coalesce(t_s: np.ndarray, mw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep the last level at each time and drop levels equal to the one before."""
    if t_s.size == 0 or t_s[0] != 0.0:
        raise ValueError("a power step function must start at t = 0")
    last_at_time = np.append(t_s[1:] != t_s[:-1], True)
    t_s, mw = t_s[last_at_time], mw[last_at_time]
    changed = np.append(True, mw[1:] != mw[:-1])
    return t_s[changed], mw[changed]


def one_second_series(curve: PowerCurve) -> np.ndarray:
    """Mean MW over each second of the window (the last sample covers a partial second if need be).

    Edges are the integers, so the segment holding each edge comes from counting (np.repeat), not from a
    binary search: 54 days (4.7 million seconds) take a few tens of milliseconds.
    """
    n = math.ceil(curve.end_s)
    # Integer edges in segment k: ceil(t[k+1]) - ceil(t[k]); the final edge (end_s) belongs to the last one.
    first_edge = np.minimum(np.ceil(curve.t_s), n).astype(np.int64)
    counts = np.diff(np.append(first_edge, n))
    if not np.any(curve.slope):
        # A step function: each second takes the level at its start, except the seconds a step falls inside.
        series = np.repeat(curve.mw, counts)
    else:
        # Each second inside one segment is the segment's level at the second's midpoint, taken from the segment's
        # own start (a difference of cumulative energies would carry their rounding: 3e-8 MW over 54 days).
        k = np.repeat(np.arange(curve.t_s.size), counts)
        seconds = np.arange(n, dtype=float)
        series = curve.mw[k] + curve.slope[k] * ((seconds - curve.t_s[k]) + 0.5)
    # The seconds a breakpoint falls inside: the sum of their pieces, each from its own segment.
    inside = curve.t_s[(curve.t_s != np.floor(curve.t_s)) & (curve.t_s < curve.end_s)]
    fix = np.unique(np.floor(inside)).astype(np.int64)
    if fix.size:
        series[fix] = _seconds_from_pieces(curve, fix)
    _fix_partial_last_second(curve, series)
    return series


def _seconds_from_pieces(curve: PowerCurve, seconds: np.ndarray) -> np.ndarray:
    """The mean MW over each of these whole seconds (sorted, unique), summed from the curve's pieces inside each,
    every piece evaluated from its own segment's start (no cumulative energies: exact to the levels' rounding)."""
    lo = seconds.astype(float)
    hi = np.minimum(lo + 1.0, curve.end_s)
    inner = curve.t_s[(curve.t_s > lo[0]) & (curve.t_s < hi[-1])]
    owner = np.searchsorted(lo, inner, side="right") - 1
    inner = inner[(owner >= 0) & (inner < hi[np.maximum(owner, 0)])]
    points = np.unique(np.concatenate((lo, hi, inner)))
    a, b = points[:-1], points[1:]
    second = np.searchsorted(lo, a, side="right") - 1
    keep = (second >= 0) & (b <= hi[np.maximum(second, 0)])
    a, b, second = a[keep], b[keep], second[keep]
    k = np.searchsorted(curve.t_s, a, side="right") - 1
    length = b - a
    energy = length * (curve.mw[k] + curve.slope[k] * ((a - curve.t_s[k]) + 0.5 * length))
    return np.bincount(second, weights=energy, minlength=seconds.size) / (hi - lo)


def interval_mean_mw(curve: PowerCurve, lo: float, hi: float) -> float:
    """Mean power over [lo, hi] from the pieces of the curve inside it (no difference of cumulative energies).

    Stable however short the interval: a window of 17,280.000000000004 s ends with a 4e-12 s second, whose mean
    from cum_mws differences (~325 MWs, ulp 6e-14) would be noise (found by the fast-path property test).
    """
    k = max(int(np.searchsorted(curve.t_s, lo, side="right")) - 1, 0)
    total = 0.0
    a = lo
    while a < hi:
        b = min(hi, float(curve.t_s[k + 1])) if k + 1 < curve.t_s.size else hi
        if b > a:
            total += (b - a) * (
                float(curve.mw[k]) + float(curve.slope[k]) * ((a - float(curve.t_s[k])) + 0.5 * (b - a))
            )
        a = b
        k += 1
    return total / (hi - lo)


def _fix_partial_last_second(curve: PowerCurve, series: np.ndarray) -> None:
    """Recompute a partial last second (the window does not end on a whole second) from its own pieces."""
    n = series.size
    if n and curve.end_s < n:
        series[-1] = interval_mean_mw(curve, float(n - 1), curve.end_s)


def sampled_power(curve: PowerCurve, sample_s: float) -> pd.DataFrame:
    """Mean facility MW over each `sample_s` interval from 0 (t_s = interval start), exact."""
    edges = np.arange(0.0, curve.end_s, sample_s)
    edges = np.append(edges, curve.end_s)
    return pd.DataFrame({"t_s": edges[:-1], "power_mw": curve.means_mw(edges)})


def power_stats(series_mw: np.ndarray, curve: PowerCurve) -> dict:
    """Peak, mean, min and largest second-to-second change of the 1-s series, and the energy."""
    steps = np.diff(series_mw)
    ramp = max(float(steps.max()), -float(steps.min())) if steps.size else 0.0
    return {
        "peak": float(series_mw.max()),
        "mean": curve.energy_mwh * 3600.0 / curve.end_s,
        "min": float(series_mw.min()),
        "max_ramp_mw_per_s": ramp,
        "energy_mwh": curve.energy_mwh,
    }


# Breakpoints handled at once by power_stats_from_curve: bounds its scratch memory whatever the window length.
STATS_CHUNK = 16_384


def power_stats_from_curve(curve: PowerCurve, chunk: int = STATS_CHUNK) -> dict:
    """The same figures as `power_stats(one_second_series(curve), curve)`, without building the 1-s series.

    The 1-s series only changes near a breakpoint: a second that holds none lies inside one segment, where it
    equals the segment's level (flat) or moves by exactly its slope per second (ramp). So the series' extremes
    are among the seconds next to a breakpoint (the one holding it and its two neighbours: the first and last
    whole seconds of every segment), and a second-to-second change is either between two such seconds or a
    segment's slope. Breakpoints are taken `chunk` at a time: scratch memory is bounded, never per second.
    """
    n = math.ceil(curve.end_s)
    if n <= 0:
        raise ValueError("a power curve needs a positive length")
    points = np.append(curve.t_s, curve.end_s)
    peak, low, ramp = -math.inf, math.inf, 0.0
    # The last second of the previous chunk and its mean, to pair across the seam.
    prev: tuple[Any, Any] | None = None
    for a in range(0, points.size, chunk):
        cand, values = _second_means(curve, points[a : a + chunk], n)
        if cand.size == 0:
            continue
        peak, low = max(peak, float(values.max())), min(low, float(values.min()))
        if prev is not None:
            cand, values = np.append(prev[0], cand), np.append(prev[1], values)
        adjacent = np.diff(cand) == 1
        steps = np.diff(values)[adjacent]
        if steps.size:
            ramp = max(ramp, float(np.abs(steps).max()))
        prev = (cand[-1], values[-1])
    if np.any(curve.slope):
        # Two whole seconds inside one sloped segment differ by exactly its slope.
        ends = np.append(curve.t_s[1:], curve.end_s)
        whole = np.floor(ends) - np.ceil(curve.t_s) >= 2.0
        sloped = np.abs(curve.slope[whole & (curve.slope != 0)])
        if sloped.size:
            ramp = max(ramp, float(sloped.max()))
    return {
        "peak": peak,
        "mean": curve.energy_mwh * 3600.0 / curve.end_s,
        "min": low,
        "max_ramp_mw_per_s": ramp,
        "energy_mwh": curve.energy_mwh,
    }


def _second_means(curve: PowerCurve, points: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The seconds next to these breakpoints (sorted, unique, inside [0, n)) and the 1-s mean over each."""
    base = np.floor(points).astype(np.int64)
    cand = np.sort(
        np.column_stack((base - 1, base, base + 1)).ravel(), kind="stable"
    )  # nearly sorted already
    cand = cand[np.append(True, cand[1:] != cand[:-1]) & (cand >= 0) & (cand < n)]
    lo = cand.astype(float)
    hi = np.minimum(lo + 1.0, curve.end_s)
    k_lo = np.searchsorted(curve.t_s, lo, side="right") - 1
    # A second inside one segment is its level at the midpoint (exact, and stable for a tiny last second);
    # a second holding a breakpoint is the sum of its pieces, each from its own segment's start.
    values = curve.mw[k_lo] + curve.slope[k_lo] * ((lo - curve.t_s[k_lo]) + 0.5 * (hi - lo))
    holds = np.searchsorted(curve.t_s, hi, side="left") - 1 > k_lo  # a breakpoint strictly inside (lo, hi)
    if np.any(holds):
        values[holds] = _seconds_from_pieces(curve, cand[holds])
    if cand.size and cand[-1] == n - 1 and curve.end_s < n:  # a partial last second: from its own pieces
        values[-1] = interval_mean_mw(curve, float(n - 1), curve.end_s)
    return cand, values

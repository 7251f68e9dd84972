"""Exact renewal calculations of ETTR for one failure stream, the closed forms the simulator is checked against.

Setting: failures arrive as a Poisson process of rate lambda in wall time (whatever the job is doing); the job
trains in segments of `interval_s`, each closed by a blocking write of `write_s` that commits it; a failure
loses the open segment; after a failure the job is down until `down_s` (detection + restart) pass with no
further failure (a failure while down starts the recovery again). The process regenerates at every segment
start, so a segment of length c (training + write) takes E[T] = (e^(lambda c) - 1) e^(lambda D) / lambda
(renewal-reward; the expected down period is (e^(lambda D) - 1) / lambda). The long-run ratio is
lambda tau e^(-lambda D) / (e^(lambda (tau + delta)) - 1), Daly's expected wall time inverted.
Source: Daly (2006), Future Generation Computer Systems 22(3):303-312, eq. for T_w; Ross, "Introduction to
Probability Models", renewal-reward theorem.
"""

from __future__ import annotations

import math


def segment_time_s(length_s: float, rate_per_s: float, down_s: float) -> float:
    """Expected wall seconds to get one segment of `length_s` (training + write) through without a failure."""
    if rate_per_s <= 0.0:
        return length_s
    return math.expm1(rate_per_s * length_s) * math.exp(rate_per_s * down_s) / rate_per_s


def long_run_ettr(interval_s: float, write_s: float, rate_per_s: float, down_s: float) -> float:
    """ETTR of a job that never finishes, over a long window (the renewal-reward limit)."""
    return interval_s / segment_time_s(interval_s + write_s, rate_per_s, down_s)


def finishing_wall_s(
    work_s: float, interval_s: float, write_s: float, rate_per_s: float, down_s: float
) -> float:
    """Expected wall seconds to train `work_s` productive seconds and write the final checkpoint."""
    full = math.floor(work_s / interval_s)
    last = work_s - full * interval_s
    if last <= 1e-9 * interval_s:  # the target falls on a checkpoint: no short last segment
        last = 0.0
    total = full * segment_time_s(interval_s + write_s, rate_per_s, down_s)
    if last > 0.0:
        total += segment_time_s(last + write_s, rate_per_s, down_s)
    return total


def finishing_ettr(
    work_s: float, interval_s: float, write_s: float, rate_per_s: float, down_s: float
) -> float:
    """work / E[wall] for a job that finishes: the ETTR it reports (to first order in the wall time's spread)."""
    return work_s / finishing_wall_s(work_s, interval_s, write_s, rate_per_s, down_s)

"""Small statistics the analysis needs: the central Poisson interval of a count, and Daly's checkpoint cost.

Source: the Poisson distribution (exact quantiles by summing its probability mass); Daly (2006), "A higher order
estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3), for the expected wall time per unit of
work at a checkpoint interval (campaign.plan.checkpointing holds the formulas; this module only applies them).
"""

from __future__ import annotations

import math

from campaign.plan.checkpointing import daly_expected_wall_s, daly_interval_s


def poisson_interval(mean: float, coverage: float = 0.95) -> tuple[int, int]:
    """The central `coverage` interval [lo, hi] of a Poisson count with this mean: P(X < lo) <= a/2, P(X > hi) <= a/2.

    Exact: the probability mass is summed term by term (in log space, so a mean of thousands is fine).
    """
    if not (mean >= 0 and math.isfinite(mean)):
        raise ValueError(f"a Poisson mean must be finite and >= 0, got {mean!r}")
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), got {coverage!r}")
    if mean == 0:
        return 0, 0
    tail = (1.0 - coverage) / 2.0
    cdf, k, lo = 0.0, 0, None
    log_mean = math.log(mean)
    while True:
        cdf += math.exp(k * log_mean - mean - math.lgamma(k + 1))
        if lo is None and cdf > tail:
            lo = k
        if cdf >= 1.0 - tail:
            return lo if lo is not None else k, k
        k += 1


def checkpoint_overhead(interval_s: float, write_s: float, restart_s: float, mtbf_s: float) -> float:
    """Expected wall seconds per second of work at this interval (Daly), >= 1."""
    return daly_expected_wall_s(1.0, interval_s, write_s, restart_s, mtbf_s)


def optimal_interval_s(write_s: float, mtbf_s: float) -> float:
    """Daly's optimum for the MTBF the window showed."""
    return daly_interval_s(write_s, mtbf_s)

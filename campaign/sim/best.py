"""A sweep's best point, only when it is better beyond the replicas' noise; else the points it is tied with.

Every point of a sweep runs the same replicas (common random numbers: replica r is one history at every point),
so two points are compared replica by replica. For a figure x, the paired differences d_r = x_r(a) - x_r(b) have
a mean and a standard error se = sd(d) / sqrt(n); point a beats point b when mean(d) > NOISE_Z x se (and mean(d)
> 0, so identical points are always tied). For "reached the target inside the window" (0 or 1 per replica) this
is the paired test of two proportions on the discordant replicas (McNemar's, with its variance estimated from
the same replicas), so one replica in 1,000 is never a winner.

The ranking reads the figures in order: P(target in the window), then mean ETTR, then cost (lower is better).
At each figure the leader (highest mean among the points still in contention) keeps in contention every point
it does not beat; a best is the leader once it is alone. When the figures run out with several points still in
contention, no point is best: they are tied, and the sweep lists their values.
Source: paired comparison with common random numbers (Law, "Simulation Modeling and Analysis", 5th ed., §10.2,
the paired-t confidence interval); McNemar (1947), Psychometrika 12(2):153-157.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from campaign.sim.summary import ReplicaSummary

# Standard errors a paired mean difference must exceed to count (two-sided 95% under the normal approximation).
NOISE_Z = 1.96
# The figures a sweep ranks by, in order: (row key, label, whether higher is better).
RANKING = (
    ("p_target_in_window", "P(target in the window)", True),
    ("ettr_mean", "mean ETTR", True),
    ("cost_usd", "cost", False),
)
BEST_RULE = (
    "highest P(target reached in the window), then highest mean ETTR, then lowest cost, each only when it beats "
    f"the others by more than {NOISE_Z:g} standard errors of the replicas' paired differences; else tied"
)


@dataclass(frozen=True)
class ReplicaOutcomes:
    """One sweep point's ranked figures, replica by replica (replica order, the same replicas at every point)."""

    p_target_in_window: tuple[float, ...]  # 1.0 where the replica reached the target inside the window
    ettr_mean: tuple[float, ...]
    cost_usd: tuple[float, ...]  # compute + energy

    def figure(self, key: str) -> np.ndarray:
        return np.asarray(getattr(self, key), dtype=float)


def replica_outcomes(summaries: Sequence[ReplicaSummary], window_s: float) -> ReplicaOutcomes:
    """Each replica's ranked figures, as the sweep's row means them (campaign.calendar.window_length's rule for
    the target: reached at or before the window's end)."""
    return ReplicaOutcomes(
        p_target_in_window=tuple(
            1.0 if s.target_reached_s is not None and s.target_reached_s <= window_s else 0.0
            for s in summaries
        ),
        ettr_mean=tuple(float(s.ettr) for s in summaries),
        cost_usd=tuple(float(s.cost_usd["compute"] + s.cost_usd["energy"]) for s in summaries),
    )


@dataclass(frozen=True)
class PairedDifference:
    """mean and standard error of the replicas' paired differences a - b."""

    mean: float
    se: float
    replicas: int

    def beyond_noise(self) -> bool:
        return self.mean > 0.0 and self.mean > NOISE_Z * self.se


def paired_difference(a: np.ndarray, b: np.ndarray) -> PairedDifference:
    """The paired differences of two points' figures over the same replicas."""
    if a.shape != b.shape or a.size == 0:
        raise ValueError("paired figures need the same replicas at both points, at least one")
    d = a - b
    se = float(np.std(d, ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.inf
    return PairedDifference(float(np.mean(d)), se, int(d.size))


@dataclass(frozen=True)
class BestVerdict:
    """A sweep's verdict: the best point's index, or None with the points tied; the figure that decided."""

    best: int | None
    tied: tuple[int, ...]  # the points still in contention when no best (empty when there is one)
    decided_by: str | None  # the row key of the figure that singled out the best

    def to_json(self) -> dict[str, object]:
        return {"best": self.best, "tied": list(self.tied), "decided_by": self.decided_by}


def best_beyond_noise(outcomes: Sequence[ReplicaOutcomes]) -> BestVerdict:
    """The best point (see the module's docstring), or the points tied for it."""
    contenders = list(range(len(outcomes)))
    if len(contenders) == 1:
        return BestVerdict(0, (), None)
    for key, _, higher in RANKING:
        sign = 1.0 if higher else -1.0
        values = {i: sign * outcomes[i].figure(key) for i in contenders}
        leader = max(contenders, key=lambda i: (float(np.mean(values[i])), -i))
        contenders = [
            i
            for i in contenders
            if i == leader or not paired_difference(values[leader], values[i]).beyond_noise()
        ]
        if len(contenders) == 1:
            return BestVerdict(leader, (), key)
    return BestVerdict(None, tuple(contenders), None)


def mark_best(rows: list[dict], outcomes: Sequence[ReplicaOutcomes]) -> list[dict]:
    """The rows with `is_best` (the best beyond noise, if any) and `tied` (the points tied when there is none)."""
    if len(rows) != len(outcomes):
        raise ValueError("one ReplicaOutcomes per sweep row")
    if not rows:
        return rows
    verdict = best_beyond_noise(outcomes)
    return [dict(r, is_best=(i == verdict.best), tied=(i in verdict.tied)) for i, r in enumerate(rows)]

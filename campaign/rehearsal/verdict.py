"""The rehearsal's verdict from its curves: does the loss fall, is everything finite, does the restore match.

Pure functions over (step, value) curves. Loss drop is the mean training loss of the first tenth of the steps
minus that of the last tenth (a tenth smooths the batch-to-batch noise of a few hundred steps). A run diverges
at the first step whose loss is not finite or is above the loss it started at by more than
`DIVERGENCE_MARGIN_NATS`: a model that is worse than its random initialisation is not training. The restore
check compares the resumed run with the uninterrupted one step by step: exactly (bit-identical floats) at
tolerance 0, else within a relative tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Curve = Sequence[tuple[int, float]]

DIVERGENCE_MARGIN_NATS = 1.0


@dataclass(frozen=True)
class Difference:
    step: int
    expected: float | None  # None: the step is missing from the reference
    got: float | None  # None: the step is missing from the compared run

    def describe(self, what: str = "loss") -> str:
        if self.got is None:
            return f"step {self.step} is missing ({what} {self.expected!r} in the uninterrupted run)"
        if self.expected is None:
            return f"step {self.step} is not in the uninterrupted run ({what} {self.got!r})"
        return f"step {self.step}: {what} {self.got!r}, uninterrupted run {self.expected!r}"


def tenth_means(losses: Curve, steps: int) -> tuple[float, float]:
    """Mean loss over steps 1..steps/10 and over the last steps/10 steps (at least one step each)."""
    tenth = max(1, steps // 10)
    by_step = dict(losses)
    first = [by_step[s] for s in range(1, tenth + 1) if s in by_step]
    last = [by_step[s] for s in range(steps - tenth + 1, steps + 1) if s in by_step]

    def mean(xs):
        return sum(xs) / len(xs) if xs else math.nan

    return mean(first), mean(last)


def first_non_finite(curve: Curve) -> tuple[int, float] | None:
    for step, value in curve:
        if not math.isfinite(value):
            return step, value
    return None


def first_divergence(
    losses: Curve, margin: float = DIVERGENCE_MARGIN_NATS
) -> tuple[int, float, float] | None:
    """(step, loss, starting loss) of the first step that is not finite or exceeds the start by `margin` nats."""
    if not losses:
        return None
    start = losses[0][1]
    for step, value in losses:
        if not math.isfinite(value):
            return step, value, start
        if math.isfinite(start) and value > start + margin:
            return step, value, start
    return None


def same(expected: float, got: float, tolerance: float) -> bool:
    if tolerance == 0:
        return expected == got or (math.isnan(expected) and math.isnan(got))
    if not (math.isfinite(expected) and math.isfinite(got)):
        return expected == got or (math.isnan(expected) and math.isnan(got))
    return abs(got - expected) <= tolerance * max(abs(expected), 1e-12)


def compare_curves(
    reference: Curve, other: Curve, first_step: int, last_step: int, tolerance: float
) -> tuple[int, Difference | None]:
    """Steps compared and the first difference of `other` from `reference` over first_step..last_step.

    A step the reference has and `other` lacks is a difference; so is a value outside the tolerance.
    """
    ref = {s: v for s, v in reference if first_step <= s <= last_step}
    got = {s: v for s, v in other if first_step <= s <= last_step}
    compared = 0
    for step in sorted(set(ref) | set(got)):
        if step not in got or step not in ref:
            return compared, Difference(step, ref.get(step), got.get(step))
        if not same(ref[step], got[step], tolerance):
            return compared, Difference(step, ref[step], got[step])
        compared += 1
    return compared, None

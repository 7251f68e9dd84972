"""Faults to drive into a real run: at which steps, and of which kind (kill, hang, node loss).

Seeded: the same `execute.inject` gives the same faults. Steps are drawn without repeats from the second
checkpoint interval to the step before the last, so every fault comes after at least one checkpoint and before
the target, and a fault fires the first time the run reaches its step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INJECT_STREAM = 0x494E4A54  # "INJT": the seed's stream for injected faults, apart from every other use


@dataclass(frozen=True)
class Injection:
    step: int
    kind: str  # kill | hang | node_loss


def plan_injections(
    failures: int, seed: int, kinds: tuple[str, ...], steps: int, checkpoint_every: int
) -> list[Injection]:
    """`failures` faults at distinct seeded steps in [checkpoint_every + 1, steps - 1], kinds drawn in turn
    from a seeded permutation of `kinds` (so three faults of three kinds give one of each)."""
    if failures <= 0:
        return []
    low = min(checkpoint_every + 1, steps - 1)
    candidates = np.arange(max(low, 1), steps)
    if len(candidates) < failures:
        raise ValueError(
            f"{failures} injected faults need {failures} distinct steps between {low} and {steps - 1}"
        )
    rng = np.random.default_rng([seed, INJECT_STREAM])
    chosen = np.sort(rng.choice(candidates, size=failures, replace=False))
    order = [kinds[i] for i in rng.permutation(len(kinds))]
    return [Injection(int(s), order[i % len(order)]) for i, s in enumerate(chosen)]

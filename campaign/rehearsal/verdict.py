"""The rehearsal's verdict from its curves: does the loss fall, is everything finite, does the restore match.

Pure functions over (step, value) curves. Loss drop is the mean training loss of the first tenth of the steps
minus that of the last tenth (a tenth smooths the batch-to-batch noise of a few hundred steps). A run diverges
at the first step whose loss is not finite or is above the loss it started at by more than
`DIVERGENCE_MARGIN_NATS`: a model that is worse than its random initialisation is not training. The restore
check compares the resumed run with the uninterrupted one step by step: exactly (bit-identical floats) at
tolerance 0, else within a relative tolerance. The control check asks the same of a run on other rows, the other
way round: its curve must differ. The checkpoint folder, looked at on each checkpoint event, must hold files that
change from one event to the next.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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


LEAK_MARGIN_NATS = 0.5  # held-out loss this far below the training loss is named as a possible leak
FINGERPRINT_HASH_BYTES = (
    64 * 2**20
)  # per look at the checkpoint folder; larger files are judged by size and time


def curves_differ(reference: Curve, control: Curve, steps: int, tolerance: float) -> int | bool | None:
    """The first of steps 1..`steps` at which `control` differs from `reference` beyond `tolerance`; False if
    none does; None if either curve lacks one of those steps."""
    ref, got = dict(reference), dict(control)
    if any(s not in ref or s not in got for s in range(1, steps + 1)):
        return None
    for step in range(1, steps + 1):
        if not same(ref[step], got[step], tolerance):
            return step
    return False


def folder_fingerprint(folder: Path) -> frozenset[tuple[str, str]]:
    """(relative path, content digest) of every regular file under `folder`; the digest is a BLAKE2 hash of the
    bytes while the hashed total stays under FINGERPRINT_HASH_BYTES, else the size and modification time."""
    out = set()
    budget = FINGERPRINT_HASH_BYTES
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        try:
            if path.is_symlink() or not path.is_file():
                continue
            info = path.stat()
            if info.st_size <= budget:
                budget -= info.st_size
                digest = hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
            else:
                digest = f"{info.st_size}:{info.st_mtime_ns}"
        except OSError:  # removed while looked at (an old checkpoint being deleted)
            continue
        out.add((path.relative_to(folder).as_posix(), digest))
    return frozenset(out)


def stale_checkpoint_folder(snapshots: Sequence[tuple[int, frozenset[tuple[str, str]]]]) -> str | None:
    """What is wrong with the checkpoint folder as seen at successive checkpoint events (the step of the newest
    event seen, the folder's fingerprint), or None: it must hold files, and they must change between looks."""
    previous: tuple[int, frozenset[tuple[str, str]]] | None = None
    for step, files in snapshots:
        if not files:
            return f"the checkpoint folder was empty when the trainer reported the checkpoint of step {step}"
        if previous is not None and files == previous[1]:
            return (
                f"no file in the checkpoint folder changed between the checkpoint events of steps "
                f"{previous[0]} and {step}"
            )
        previous = (step, files)
    return None

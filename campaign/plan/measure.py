"""From a short run's metrics file to a `plan.measured` entry: step times, warm-up dropped, median and spread.

Reads a training log (campaign.plan.trainer_logs: Megatron-LM, TorchTitan, NeMo's metrics.csv or TensorBoard event
files, the rehearsal contract's JSON lines) as timed samples. The first `skip_steps` samples of the log, and of each restart inside it (the
step going back), are warm-up (compilation, allocator growth, data loader start): by default the first 10 % and at
least one. Intervals with skipped or NaN iterations are left out and named. A series that is not stationary is named, since its
median would not be the step time of a long run: drifting (the last third's median more than 5 % from the first
third's) or bimodal (two clusters of step times more than 15 % apart, the smaller holding at least a tenth of the
steps and the split explaining most of the variance).
Source: the practice of measuring a few hundred steps at small scale before booking (e.g. Llama 3 §3.3; Megatron-LM
logs the per-iteration time it reports after warm-up); the thresholds are this module's.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from campaign.errors import DataError
from campaign.plan.trainer_logs import MAX_NOTES, StepSample, TrainerLog, read_trainer_log

DRIFT_FRACTION = 0.05
BIMODAL_SEPARATION = 1.15
BIMODAL_MIN_SHARE = 0.10
BIMODAL_EXPLAINED = 0.8
MIN_STEPS = 5


@dataclass(frozen=True)
class StepTimes:
    """Per-step seconds after warm-up, in step order, and the steps they belong to."""

    steps: tuple[int, ...]
    seconds: tuple[float, ...]
    skipped: int  # warm-up samples dropped (at the start and after each restart)
    tokens_per_step: int | None = None  # the records' "tokens" when every step gives the same
    log: TrainerLog | None = None  # what was read, with its format, batch and layout
    notes: tuple[str, ...] = ()  # restarts, skipped and NaN iterations, named


@dataclass(frozen=True)
class Measurement:
    median_s: float
    p10_s: float
    p90_s: float
    n_steps: int
    skipped: int
    problems: tuple[str, ...]  # non-stationarity, named

    @property
    def spread(self) -> float:
        """(p90 - p10) / median."""
        return (self.p90_s - self.p10_s) / self.median_s

    def entry_yaml(
        self, nodes: int, layout: dict[str, int], global_batch_tokens: int, source: str, extra: str = ""
    ) -> str:
        """The `plan.measured` list item to paste under `plan:`, with the spread as a comment (`extra`: more
        `key: value` pairs, e.g. the model and stack)."""
        lay = ", ".join(f"{k}: {v}" for k, v in layout.items())
        return (
            f"  measured:\n"
            f"    # median of {self.n_steps} steps after {self.skipped} warm-up; p10 {self.p10_s:.4g} s, "
            f"p90 {self.p90_s:.4g} s (spread {self.spread:.1%})\n"
            f"    - {{nodes: {nodes}, layout: {{{lay}}}, global_batch_tokens: {global_batch_tokens}, "
            f"step_time_s: {self.median_s:.4g}, source: {json.dumps(source)}{extra}}}"
        )


def read_step_times(
    path: Path,
    skip_steps: int | None = None,
    *,
    fmt: str | None = None,
    gpus: int | None = None,
    global_batch_tokens: int | None = None,
) -> StepTimes:
    """Per-step seconds from a training log or metrics file (campaign.plan.trainer_logs), warm-up dropped at its
    start and after each restart, and the intervals with skipped or NaN iterations left out, each named."""
    log = read_trainer_log(path, fmt, gpus=gpus, global_batch_tokens=global_batch_tokens)
    notes = list(log.notes)
    kept: list[StepSample] = []
    skipped = 0
    for segment, group in itertools.groupby(log.samples, key=lambda s: s.segment):
        samples = list(group)
        skip = max(1, len(samples) // 10) if skip_steps is None else skip_steps
        skipped += min(skip, len(samples))
        for sample in samples[skip:]:
            if sample.excluded:
                notes.append(
                    f"{sample.where or f'{path}:{sample.line}'}: left out the {sample.steps} iteration{'s' if sample.steps != 1 else ''} "
                    f"to {sample.step}, which had {sample.excluded}"
                )
            else:
                kept.append(sample)
        del segment
    if len(kept) < MIN_STEPS:
        raise DataError(
            f"{len(kept)} timed samples after dropping {skipped} warm-up and "
            f"{sum(1 for s in log.samples if s.excluded)} with skipped or NaN iterations; at least {MIN_STEPS} "
            "are needed",
            where=str(path),
            fix="run more steps or lower --skip-steps",
        )
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"... and {len(notes) - MAX_NOTES} more"]
    return StepTimes(
        tuple(s.step for s in kept),
        tuple(s.seconds for s in kept),
        skipped,
        log.tokens_per_step,
        log,
        tuple(notes),
    )


def stationarity_problems(seconds: np.ndarray) -> list[str]:
    """What makes this series' median a poor step time: drift or two modes (see the module docstring)."""
    out = []
    n = len(seconds)
    third = max(1, n // 3)
    first, last = float(np.median(seconds[:third])), float(np.median(seconds[-third:]))
    if abs(last / first - 1.0) > DRIFT_FRACTION:
        out.append(
            f"drifting: the last third of the steps runs at a median {last:.4g} s against {first:.4g} s in the first "
            f"third ({last / first - 1:+.1%}); run longer until it settles, or find what changes (thermal throttling, "
            "a growing data-loader queue, memory fragmentation)"
        )
    ordered = np.sort(np.log(seconds))
    total = float(np.sum((ordered - ordered.mean()) ** 2))
    if total > 0 and n >= 2 * MIN_STEPS:
        csum, csq = np.cumsum(ordered), np.cumsum(ordered**2)
        best = None
        for k in range(1, n):
            left = csq[k - 1] - csum[k - 1] ** 2 / k
            right = (csq[-1] - csq[k - 1]) - (csum[-1] - csum[k - 1]) ** 2 / (n - k)
            if best is None or left + right < best[0]:
                best = (left + right, k)
        assert best is not None
        within, k = best
        lo, hi = math.exp(ordered[:k].mean()), math.exp(ordered[k:].mean())
        share = min(k, n - k) / n
        if (
            hi / lo > BIMODAL_SEPARATION
            and share >= BIMODAL_MIN_SHARE
            and 1 - within / total >= BIMODAL_EXPLAINED
        ):
            out.append(
                f"bimodal: {k} steps near {lo:.4g} s and {n - k} near {hi:.4g} s ({hi / lo - 1:.0%} apart); the median "
                "mixes two regimes (periodic evaluation or checkpointing inside the timed steps, a straggler node, "
                "garbage collection): time them apart or remove the cause"
            )
    return out


def measure(times: StepTimes) -> Measurement:
    """Median and spread of the step times, with what makes the series non-stationary."""
    seconds = np.array(times.seconds)
    p10, median, p90 = (float(x) for x in np.percentile(seconds, [10, 50, 90]))
    return Measurement(median, p10, p90, len(seconds), times.skipped, tuple(stationarity_problems(seconds)))


def parse_layout(text: str) -> dict[str, int]:
    """'tp=8,pp=4,dp=16' -> {tp, pp, dp, cp, vpp} (cp and vpp default to 1); a degree given twice is refused."""
    out = {"tp": 1, "pp": 1, "dp": 1, "cp": 1, "vpp": 1}
    given: set[str] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if key not in out or not value.isdigit() or not 1 <= int(value) <= 10_000_000:
            raise DataError(
                f"{part!r} is not one of tp, pp, dp, cp, vpp = a positive integer",
                where="--layout",
                fix="write it as tp=8,pp=4,dp=16 (cp and vpp default to 1)",
            )
        if key in given:
            raise DataError(
                f"{key} is given twice ({text!r})",
                where="--layout",
                fix=f"give {key} once, with the degree the run used",
            )
        given.add(key)
        out[key] = int(value)
    return out

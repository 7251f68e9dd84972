"""From a short run's metrics file to a `plan.measured` entry: step times, warm-up dropped, median and spread.

Reads the rehearsal contract's JSON lines (docs/rehearsal.md): per-step records `{"step": k, ...}` carrying either
`step_time_s` (seconds of that step) or a wall-clock `time_s` / `timestamp` (seconds; a step's time is the gap from
the previous step's, divided by the steps between them). Events and held-out records are skipped; a step seen twice
(a restart) keeps its last record. The first `skip_steps` steps are warm-up (compilation, allocator growth, data
loader start): by default the first 10 % and at least one. A series that is not stationary is named, since its
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
    skipped: int  # warm-up steps dropped
    tokens_per_step: int | None = None  # the records' "tokens" when every step gives the same


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

    def entry_yaml(self, nodes: int, layout: dict[str, int], global_batch_tokens: int, source: str) -> str:
        """The `plan.measured` list item to paste under `plan:`, with the spread as a comment."""
        lay = ", ".join(f"{k}: {v}" for k, v in layout.items())
        return (
            f"  measured:\n"
            f"    # median of {self.n_steps} steps after {self.skipped} warm-up; p10 {self.p10_s:.4g} s, "
            f"p90 {self.p90_s:.4g} s (spread {self.spread:.1%})\n"
            f"    - {{nodes: {nodes}, layout: {{{lay}}}, global_batch_tokens: {global_batch_tokens}, "
            f"step_time_s: {self.median_s:.4g}, source: {json.dumps(source)}}}"
        )


def _number(record: dict, key: str, where: str) -> float:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(
            f"{key} is {value!r}, not a finite number of seconds",
            where=where,
            fix="write one JSON object per line with numeric step_time_s or time_s",
        )
    return float(value)


def read_step_times(path: Path, skip_steps: int | None = None) -> StepTimes:
    """Per-step seconds from a metrics file (see the module docstring), warm-up dropped."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise DataError(
            f"cannot read the metrics file: {exc.strerror}",
            where=str(path),
            fix="give the trainer's metrics file",
        ) from None
    direct: dict[int, float] = {}
    clock: dict[int, float] = {}
    tokens: set[int] = set()
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{line_no}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if line_no == len(text.splitlines()) and not text.endswith("\n"):
                break  # a last write cut short by a kill
            raise DataError(
                f"not JSON ({exc.msg})", where=where, fix="one JSON object per line (the rehearsal contract)"
            ) from None
        if not isinstance(record, dict) or "event" in record or "step" not in record:
            continue
        step = record["step"]
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise DataError(f"step is {step!r}, not a step number", where=where, fix="number steps 1, 2, ...")
        if "step_time_s" in record:
            direct[step] = _number(record, "step_time_s", where)
        if isinstance(record.get("tokens"), int) and not isinstance(record["tokens"], bool):
            tokens.add(record["tokens"])
        for key in ("time_s", "timestamp"):
            if key in record:
                clock[step] = _number(record, key, where)
                break
    if direct:
        steps = sorted(direct)
        pairs = [(s, direct[s]) for s in steps]
    else:
        steps = sorted(clock)
        pairs = [(b, (clock[b] - clock[a]) / (b - a)) for a, b in itertools.pairwise(steps) if b > a]
    if not pairs:
        raise DataError(
            "no per-step step_time_s or time_s / timestamp in the file",
            where=str(path),
            fix='log {"step": k, "step_time_s": seconds} (or a wall-clock "time_s") after each step',
        )
    skip = max(1, len(pairs) // 10) if skip_steps is None else skip_steps
    kept = pairs[skip:]
    if len(kept) < MIN_STEPS:
        raise DataError(
            f"{len(kept)} steps after skipping {skip} warm-up steps; at least {MIN_STEPS} are needed",
            where=str(path),
            fix="run more steps or lower --skip-steps",
        )
    bad = [(s, t) for s, t in kept if not t > 0]
    if bad:
        raise DataError(
            f"step {bad[0][0]} took {bad[0][1]:g} s: step times must be positive (are the timestamps in order?)",
            where=str(path),
            fix="log a wall-clock time_s that grows with the step, or step_time_s per step",
        )
    per_step = next(iter(tokens)) if len(tokens) == 1 else None
    return StepTimes(tuple(s for s, _ in kept), tuple(t for _, t in kept), skip, per_step)


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
    """'tp=8,pp=4,dp=16' -> {tp, pp, dp, cp, vpp} (cp and vpp default to 1)."""
    out = {"tp": 1, "pp": 1, "dp": 1, "cp": 1, "vpp": 1}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        if key.strip() not in out or not value.strip().isdigit() or int(value) < 1:
            raise DataError(
                f"{part!r} is not one of tp, pp, dp, cp, vpp = a positive integer",
                where="--layout",
                fix="write it as tp=8,pp=4,dp=16 (cp and vpp default to 1)",
            )
        out[key.strip()] = int(value)
    return out

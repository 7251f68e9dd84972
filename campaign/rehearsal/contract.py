"""The trainer contract: the environment a trainer is started with and the JSON-lines metrics it writes.

A trainer is any command. The harness starts it in its own process group with the variables below; the trainer
reads its data from two `.npy` files (step k trains on rows (k-1) x B .. k x B - 1 of the training file, laid
out in training order by the harness), appends one JSON object per line to the metrics file, keeps its
checkpoints in its own folder and, started again with the same variables, resumes from its latest complete
checkpoint. docs/rehearsal.md is the user-facing copy of this module.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Required by the contract (docs/rehearsal.md).
ENV_TRAIN = "CAMPAIGN_REHEARSAL_TRAIN"  # .npy, uint32 [n_sequences, seq_len + 1]
ENV_HELDOUT = "CAMPAIGN_REHEARSAL_HELDOUT"  # .npy, uint32 [n_sequences, seq_len + 1]
ENV_VOCAB = "CAMPAIGN_REHEARSAL_VOCAB"  # every id in the files is below this
ENV_STEPS = "CAMPAIGN_REHEARSAL_STEPS"  # optimizer steps to run, numbered 1..steps
ENV_SEED = "CAMPAIGN_REHEARSAL_SEED"
ENV_CHECKPOINT_EVERY = "CAMPAIGN_REHEARSAL_CHECKPOINT_EVERY"
ENV_CHECKPOINT_DIR = "CAMPAIGN_REHEARSAL_CHECKPOINT_DIR"
ENV_METRICS = "CAMPAIGN_REHEARSAL_METRICS"
ENV_BATCH_SEQUENCES = "CAMPAIGN_REHEARSAL_BATCH_SEQUENCES"  # B: step k trains on rows (k-1) x B .. k x B - 1
# Also set; a team's trainer may use or ignore them.
ENV_LEARNING_RATE = "CAMPAIGN_REHEARSAL_LEARNING_RATE"  # peak learning rate
ENV_WARMUP_STEPS = "CAMPAIGN_REHEARSAL_WARMUP_STEPS"
ENV_EVAL_EVERY = "CAMPAIGN_REHEARSAL_EVAL_EVERY"  # held-out evaluation interval, steps
ENV_MODEL = "CAMPAIGN_REHEARSAL_MODEL"  # JSON: layers, hidden, heads, kv_heads, ffn_hidden
ENV_CACHE_DIR = "CAMPAIGN_REHEARSAL_CACHE_DIR"  # a folder for caches; the restart of the faulted run gets a fresh, empty one

REQUIRED_ENV = (
    ENV_TRAIN,
    ENV_HELDOUT,
    ENV_VOCAB,
    ENV_STEPS,
    ENV_SEED,
    ENV_CHECKPOINT_EVERY,
    ENV_CHECKPOINT_DIR,
    ENV_METRICS,
    ENV_BATCH_SEQUENCES,
)


# A metrics line is a few dozen bytes; anything longer is not one (and a 200,000-deep `[[[...` never reaches the
# JSON parser). Steps and token counts are bounded so that no number the trainer writes can overflow a float.
MAX_LINE_BYTES = 65_536
MAX_STEP = 10**9
MAX_TOKENS = 2**53
_MAX_INT_DIGITS = 30  # an integer literal longer than this is refused before Python converts it


@dataclass
class Metrics:
    """What one metrics file says, in file order. Steps count from 1; held-out may be evaluated at step 0."""

    losses: list[tuple[int, float]] = field(default_factory=list)  # (step, loss)
    heldout: list[tuple[int, float]] = field(default_factory=list)  # (step, heldout_loss)
    checkpoints: list[int] = field(default_factory=list)  # steps of complete checkpoints
    resumed: list[int] = field(default_factory=list)  # steps resumed from
    tokens: dict[int, int] = field(default_factory=dict)  # step -> tokens, when reported
    problems: list[str] = field(default_factory=list)  # malformed lines, as `file:line: reason`
    where: dict[tuple[str, int], str] = field(default_factory=dict)  # ("loss" | "heldout", step) -> file:line

    @property
    def last_step(self) -> int:
        return self.losses[-1][0] if self.losses else 0


class MetricsError(ValueError):
    """A metrics line that breaks the contract (not JSON, wrong keys, wrong types, numbers out of range)."""


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise MetricsError(f"a {len(text.lstrip('-'))}-digit integer is not a metrics value")
    return int(text)


def _number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetricsError(f"'{key}' must be a number, got {_short(value)}")
    try:
        return float(value)
    except OverflowError:
        raise MetricsError(f"'{key}' is {_short(value)}, beyond any float") from None


def _step(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_STEP:
        raise MetricsError(f"'step' must be an integer from 0 to {MAX_STEP:,}, got {_short(value)}")
    return value


def _tokens(value: object) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= MAX_TOKENS
        or value != int(value)
    ):
        raise MetricsError(f"'tokens' must be a whole number from 0 to 2^53, got {_short(value)}")
    return int(value)


def _time(value: object) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


@dataclass(frozen=True, slots=True)
class MetricsLine:
    """One metrics line as the contract reads it: a training step's loss, a held-out evaluation, or an event."""

    kind: str  # "loss", "heldout", "checkpoint" or "resumed"
    step: int
    value: float | None = None  # the loss, or the held-out loss
    tokens: int | None = None  # tokens the step trained, when reported
    time: float | None = None  # Unix seconds, when the line has a number there (how an outside run is timed)


def parse_metrics_record(text: str) -> MetricsLine:
    """One metrics line; raises MetricsError with the reason if it breaks the contract.

    NaN and infinity are accepted as loss values (`NaN`, `Infinity`, `1e400`, or a string "nan"/"inf"): they are
    evidence for the verdict, not a malformed line. Steps and token counts must be finite whole numbers in range.
    """
    if len(text) > MAX_LINE_BYTES:
        raise MetricsError(f"a line of {len(text):,} characters (at most {MAX_LINE_BYTES:,})")
    try:
        record = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise MetricsError(f"not JSON ({exc.msg}): {text[:120]!r}") from None
    except RecursionError:
        raise MetricsError(f"nested too deeply to be a metrics record: {text[:40]!r}") from None
    if not isinstance(record, dict):
        raise MetricsError(f"expected a JSON object, got {text[:120]!r}")
    for key in ("loss", "heldout_loss"):
        if isinstance(record.get(key), str) and record[key].strip().lower() in (
            "nan",
            "inf",
            "-inf",
            "infinity",
        ):
            record[key] = float(record[key])
    stamp = _time(record.get("time"))
    if "event" in record:
        event = record["event"]
        step = _step(record.get("step"))
        if event in ("checkpoint", "resumed"):
            return MetricsLine(event, step, time=stamp)
        raise MetricsError(f"unknown event {_short(event)} (expected 'checkpoint' or 'resumed')")
    step = _step(record.get("step"))
    if "loss" in record:
        loss = _number(record["loss"], "loss")
        tokens = _tokens(record["tokens"]) if "tokens" in record else None
        return MetricsLine("loss", step, loss, tokens, stamp)
    if "heldout_loss" in record:
        return MetricsLine("heldout", step, _number(record["heldout_loss"], "heldout_loss"), time=stamp)
    raise MetricsError(f"a step record needs 'loss' or 'heldout_loss': {text[:120]!r}")


def parse_metrics_line(text: str, line_no: int, into: Metrics, where: str = "") -> None:
    """Add one metrics line to `into`; raises MetricsError with the reason if it breaks the contract
    (`parse_metrics_record`). `where` (`file:line`) is remembered for each loss so the verdict can point at the
    line.
    """
    line = parse_metrics_record(text)
    if line.value is None:  # an event: a complete checkpoint, or a start resumed from one
        (into.checkpoints if line.kind == "checkpoint" else into.resumed).append(line.step)
        return
    at = where or f"line {line_no}"
    if line.kind == "loss":
        into.losses.append((line.step, line.value))
        into.where[("loss", line.step)] = at
        if line.tokens is not None:
            into.tokens[line.step] = line.tokens
    else:
        into.heldout.append((line.step, line.value))
        into.where[("heldout", line.step)] = at


def parse_or_record(raw: bytes, path: Path, line_no: int, into: Metrics) -> None:
    """Parse one raw line of `path`; a malformed one goes to `into.problems` as `file:line: reason`."""
    where = f"{path}:{line_no}"
    try:
        parse_metrics_line(raw.decode("utf-8", errors="replace"), line_no, into, where)
    except MetricsError as exc:
        into.problems.append(f"{where}: {exc}")


def read_metrics(path: Path, start_byte: int = 0, end_byte: int | None = None) -> Metrics:
    """Parse the metrics file from `start_byte` (a restart's first byte) to `end_byte` (default: its end).

    A final line without a newline is a write cut short by a kill and is ignored; every other malformed line
    is recorded in `problems` with its line number.
    """
    out = Metrics()
    if not path.exists():
        return out
    data = path.read_bytes()[start_byte:end_byte]
    first_line = data_line_number(path, start_byte)
    lines = data.split(b"\n")
    complete = lines[:-1]  # the piece after the last newline is empty or a cut-off write
    for offset, raw in enumerate(complete):
        if not raw.strip():
            continue
        parse_or_record(raw, path, first_line + offset, out)
    return out


def data_line_number(path: Path, byte: int) -> int:
    """The 1-based line number of `byte` in the file (for messages about a restart's lines)."""
    if byte <= 0:
        return 1
    with open(path, "rb") as handle:
        return handle.read(byte).count(b"\n") + 1


def finite(x: float) -> bool:
    return math.isfinite(x)

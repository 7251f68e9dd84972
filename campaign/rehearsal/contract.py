"""The trainer contract: the environment a trainer is started with and the JSON-lines metrics it writes.

A trainer is any command. The harness starts it in its own process group with the variables below; the trainer
reads its data from two `.npy` files, appends one JSON object per line to the metrics file, keeps its
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
# Also set; a team's trainer may use or ignore them.
ENV_LEARNING_RATE = "CAMPAIGN_REHEARSAL_LEARNING_RATE"  # peak learning rate
ENV_WARMUP_STEPS = "CAMPAIGN_REHEARSAL_WARMUP_STEPS"
ENV_BATCH_SEQUENCES = "CAMPAIGN_REHEARSAL_BATCH_SEQUENCES"  # sequences per step
ENV_EVAL_EVERY = "CAMPAIGN_REHEARSAL_EVAL_EVERY"  # held-out evaluation interval, steps
ENV_MODEL = "CAMPAIGN_REHEARSAL_MODEL"  # JSON: layers, hidden, heads, kv_heads, ffn_hidden
ENV_CACHE_DIR = "CAMPAIGN_REHEARSAL_CACHE_DIR"  # a folder shared by every start, for caches

REQUIRED_ENV = (
    ENV_TRAIN,
    ENV_HELDOUT,
    ENV_VOCAB,
    ENV_STEPS,
    ENV_SEED,
    ENV_CHECKPOINT_EVERY,
    ENV_CHECKPOINT_DIR,
    ENV_METRICS,
)


@dataclass
class Metrics:
    """What one metrics file says, in file order. Steps count from 1; held-out may be evaluated at step 0."""

    losses: list[tuple[int, float]] = field(default_factory=list)  # (step, loss)
    heldout: list[tuple[int, float]] = field(default_factory=list)  # (step, heldout_loss)
    checkpoints: list[int] = field(default_factory=list)  # steps of complete checkpoints
    resumed: list[int] = field(default_factory=list)  # steps resumed from
    tokens: dict[int, int] = field(default_factory=dict)  # step -> tokens, when reported
    problems: list[str] = field(default_factory=list)  # malformed lines, with their number

    @property
    def last_step(self) -> int:
        return self.losses[-1][0] if self.losses else 0


class MetricsError(ValueError):
    """A metrics line that breaks the contract (not JSON, wrong keys, wrong types)."""


def _number(record: dict[str, Any], key: str, line_no: int) -> float:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetricsError(f"line {line_no}: '{key}' must be a number, got {value!r}")
    return float(value)


def _step(record: dict[str, Any], line_no: int) -> int:
    value = record.get("step")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MetricsError(f"line {line_no}: 'step' must be a non-negative integer, got {value!r}")
    return value


def parse_metrics_line(text: str, line_no: int, into: Metrics) -> None:
    """Add one metrics line to `into`; raises MetricsError naming the line if it breaks the contract.

    NaN and infinity are accepted as values (`NaN`, `Infinity`, or a string "nan"/"inf"): they are evidence
    for the verdict, not a malformed line.
    """
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MetricsError(f"line {line_no}: not JSON ({exc.msg}): {text[:120]!r}") from None
    if not isinstance(record, dict):
        raise MetricsError(f"line {line_no}: expected a JSON object, got {text[:120]!r}")
    for key in ("loss", "heldout_loss"):
        if isinstance(record.get(key), str) and record[key].strip().lower() in (
            "nan",
            "inf",
            "-inf",
            "infinity",
        ):
            record[key] = float(record[key])
    if "event" in record:
        event = record["event"]
        step = _step(record, line_no)
        if event == "checkpoint":
            into.checkpoints.append(step)
        elif event == "resumed":
            into.resumed.append(step)
        else:
            raise MetricsError(
                f"line {line_no}: unknown event {event!r} (expected 'checkpoint' or 'resumed')"
            )
        return
    step = _step(record, line_no)
    if "loss" in record:
        into.losses.append((step, _number(record, "loss", line_no)))
        if "tokens" in record:
            into.tokens[step] = int(_number(record, "tokens", line_no))
    elif "heldout_loss" in record:
        into.heldout.append((step, _number(record, "heldout_loss", line_no)))
    else:
        raise MetricsError(f"line {line_no}: a step record needs 'loss' or 'heldout_loss': {text[:120]!r}")


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
        line_no = first_line + offset
        try:
            parse_metrics_line(raw.decode("utf-8", errors="replace"), line_no, out)
        except MetricsError as exc:
            out.problems.append(str(exc))
    return out


def data_line_number(path: Path, byte: int) -> int:
    """The 1-based line number of `byte` in the file (for messages about a restart's lines)."""
    if byte <= 0:
        return 1
    with open(path, "rb") as handle:
        return handle.read(byte).count(b"\n") + 1


def finite(x: float) -> bool:
    return math.isfinite(x)

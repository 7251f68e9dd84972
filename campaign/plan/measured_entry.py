"""A measured run as the `plan.measured` entry a config takes: its tokens per step (from the log where it states
them, else a flag, saying which), its layout (the flag or the log's own, never two that disagree), and the checks
the config would make, made before the entry is printed, so nothing is printed that the config then refuses.
docs/plan-model.md#from-a-short-run-to-a-measurement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from campaign.config import MeasuredRunConfig, load_config
from campaign.errors import ConfigError, DataError
from campaign.plan.measure import Measurement, StepTimes, measure, read_step_times

DEFAULT_GPUS_PER_NODE = 8


@dataclass(frozen=True)
class MeasuredEntry:
    """What `campaign plan measure` prints: the measurement, and the entry when nodes and layout are known."""

    path: str
    format: str
    result: Measurement
    global_batch_tokens: int
    tokens_source: str
    nodes: int | None
    layout: dict[str, int] | None
    layout_source: str
    notes: tuple[str, ...]
    model: str | None = None  # the config's model.name and plan.stack, when --config names them
    stack: str | None = None

    @property
    def source(self) -> str:
        return f"{Path(self.path).name}: median of {self.result.n_steps} steps"

    def entry(self) -> dict[str, Any] | None:
        if self.nodes is None or self.layout is None:
            return None
        return {
            "nodes": self.nodes,
            "layout": self.layout,
            "global_batch_tokens": self.global_batch_tokens,
            "step_time_s": self.result.median_s,
            "source": self.source,
            **({"model": self.model} if self.model else {}),
            **({"stack": self.stack} if self.stack else {}),
        }

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "format": self.format,
            "step_time_s": r.median_s,
            "global_batch_tokens": self.global_batch_tokens,
            "tokens_source": self.tokens_source,
            "layout_source": self.layout_source,
            "measured": self.entry(),
            "p10_s": r.p10_s,
            "p90_s": r.p90_s,
            "spread": r.spread,
            "n_steps": r.n_steps,
            "skipped": r.skipped,
            "problems": list(r.problems),
            "notes": list(self.notes),
        }


def _tokens(
    times: StepTimes, flag: int | None, seq_len: int | None, config_seq_len: int | None, path: Path
) -> tuple[int, str]:
    log = times.log
    assert log is not None
    stated: tuple[int, str] | None = None
    if times.tokens_per_step:
        stated = times.tokens_per_step, "the records' tokens per step"
    elif log.batch_sequences:
        length = log.seq_len or seq_len or config_seq_len
        if length:
            said = (
                "the log's seq_length"
                if log.seq_len
                else "--seq-len"
                if seq_len
                else "the config's model.seq_len"
            )
            stated = log.batch_sequences * length, f"{log.batch_note} x sequence length {length} ({said})"
    if flag is not None:
        if stated is not None and stated[0] != flag:
            raise DataError(
                f"--global-batch-tokens {flag} contradicts the log: {stated[1]} = {stated[0]} tokens per step",
                where=str(path),
                fix="leave --global-batch-tokens out to take the log's, or give the log of the run you mean",
            )
        return flag, "--global-batch-tokens"
    if stated is not None:
        return stated
    hint = (
        "pass --seq-len (or --config) with the model's sequence length, or --global-batch-tokens"
        if log.batch_sequences
        else "pass --global-batch-tokens with the run's tokens per optimizer step"
    )
    raise DataError(
        f"the log does not give its tokens per step ({log.batch_note})", where=str(path), fix=hint
    )


def measured_entry(
    path: Path,
    *,
    nodes: int | None,
    layout: dict[str, int] | None,
    global_batch_tokens: int | None = None,
    seq_len: int | None = None,
    skip_steps: int | None = None,
    fmt: str | None = None,
    gpus_per_node: int | None = None,
    config: str | Path | None = None,
) -> MeasuredEntry:
    """Read the log, measure its steps, and check the entry as the config would (DataError / ConfigError, exit 2)."""
    loaded = load_config(config) if config else None
    config_gpn = loaded.config.cluster.gpus_per_node if loaded else None
    per_node = gpus_per_node or config_gpn or DEFAULT_GPUS_PER_NODE
    gpus = layout["tp"] * layout["pp"] * layout["dp"] * layout["cp"] if layout is not None else None
    times = read_step_times(path, skip_steps, fmt=fmt, gpus=gpus, global_batch_tokens=global_batch_tokens)
    log = times.log
    assert log is not None
    layout_source = "--layout"
    if log.layout is not None:
        if layout is not None and layout != log.layout:
            raise DataError(
                f"--layout {_layout_text(layout)} contradicts the log's own arguments ({_layout_text(log.layout)})",
                where=str(path),
                fix="leave --layout out to take the log's, or give the run's layout",
            )
        layout, layout_source = log.layout, "the log's parallel sizes"
    elif layout is None:
        layout_source = "not given: pass --layout for the plan.measured entry"
    config_seq_len = loaded.config.model.seq_len if loaded else None
    tokens, tokens_source = _tokens(times, global_batch_tokens, seq_len, config_seq_len, path)
    result = measure(times)
    out = MeasuredEntry(
        str(path),
        log.format,
        result,
        tokens,
        tokens_source,
        nodes,
        layout,
        layout_source,
        times.notes,
        loaded.config.model.name if loaded else None,
        loaded.config.plan.stack.preset if loaded else None,
    )
    _check(out, per_node, gpus_per_node is not None or config_gpn is not None, config)
    return out


def _layout_text(layout: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in layout.items())


def _check(out: MeasuredEntry, per_node: int, per_node_given: bool, config: str | Path | None) -> None:
    """Refuse what the config would: the entry's bounds, GPUs against nodes, a batch no layout can split."""
    entry = out.entry()
    try:
        MeasuredRunConfig.model_validate(
            entry
            or {
                "nodes": 1,
                "layout": {},
                "global_batch_tokens": out.global_batch_tokens,
                "step_time_s": out.result.median_s,
                "source": out.source,
            }
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise DataError(
            f"the measurement gives {field} = {first.get('input')!r}, which a config refuses: {first['msg']}",
            where=out.path,
            fix="check the log is of the run you mean (its times and batch), and the flags you gave",
        ) from None
    if entry is None:
        return
    layout = entry["layout"]
    world = layout["tp"] * layout["pp"] * layout["dp"] * layout["cp"]
    if world != entry["nodes"] * per_node:
        stated = f"{per_node} GPUs per node" + (
            "" if per_node_given else " (the default; --gpus-per-node sets it)"
        )
        raise DataError(
            f"the layout {_layout_text(layout)} has tp x pp x dp x cp = {world} GPUs, but {entry['nodes']} nodes of "
            f"{stated} are {entry['nodes'] * per_node}",
            where="--nodes / --layout",
            fix="give the nodes and the layout the run used",
        )
    if out.global_batch_tokens % layout["dp"]:
        raise DataError(
            f"{out.global_batch_tokens} tokens per step cannot be split over dp = {layout['dp']} data-parallel "
            "replicas",
            where="--global-batch-tokens",
            fix="give the run's tokens per optimizer step (global batch sequences x sequence length)",
        )
    if config is not None:
        try:
            load_config(config, [f"plan.measured={json.dumps([entry])}"])
        except ConfigError as exc:
            raise DataError(
                f"the config refuses this entry: {exc.message}",
                where=f"{out.path} against {config}",
                fix=exc.fix or "give the nodes, layout and batch the run used",
            ) from None

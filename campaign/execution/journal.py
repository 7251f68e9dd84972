"""The events of a real run, one JSON line each, appended and fsynced as they happen.

Each line carries the simulator's event columns (`campaign.sim.simulator.EVENT_COLUMNS`) with `t_s` in real
seconds since the run's start, plus the attempt it belongs to. A supervisor killed half-way leaves every event it
wrote; the next one reads them back and continues numbering. A `listener` hears each event as it is written
(the execute task turns them into Prefect events while the run goes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

# The simulator's event columns (campaign/sim/simulator.py; a unit test holds them equal).
EVENT_COLUMNS = ("event_id", "t_s", "kind", "category", "scope", "node", "tokens_trained", "detail")


@dataclass(frozen=True)
class RunEvent:
    """One event of a real run as it happens: the simulator's columns, its start and when it happened."""

    event_id: int
    t_s: float  # seconds since the run's start
    kind: str
    category: str
    scope: str
    node: int
    tokens_trained: float
    detail: str
    attempt: int
    occurred_at: float | None  # Unix seconds (None before the run's start is known)


@dataclass
class Journal:
    """Events and step arrival times of one real run, kept in `events.jsonl` and `steps.jsonl` of a folder."""

    folder: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)  # {"t_s", "step", "attempt"}
    listener: Callable[[RunEvent], None] | None = None  # told of each event once it is on disk
    row_listener: Callable[[dict[str, Any]], None] | None = None  # the same, with the row's every field

    @property
    def events_path(self) -> Path:
        return self.folder / "events.jsonl"

    @property
    def steps_path(self) -> Path:
        return self.folder / "steps.jsonl"

    @classmethod
    def open(cls, folder: Path) -> Journal:
        """The journal of `folder`, with whatever a previous supervisor wrote (a cut-off last line is dropped)."""
        folder.mkdir(parents=True, exist_ok=True)
        journal = cls(folder)
        journal.events = _read_lines(journal.events_path)
        journal.steps = _read_lines(journal.steps_path)
        return journal

    def add(
        self,
        t_s: float,
        kind: str,
        category: str = "",
        scope: str = "",
        node: int = -1,
        tokens_trained: float = 0.0,
        detail: str = "",
        attempt: int = 0,
        **extra: Any,
    ) -> dict[str, Any]:
        row = {
            "event_id": len(self.events),
            "t_s": round(float(t_s), 6),
            "kind": kind,
            "category": category,
            "scope": scope,
            "node": int(node),
            "tokens_trained": float(tokens_trained),
            "detail": detail,
            "attempt": attempt,
            **extra,
        }
        self.events.append(row)
        _append(self.events_path, row, sync=True)
        if self.listener is not None:
            started = self.events[0].get("started_at")
            self.listener(
                RunEvent(
                    **{k: row[k] for k in (*EVENT_COLUMNS, "attempt")},
                    occurred_at=float(started) + row["t_s"] if started is not None else None,
                )
            )
        if self.row_listener is not None:
            self.row_listener(row)
        return row

    def end_detail(self) -> str | None:
        """Why the run ended (the last window_end's detail), or None while it goes on."""
        ends = self.kinds("window_end")
        return str(ends[-1]["detail"]) if ends else None

    def add_step(self, t_s: float, step: int, attempt: int) -> None:
        row = {"t_s": round(float(t_s), 6), "step": int(step), "attempt": attempt}
        self.steps.append(row)
        _append(self.steps_path, row, sync=False)

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind]

    def is_finished(self) -> bool:
        return any(e["kind"] == "window_end" for e in self.events)

    def frame(self) -> pd.DataFrame:
        """The events in the simulator's columns and types, for the catalog and analyse."""
        frame = pd.DataFrame.from_records(
            [{k: e[k] for k in EVENT_COLUMNS} for e in self.events], columns=list(EVENT_COLUMNS)
        )
        return frame.astype(
            {"event_id": "int64", "t_s": "float64", "node": "int32", "tokens_trained": "float64"}
        )


def _append(path: Path, row: dict[str, Any], sync: bool) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row, separators=(",", ":")) + "\n")
        handle.flush()
        if sync:
            os.fsync(handle.fileno())


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep != len(data):  # a line cut off by a kill: never half-trusted
        with open(path, "r+b") as handle:
            handle.truncate(keep)
    return [json.loads(line) for line in data[:keep].decode().splitlines() if line.strip()]

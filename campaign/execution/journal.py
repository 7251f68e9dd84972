"""The events of a real run, one JSON line each, appended and fsynced as they happen.

Each line carries the simulator's event columns (`campaign.sim.simulator.EVENT_COLUMNS`) with `t_s` in real
seconds since the run's start, plus the attempt it belongs to and the keys of its kind (`JournalEvent`). A
supervisor killed half-way leaves every event it wrote; the next one reads them back and continues numbering. A
`listener` hears each event as it is written (the execute task turns them into Prefect events while the run goes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, Unpack

import pandas as pd

from campaign.errors import DataError
from campaign.execution.journal_lines import (
    EVENT_COLUMNS,
    JOURNAL_FIX,
    EventKeys,
    JournalEvent,
    JournalLine,
    JournalStep,
)

# Told of each event once it is on disk, with when it happened (Unix seconds; None before the run's start is known).
EventListener = Callable[[JournalEvent, float | None], None]


@dataclass
class Journal:
    """Events and step arrival times of one real run, kept in `events.jsonl` and `steps.jsonl` of a folder."""

    folder: Path
    events: list[JournalEvent] = field(default_factory=list)
    steps: list[JournalStep] = field(default_factory=list)
    listener: EventListener | None = None
    row_listener: Callable[[JournalEvent], None] | None = None  # the same, with the event's every field

    @property
    def events_path(self) -> Path:
        return self.folder / "events.jsonl"

    @property
    def steps_path(self) -> Path:
        return self.folder / "steps.jsonl"

    @classmethod
    def open(cls, folder: Path) -> Journal:
        """The journal of `folder`, with whatever a previous supervisor wrote (a cut-off last line is dropped).
        DataError naming the file and line if a whole line is unusable."""
        folder.mkdir(parents=True, exist_ok=True)
        journal = cls(folder)
        journal.events = _read_lines(journal.events_path, JournalEvent)
        journal.steps = _read_lines(journal.steps_path, JournalStep)
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
        **keys: Unpack[EventKeys],
    ) -> JournalEvent:
        """Append an event (its kind-specific `keys` written in the order given) and tell the listeners."""
        event = JournalEvent(
            len(self.events),
            round(float(t_s), 6),
            kind,
            category,
            scope,
            int(node),
            float(tokens_trained),
            detail,
            attempt,
            **keys,
            line_keys=tuple(keys),
        )
        self.events.append(event)
        _append(self.events_path, event, sync=True)
        if self.listener is not None:
            started = self.events[0].started_at
            self.listener(event, float(started) + event.t_s if started is not None else None)
        if self.row_listener is not None:
            self.row_listener(event)
        return event

    def started_at(self) -> float:
        """The run's start, Unix seconds: the first event's (a job_start's) `started_at`."""
        started = self.events[0].started_at if self.events else None
        if started is None:
            raise DataError(
                "the journal's first line is no job_start with the run's start (started_at)",
                where=f"{self.events_path}:1",
                fix=JOURNAL_FIX,
            )
        return started

    def end_detail(self) -> str | None:
        """Why the run ended (the last window_end's detail), or None while it goes on."""
        ends = self.kinds("window_end")
        return ends[-1].detail if ends else None

    def add_step(self, t_s: float, step: int, attempt: int) -> None:
        row = JournalStep(round(float(t_s), 6), int(step), attempt)
        self.steps.append(row)
        _append(self.steps_path, row, sync=False)

    def kinds(self, kind: str) -> list[JournalEvent]:
        return [e for e in self.events if e.kind == kind]

    def is_finished(self) -> bool:
        return any(e.kind == "window_end" for e in self.events)

    def frame(self) -> pd.DataFrame:
        """The events in the simulator's columns and types, for the catalog and analyse."""
        frame = pd.DataFrame.from_records(
            [tuple(getattr(e, k) for k in EVENT_COLUMNS) for e in self.events], columns=list(EVENT_COLUMNS)
        )
        return frame.astype(
            {"event_id": "int64", "t_s": "float64", "node": "int32", "tokens_trained": "float64"}
        )


def _append(path: Path, row: JournalLine, sync: bool) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row.to_json(), separators=(",", ":")) + "\n")
        handle.flush()
        if sync:
            os.fsync(handle.fileno())


Line = TypeVar("Line", JournalEvent, JournalStep)


def _read_lines(path: Path, record: type[Line]) -> list[Line]:
    if not path.exists():
        return []
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep != len(data):  # a line cut off by a kill: never half-trusted
        with open(path, "r+b") as handle:
            handle.truncate(keep)
    out = []
    for number, text in enumerate(data[:keep].splitlines(), start=1):
        if not text.strip():
            continue
        try:
            parsed = json.loads(text)  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        except ValueError as exc:
            raise DataError(
                f"line {number} is no JSON ({exc})", where=f"{path}:{number}", fix=JOURNAL_FIX
            ) from exc
        out.append(record.from_json(parsed, path, number))
    return out

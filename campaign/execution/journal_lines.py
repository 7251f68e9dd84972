"""The lines of a real run's journal as typed records: `JournalEvent` for `events.jsonl`, `JournalStep` for
`steps.jsonl`, read by attribute inside campaign.

A line is its fixed columns, then the keys only some lines carry (an event's kind-specific keys) in the order it
was written with. A record keeps that order, and any key this version does not know, so `to_json()` gives back
exactly the line it was written or read as: the file stays byte-identical, and a journal another version wrote
loses nothing when this one appends to it. `from_json()` reads a line back, and says which file and line is
unusable if one is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypedDict

from campaign.errors import DataError
from campaign.records import JsonRecord, json_value

# The simulator's event columns (campaign/sim/simulator.py; a unit test holds them equal).
EVENT_COLUMNS = ("event_id", "t_s", "kind", "category", "scope", "node", "tokens_trained", "detail")

JOURNAL_FIX = (
    "the journal is written by campaign's supervisor only: restore the run folder from a copy, or move it away "
    "to run the window again from the start"
)


class EventKeys(TypedDict, total=False):
    """The kind-specific keys an event may carry, as `Journal.add` takes them (JournalEvent's optional fields)."""

    started_at: float
    outcome: str
    nodes: tuple[str, ...]
    names: tuple[str, ...]
    injection: int | None
    step: int
    newest: int
    lost_steps: int
    blame: str
    progressed: bool
    stderr: str


class JournalLine(JsonRecord):
    """A journal line: its fixed `COLUMNS`, then its other keys (`line_keys`, in the line's order), each a field
    of the record or, for a key this version does not know, in `unknown`."""

    __slots__ = ()
    COLUMNS: ClassVar[tuple[str, ...]]
    TYPES: ClassVar[dict[str, tuple[type, ...]]]  # JSON types of every known key; a tuple's of its items
    TUPLES: ClassVar[frozenset[str]] = frozenset()  # keys holding a list
    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {}  # kind -> keys a line of that kind always has

    line_keys: tuple[str, ...]
    unknown: tuple[tuple[str, object], ...]

    def to_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.COLUMNS}
        unknown = dict(self.unknown)
        for key in self.line_keys:
            out[key] = json_value(unknown[key] if key in unknown else getattr(self, key))
        return out

    @classmethod
    def _parse(cls, data: object, path: Path, line: int) -> dict[str, object]:
        """The constructor's arguments for line `line` of `path`, parsed as `data`; DataError if it is unusable."""
        where = f"{path}:{line}"
        if not isinstance(data, dict):
            raise DataError(f"line {line} is no JSON object", where=where, fix=JOURNAL_FIX)
        missing = [k for k in cls.COLUMNS if k not in data]
        missing += [k for k in cls.REQUIRED.get(str(data.get("kind")), ()) if data.get(k) is None]
        if missing:
            raise DataError(f"line {line} has no {', '.join(missing)}", where=where, fix=JOURNAL_FIX)
        args: dict[str, object] = {}
        unknown: list[tuple[str, object]] = []
        for key, value in data.items():
            if key not in cls.TYPES:
                unknown.append((key, value))
                continue
            if not _is_a(value, cls.TYPES[key], key in cls.TUPLES, optional=key not in cls.COLUMNS):
                raise DataError(
                    f"line {line}: {key} is {value!r}, of the wrong type", where=where, fix=JOURNAL_FIX
                )
            args[key] = tuple(value) if isinstance(value, list) else value
        args["line_keys"] = tuple(k for k in data if k not in cls.COLUMNS)
        args["unknown"] = tuple(unknown)
        return args


def _is_a(value: object, types: tuple[type, ...], is_tuple: bool, optional: bool) -> bool:
    if value is None:
        return optional
    if is_tuple:
        return isinstance(value, list) and all(_is_a(v, types, False, False) for v in value)
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


_INT, _FLOAT, _STR = (int,), (int, float), (str,)


@dataclass(frozen=True, slots=True)
class JournalEvent(JournalLine):
    """One event of a real run: the simulator's columns, the attempt (start) it belongs to, and the keys of its
    kind; a kind-specific field is None on a line without that key."""

    event_id: int
    t_s: float  # seconds since the run's start
    kind: str
    category: str
    scope: str
    node: int
    tokens_trained: float
    detail: str
    attempt: int
    started_at: float | None = None  # job_start: the run's start, Unix seconds
    outcome: str | None = None  # window_end of a one-node run: how it ended (campaign.execution.policy)
    nodes: tuple[str, ...] | None = None  # start of a multi-node run: the host of each rank
    names: tuple[str, ...] | None = None  # start of a multi-node run: the host of each node index so far
    injection: int | None = None  # failure: the injection (its index) that caused it; null for an organic one
    step: int | None = (
        None  # checkpoint_*: its step; restart_end: the step resumed from; failure: the last step
    )
    newest: int | None = (
        None  # checkpoint_fallback: the newest checkpoint, which the start did not resume from
    )
    lost_steps: int | None = None  # checkpoint_fallback: the steps between the two
    blame: str | None = (
        None  # failure of a one-node run: what it points at (campaign.execution.settings BLAME_*)
    )
    progressed: bool | None = None  # failure of a one-node run: whether its start wrote a step
    stderr: str | None = None  # failure of a one-node run: the trainer's last error output
    line_keys: tuple[str, ...] = ()  # the keys after `attempt` its line has, in order
    unknown: tuple[tuple[str, object], ...] = ()  # keys of its line this version does not know, never read

    COLUMNS: ClassVar[tuple[str, ...]] = (*EVENT_COLUMNS, "attempt")
    TYPES: ClassVar[dict[str, tuple[type, ...]]] = {
        "event_id": _INT, "t_s": _FLOAT, "kind": _STR, "category": _STR, "scope": _STR, "node": _INT,
        "tokens_trained": _FLOAT, "detail": _STR, "attempt": _INT, "started_at": _FLOAT, "outcome": _STR,
        "nodes": _STR, "names": _STR, "injection": _INT, "step": _INT, "newest": _INT, "lost_steps": _INT,
        "blame": _STR, "progressed": (bool,), "stderr": _STR,
    }  # fmt: skip
    TUPLES: ClassVar[frozenset[str]] = frozenset({"nodes", "names"})
    # What readers take as always there (a run's start; the step a checkpoint event is about).
    REQUIRED: ClassVar[dict[str, tuple[str, ...]]] = {
        "job_start": ("started_at",),
        "checkpoint_end": ("step",),
        "checkpoint_fallback": ("step", "newest", "lost_steps"),
        "checkpoint_unloadable": ("step",),
    }

    @property
    def at_step(self) -> int:
        """The step the event names (`step`; every checkpoint event has one), 0 for one that names none."""
        return self.step if self.step is not None else 0

    @classmethod
    def from_json(cls, data: object, path: Path, line: int) -> JournalEvent:
        """Line `line` of the journal `path`, parsed as `data`; DataError naming it if it is unusable."""
        return cls(**cls._parse(data, path, line))  # type: ignore[arg-type]  # _parse checked every type


@dataclass(frozen=True, slots=True)
class JournalStep(JournalLine):
    """The arrival of one step's line: when (seconds since the run's start), which step, and of which start."""

    t_s: float
    step: int
    attempt: int
    line_keys: tuple[str, ...] = ()  # keys after `attempt` (none this version writes)
    unknown: tuple[tuple[str, object], ...] = ()

    COLUMNS: ClassVar[tuple[str, ...]] = ("t_s", "step", "attempt")
    TYPES: ClassVar[dict[str, tuple[type, ...]]] = {"t_s": _FLOAT, "step": _INT, "attempt": _INT}

    @classmethod
    def from_json(cls, data: object, path: Path, line: int) -> JournalStep:
        """Line `line` of `path` (steps.jsonl), parsed as `data`; DataError naming it if it is unusable."""
        return cls(**cls._parse(data, path, line))  # type: ignore[arg-type]  # _parse checked every type

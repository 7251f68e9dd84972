"""A tiny discrete-event core: a heap of timed events, `schedule`, `step` and `run(until)`.

Events at the same time run in the order they were scheduled. Cancelling is lazy: a handler ignores an
event whose `epoch` is stale, so nothing is ever removed from the heap.
Source: the shape of SimPy's core (`Environment.schedule/step/run`), without processes or the global RNG.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any, NamedTuple


class Event(NamedTuple):
    """One scheduled happening. `payload` is whatever the handler needs; `epoch` supports lazy cancel."""

    t_s: float
    seq: int
    kind: str
    payload: Any = None
    epoch: int = 0


class EventQueue:
    """A heap of events ordered by (time, scheduling order) with a clock that only moves forward."""

    def __init__(self, start_s: float = 0.0) -> None:
        self.now_s = start_s
        self._heap: list[Event] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, t_s: float, kind: str, payload: Any = None, epoch: int = 0) -> Event:
        """Schedule `kind` at absolute time `t_s` (never before now)."""
        if t_s < self.now_s:
            raise ValueError(f"cannot schedule '{kind}' at {t_s} s, before now ({self.now_s} s)")
        event = Event(float(t_s), next(self._seq), kind, payload, epoch)
        heapq.heappush(self._heap, event)
        return event

    def schedule_many(self, times_s: list[float], kind: str, payloads: list[Any] | None = None) -> None:
        """Schedule many events of one kind at once (in list order for equal times), all at or after now."""
        if times_s and min(times_s) < self.now_s:
            raise ValueError(f"cannot schedule '{kind}' before now ({self.now_s} s)")
        payloads = payloads if payloads is not None else [None] * len(times_s)
        self._heap.extend(
            Event(float(t), next(self._seq), kind, p, 0) for t, p in zip(times_s, payloads, strict=False)
        )
        heapq.heapify(self._heap)

    def peek_s(self) -> float:
        """Time of the next event, or +inf when none is left."""
        return self._heap[0].t_s if self._heap else float("inf")

    def step(self) -> Event:
        """Pop the next event and advance the clock to it."""
        event = heapq.heappop(self._heap)
        self.now_s = event.t_s
        return event

    def run(self, until_s: float, handle: Callable[[Event], None]) -> None:
        """Hand every event strictly before `until_s` to `handle`, then set the clock to `until_s`."""
        while self._heap and self._heap[0].t_s < until_s:
            handle(self.step())
        self.now_s = max(self.now_s, until_s)

"""A request to stop a real run before its end: a cancelled flow run, or SIGTERM to the process running it.

The supervisor asks `StopRequest.requested()` at every poll; when it answers, the start is killed (its process
group here, `scancel` on Slurm) and the run ends with a `window_end` event whose detail begins `cancelled`.
`stop_on_signals` turns SIGTERM into such a request for the length of a run and, once the run has recorded its end,
delivers the signal again to whoever handled it before (Prefect's engine marks the flow run cancelled).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType

CANCELLED = "cancelled"  # how the detail of a cancelled run's window_end begins


@dataclass
class StopRequest:
    """Set once, by `request` (a signal handler) or by `poll` (asked at most every `poll_every_s`, e.g. whether
    the flow run was cancelled); `requested()` is the reason, or None while the run should go on."""

    poll: Callable[[], str | None] | None = None
    poll_every_s: float = 5.0
    reason: str | None = None
    signum: int | None = None  # the signal that asked, to deliver again once the run has ended
    _polled_at: float = field(default=float("-inf"), repr=False)

    def request(self, reason: str, signum: int | None = None) -> None:
        if self.reason is None:
            self.reason, self.signum = reason, signum

    def requested(self) -> str | None:
        if self.reason is None and self.poll is not None:
            now = time.monotonic()
            if now - self._polled_at >= self.poll_every_s:
                self._polled_at = now
                found = self.poll()
                if found:
                    self.request(found)
        return self.reason


def cancelled_detail(reason: str) -> str:
    """The window_end detail of a cancelled run."""
    return f"{CANCELLED}: {reason}"


def is_cancelled(end_detail: str | None) -> bool:
    return bool(end_detail) and str(end_detail).startswith(CANCELLED)


@contextlib.contextmanager
def stop_on_signals(stop: StopRequest, signums: tuple[int, ...] = (signal.SIGTERM,)) -> Iterator[StopRequest]:
    """While inside, each of `signums` requests a stop instead of ending the process; on a clean exit the
    previous handlers come back and a signal that was caught is raised again for them. Outside the main thread
    (no signal handlers there) it only yields."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        stop.request(
            f"{signal.Signals(signum).name} received (the flow run was cancelled or stopped)", signum
        )

    previous = {s: signal.signal(s, handler) for s in signums}
    try:
        yield stop
    finally:
        for s, old in previous.items():
            signal.signal(s, old if old is not None else signal.SIG_DFL)
    if stop.signum is not None:
        signal.raise_signal(stop.signum)

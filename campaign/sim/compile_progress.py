"""A line on the terminal when Numba compiles the simulator's kernels, and one every HEARTBEAT_S while it goes on.

Numba compiles a kernel on its first call after an install or a change to its source (about a minute for all of
them on two cores, longer on a busy machine), then loads it from its cache. A command that happens to pay for it
says so instead of going silent: Numba's own "numba:compile" events (not emitted for a kernel loaded from the
cache) start the lines; nothing is printed when every kernel comes from the cache.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

from numba.core import event

HEARTBEAT_S = 30.0
MESSAGE = "compiling the simulator's kernels, once per install (about a minute)"


# A logger of its own that always reaches the terminal (stderr), formatted as Prefect's console lines, whether or
# not a flow run has configured logging: the compile can start in a worker or before any flow.
log = logging.getLogger("campaign.compile")
if not log.handlers:
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(
        logging.Formatter("%(asctime)s.%(msecs)03d | %(levelname)-7s | campaign - %(message)s", "%H:%M:%S")
    )
    log.addHandler(_handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def say(text: str) -> None:
    log.info(text)


class CompileProgress(event.Listener):
    """Counts the compilations under way; the first one says MESSAGE, a thread says how long it has been."""

    def __init__(self, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.heartbeat_s = heartbeat_s
        self.active = 0
        self.started: float | None = None
        self.lock = threading.Lock()

    def on_start(self, ev: event.Event) -> None:
        with self.lock:
            self.active += 1
            if self.started is not None:
                return
            self.started = time.monotonic()
        say(MESSAGE)
        threading.Thread(target=self._heartbeat, name="numba-compile-progress", daemon=True).start()

    def on_end(self, ev: event.Event) -> None:
        with self.lock:
            self.active = max(0, self.active - 1)

    def _heartbeat(self) -> None:
        while True:
            time.sleep(self.heartbeat_s)
            with self.lock:
                active, started = self.active, self.started or time.monotonic()
            if active:
                say(f"still compiling the simulator's kernels ({time.monotonic() - started:.0f} s so far)")


_installed: CompileProgress | None = None


def report_compiles() -> CompileProgress:
    """Install the listener once per process (the compiled kernels' module calls it when it is imported)."""
    global _installed
    if _installed is None:
        _installed = CompileProgress()
        event.register("numba:compile", _installed)
    return _installed

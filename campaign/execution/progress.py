"""Lines that say how a real run goes while it runs: one every `every` steps (the step, the tokens kept, the ETTR so
far, the failures), one for each failure, restart, exclusion, checkpoint fallback and the end, and one at least
every `quiet_s` seconds whatever happens (a long start-up, a back-off, a hang being timed), so a person watching
never waits a minute without a word. `say` takes each line (the execute task logs it to the terminal and the
Prefect run's logs, and shows it as the run's state message)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from campaign.execution.journal import Journal, JournalEvent
from campaign.execution.measured import counted_checkpoints, job_seconds
from campaign.execution.settings import BLAME_INJECTED

QUIET_S = 30.0


@dataclass
class ProgressLines:
    say: Callable[[str], None]
    steps: int
    tokens_per_step: int
    every: int = 0  # 0: every tenth of the target
    nodes: tuple[str, ...] = ()
    quiet_s: float = QUIET_S
    journal: Journal | None = None  # the run's, set by the supervisor once open
    step_said: int = 0
    said_at: float = field(default_factory=time.monotonic)

    def _say(self, line: str) -> None:
        self.said_at = time.monotonic()
        self.say(line)

    def figures(self, journal: Journal, step: int) -> str:
        """step, tokens kept, ETTR so far, failures: the figures every line ends with."""
        started = journal.events[0].started_at if journal.events else None
        if started is None:  # not started yet
            started = time.time()
        now_s = max(time.time() - started, 1e-9)
        ettr = (
            job_seconds(journal, self.steps, end_s=now_s)[0]["productive"] / now_s if journal.events else 0.0
        )
        kept = max([e.at_step for e in counted_checkpoints(journal)], default=0)
        failures = journal.kinds("failure")
        injected = sum(1 for f in failures if f.blame == BLAME_INJECTED)
        excluded = len(journal.kinds("node_excluded"))
        return (
            f"step {step:,}/{self.steps:,} ({100.0 * step / self.steps:.0f}%), "
            f"{kept * self.tokens_per_step:,} tokens kept (checkpoint {kept:,}), ETTR so far {ettr:.3f}, "
            f"{len(failures)} failure(s) ({injected} injected), {len(journal.kinds('restart_start'))} restart(s)"
            + (f", {excluded} node(s) excluded" if excluded else "")
        )

    def step(self, step: int) -> None:
        journal = self.journal
        if journal is None:
            return
        every = self.every or max(1, self.steps // 10)
        if step // every > self.step_said // every:
            self.step_said = step
            self._say(f"execute: {self.figures(journal, step)}")

    def event(self, row: JournalEvent) -> None:
        journal = self.journal
        if journal is None:
            return
        kind, node = row.kind, row.node
        where = f" on {self.nodes[node]}" if 0 <= node < len(self.nodes) else ""
        step = max([s.step for s in journal.steps], default=0)
        if kind == "failure":
            line = (
                f"failure{where} at step {row.step if row.step is not None else step}: {row.category} "
                f"({row.detail}); points at: {row.blame if row.blame is not None else '?'}"
            )
        elif kind == "restart_start":
            line = f"restart {row.attempt}{where} after {row.detail.removeprefix('backoff_s=')} s back-off"
        elif kind == "node_excluded":
            line = f"node excluded: {row.detail} (failures that point at it)"
        elif kind in ("checkpoint_fallback", "checkpoint_unloadable", "supervisor_resumed", "job_requeued"):
            line = f"{kind.replace('_', ' ')}: {row.detail}"
        elif kind == "window_end":
            line = f"the run ended ({row.outcome if row.outcome is not None else '?'}): {row.detail}"
        else:
            return
        self._say(f"execute: {line}; {self.figures(journal, step)}")

    def tick(self) -> None:
        journal = self.journal
        if journal is not None and time.monotonic() - self.said_at >= self.quiet_s:
            step = max([s.step for s in journal.steps], default=0)
            self._say(f"execute: running; {self.figures(journal, step)}")

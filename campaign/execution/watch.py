"""The heartbeat of one start of a real run, called at every poll: records new steps and checkpoints, reconciles
the step a start resumes from with the checkpoints seen, fires injected faults, and stops the start gracefully.

Progress is a new step: a step number at or below the start's furthest is not progress (named in the hang's
detail as repeated or going back) and is not recorded as trained, so a trainer that writes the same step forever
is hung once the limit passes. A stop (a hang, the window's end, a cancel) sends `stop_signal` to the trainer
(its process group here, `scancel --signal` on Slurm), waits `stop_grace_s` for it to end by itself, then kills
it; `ended_by` says which did.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from campaign.execution.journal import Journal
from campaign.execution.measured import counted_checkpoints
from campaign.execution.settings import HANG, RealRunSettings
from campaign.execution.stopping import StopRequest
from campaign.rehearsal.contract import Metrics
from campaign.rehearsal.processes import read_status

NODE_LOSS_WAIT_S = 30.0  # a node set DOWN whose start the scheduler has not ended by then is killed
CANCELLED_STOP, WINDOW_END_STOP = "cancelled", "window_end"
MAX_INTERVALS = (
    200  # the step intervals kept for the hang limit's median (persisted for an adopting supervisor)
)


SUPERVISOR_STATE = (
    "supervisor-state.json"  # the hang limit's history, kept for a supervisor that adopts the job
)


def load_intervals(folder: Path) -> list[float]:
    """The step intervals a previous supervisor of the run measured (empty if none)."""
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        saved = json.loads((folder / SUPERVISOR_STATE).read_text()).get("intervals", [])
        return [float(x) for x in saved]
    return []


def save_intervals(folder: Path, intervals: list[float]) -> None:
    path = folder / SUPERVISOR_STATE
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps({"intervals": intervals[-MAX_INTERVALS:]}))
    partial.replace(path)


def newest_checkpoint(journal: Journal) -> int:
    """The newest checkpoint step the run may resume from: checkpoints a later start fell back below, or could
    not load, are not."""
    return max((e.at_step for e in counted_checkpoints(journal)), default=0)


@dataclass
class _Watch:
    """The heartbeat of one start, called by run_start at every poll: records steps and checkpoints, fires the
    injected faults, and says when to kill the start (a hang, an injected kill or node loss)."""

    settings: RealRunSettings
    journal: Journal
    t0: float
    attempt: int
    node: int
    status_path: Path
    lost_marker: Path
    intervals: list[float]
    fired: set[int]
    on_progress: Callable[[int, int], None] | None = None
    stop_job: Callable[[], None] | None = None  # an injected hang: stop every process of the start
    # an injected node loss by the scheduler (Slurm sets the node DOWN): None, or why it could not
    lose_node: Callable[[], str | None] | None = None
    lose_error: str = ""  # why the scheduler could not take the node down (the start is then killed on it)
    stop: StopRequest | None = None  # a request to end the run (a cancelled flow run, SIGTERM)
    send_signal: Callable[[str], None] | None = None  # Slurm: signal the job (here: the trainer's group)
    deadline_wall: float = float("inf")  # the window's end (Unix seconds): a graceful stop begins there
    seen_steps: int = 0
    new_steps: int = 0
    seen_checkpoints: int = 0
    seen_resumed: int = 0
    last_progress: float = field(default_factory=time.time)
    max_step: int = 0
    high_water: int = 0  # the furthest step of the run before this start
    resumed_from: int | None = None
    repeats: int = 0  # step lines at or below the furthest step (no progress)
    went_back: tuple[int, int] | None = None  # (furthest, lower) the first time the step number went back
    reason: str = ""  # why the start was killed: hang, kill, node_loss, cancelled, window_end
    injected: int | None = None  # which injection caused it
    stopped_at: float | None = None  # an injected hang: when the group was stopped
    killed_at: float | None = None  # when the supervisor decided to end the start
    signalled_at: float | None = None  # when the stop signal went out (a graceful stop)
    ended_by: str = ""  # what ended a stopped start: the stop signal, or SIGKILL after the grace
    adopted: bool = False  # a start left running by a supervisor that was stopped, watched again
    replay_batch: bool = False  # an adopted start's first lines arrive at once: no interval from them
    on_tick: Callable[[], None] | None = None  # called at every poll (a progress line that must not go quiet)
    state_folder: Path | None = None  # where the hang limit's history is kept while the start runs
    saved_at: float = 0.0

    def hang_limit_s(self) -> float:
        if not self.new_steps or self.max_step >= self.settings.steps:  # starting, or ending after the target
            return self.settings.startup_s
        median = statistics.median(self.intervals) if self.intervals else 0.0
        return max(self.settings.hang_min_s, self.settings.hang_factor * median)

    def _reconcile(self, resumed: int, now: float) -> None:
        """A restart resumed at `resumed`: below the newest checkpoint seen is a fallback, its steps rework."""
        self.resumed_from = resumed
        if self.attempt == 0 and not resumed:
            return
        newest = newest_checkpoint(self.journal)
        if resumed < newest:
            self.journal.add(
                now - self.t0,
                "checkpoint_fallback",
                node=self.node,
                detail=f"resumed from step {resumed}, not from the newest checkpoint (step {newest}): steps "
                f"{resumed + 1}-{newest} are trained again",
                attempt=self.attempt,
                step=resumed,
                newest=newest,
                lost_steps=newest - resumed,
            )

    def ingest(self, metrics: Metrics, now: float) -> None:
        for resumed in metrics.resumed[self.seen_resumed :]:
            self.seen_resumed += 1
            if self.resumed_from is None and not self.adopted:
                self._reconcile(resumed, now)
        fresh = metrics.losses[self.seen_steps :]
        batch = sum(1 for step, _ in fresh if step > self.max_step)
        for step, _ in fresh:
            self.seen_steps += 1
            if step <= self.max_step:  # no progress: the same step again, or the step number went back
                self.repeats += 1
                if step < self.max_step and self.went_back is None:
                    self.went_back = (self.max_step, step)
                continue
            if not self.new_steps and self.resumed_from is None and not self.adopted:
                self._reconcile(
                    step - 1, now
                )  # no `resumed` line: the checkpoint it loaded is before its step
            if self.new_steps or self.attempt == 0 or self.adopted:
                if self.new_steps and not self.replay_batch:
                    self.intervals.append((now - self.last_progress) / max(batch, 1))
                    del self.intervals[:-MAX_INTERVALS]
            else:
                self.journal.add(
                    now - self.t0, "restart_end", node=self.node, attempt=self.attempt, step=step - 1
                )
            self.journal.add_step(now - self.t0, step, self.attempt)
            self.new_steps += 1
            self.last_progress = now
            self.max_step = step
        if self.replay_batch and fresh:
            self.replay_batch = False
        if self.state_folder is not None and self.intervals and now - self.saved_at >= 1.0:
            self.saved_at = now  # kept as measured, not recomputed from lines replayed at once after adoption
            save_intervals(self.state_folder, self.intervals)
        for step in metrics.checkpoints[self.seen_checkpoints :]:
            self.seen_checkpoints += 1
            if self.adopted and any(
                e.attempt == self.attempt and e.step == step for e in self.journal.kinds("checkpoint_end")
            ):
                continue  # recorded by the supervisor before this one
            self.journal.add(
                now - self.t0,
                "checkpoint_end",
                node=self.node,
                tokens_trained=step * self.settings.tokens_per_step,
                detail=f"step={step}",
                attempt=self.attempt,
                step=step,
            )
        if self.on_progress is not None and metrics.losses:
            self.on_progress(self.max_step, self.settings.steps)

    def no_progress_note(self) -> str:
        """What the start wrote that was not progress, for a hang's detail ("" if nothing)."""
        notes = []
        if self.repeats:
            notes.append(f"{self.repeats} step line(s) at or below step {self.max_step} (repeated steps)")
        if self.went_back is not None:
            notes.append(f"the step number went back from {self.went_back[0]} to {self.went_back[1]}")
        return "; ".join(notes)

    def _signal(self, name: str) -> None:
        if self.send_signal is not None:
            self.send_signal(name)
            return
        trainer = read_status(self.status_path).get("trainer_pid")
        if isinstance(trainer, int):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(trainer, signal.Signals[name])

    def _begin_stop(self, now: float, reason: str) -> bool:
        """Begin a graceful stop: the stop signal now, SIGKILL once the grace has passed (True: kill now)."""
        self.reason, self.killed_at = reason, now
        if self.settings.stop_grace_s <= 0:
            self.ended_by = "SIGKILL"
            return True
        self.signalled_at = now
        self._signal(self.settings.stop_signal)
        return False

    def __call__(self, metrics: Metrics) -> bool:
        now = time.time()
        self.ingest(metrics, now)
        if self.on_tick is not None:
            self.on_tick()
        if self.signalled_at is not None:  # a graceful stop under way: the trainer has its grace
            if now - self.signalled_at >= self.settings.stop_grace_s:
                self.ended_by = "SIGKILL"
                return True
            return False
        if self.stop is not None and self.stop.requested():
            return self._begin_stop(now, CANCELLED_STOP)
        if now >= self.deadline_wall:
            return self._begin_stop(now, WINDOW_END_STOP)
        # a node set down by the scheduler: it ends the start, or the supervisor does after NODE_LOSS_WAIT_S
        if self.reason == "node_loss":
            return now - (self.killed_at or now) > NODE_LOSS_WAIT_S
        for index, injection in enumerate(self.settings.injections):
            if index in self.fired or self.max_step < injection.step or self.stopped_at is not None:
                continue
            self.fired.add(index)
            self.injected = index
            if injection.kind == "hang":
                if self.stop_job is not None:
                    self.stop_job()
                else:
                    trainer = read_status(self.status_path).get("trainer_pid")
                    if isinstance(trainer, int):
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(trainer, signal.SIGSTOP)  # a real hang: there, and no step comes
                self.stopped_at = now
                continue
            if injection.kind == "node_loss" and self.lose_node is not None:
                self.lose_error = self.lose_node() or ""
                if not self.lose_error:  # Slurm fails the start itself (NODE_FAIL) and requeues the job
                    self.reason, self.killed_at = injection.kind, now
                    return False
            if injection.kind == "node_loss":
                self.lost_marker.parent.mkdir(parents=True, exist_ok=True)
                self.lost_marker.write_text(json.dumps({"lost_at_s": now - self.t0, "injected": True}))
            self.reason, self.killed_at = injection.kind, now
            return True
        if now - self.last_progress > self.hang_limit_s():
            return self._begin_stop(now, HANG)
        return False

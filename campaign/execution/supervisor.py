"""Supervise a real training run through its window: heartbeat, failures classified, restarts, node exclusion.

Each start of the trainer runs under the rehearsal's process supervisor (`campaign.rehearsal.processes.run_start`:
its own process group, a Linux child subreaper, killed by the kernel if campaign dies), so no start outlives
campaign. This module decides what happens between starts. The metrics file is the heartbeat: a start that
writes no step for `hang_factor` median step times (at least `hang_min_s`; `startup_s` before its first step) is
hung and killed. Every end of a start that is not the target step is a failure, classified (exit code, signal,
hang, node lost, or a fault injected on purpose) and followed, after `backoff_s`, by a restart that resumes from
the trainer's last complete checkpoint; a node with `exclude_after` failures (a lost node at once) is excluded.
Every event goes to the journal as it happens (`campaign.execution.journal`), so a supervisor killed half-way
loses none: started again, it records the gap as a failure and restarts the job. `on_event` hears every event as
it is written; a `StopRequest` (`campaign.execution.stopping`) stops the run at the next poll, its end `cancelled`.
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
from datetime import UTC, datetime
from pathlib import Path

from campaign.execution.injection import Injection
from campaign.execution.journal import Journal, RunEvent
from campaign.execution.stopping import CANCELLED, StopRequest, cancelled_detail
from campaign.rehearsal.contract import Metrics
from campaign.rehearsal.processes import (
    drop_partial_line,
    kill_registered_groups,
    read_status,
    run_start,
)

REGISTRY = "trainers.json"
NODE_LOSS_WAIT_S = 30.0  # a node set DOWN whose start the scheduler has not ended by then is killed
ENV_NODE = "CAMPAIGN_EXECUTE_NODE"  # the node a start runs on (a slot name on this machine, a host on Slurm)

# Failure categories of a real run (the `category` of its failure events).
EXIT_CODE, SIGNAL, HANG, NODE_LOST, KILL, SUPERVISOR_LOST, BAD_METRICS = (
    "exit_code",
    "signal",
    "hang",
    "node_lost",
    "kill",
    "supervisor_lost",
    "bad_metrics",
)


@dataclass(frozen=True)
class RealRunSettings:
    """One real run: the trainer, its contract environment, the target and the supervisor's limits."""

    command: list[str]
    env: dict[str, str]
    steps: int
    tokens_per_step: int
    max_wall_s: float
    hang_factor: float = 10.0
    hang_min_s: float = 2.0
    startup_s: float = 300.0
    backoff_s: float = 1.0
    max_restarts: int = 20
    nodes: tuple[str, ...] = ("local-0",)
    exclude_after: int = 2
    injections: tuple[Injection, ...] = ()
    backend: str = "local"  # local: a process group here; slurm: the run's requeued batch job


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
    seen_steps: int = 0
    seen_checkpoints: int = 0
    last_progress: float = field(default_factory=time.time)
    max_step: int = 0
    reason: str = ""  # why the start was killed: hang, kill, node_loss
    injected: int | None = None  # which injection caused it
    stopped_at: float | None = None  # an injected hang: when the group was stopped
    killed_at: float | None = None
    adopted: bool = False  # a start left running by a supervisor that was stopped, watched again

    def hang_limit_s(self) -> float:
        if (
            not self.seen_steps or self.max_step >= self.settings.steps
        ):  # starting, or ending after the target
            return self.settings.startup_s
        median = statistics.median(self.intervals) if self.intervals else 0.0
        return max(self.settings.hang_min_s, self.settings.hang_factor * median)

    def ingest(self, metrics: Metrics, now: float) -> None:
        for step, _ in metrics.losses[self.seen_steps :]:
            if self.seen_steps or self.attempt == 0 or self.adopted:
                if self.seen_steps:
                    self.intervals.append(now - self.last_progress)
            else:
                self.journal.add(now - self.t0, "restart_end", node=self.node, attempt=self.attempt)
            self.journal.add_step(now - self.t0, step, self.attempt)
            self.seen_steps += 1
            self.last_progress = now
            self.max_step = max(self.max_step, step)
        for step in metrics.checkpoints[self.seen_checkpoints :]:
            self.seen_checkpoints += 1
            if self.adopted and any(
                e["attempt"] == self.attempt and e["step"] == step
                for e in self.journal.kinds("checkpoint_end")
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

    def __call__(self, metrics: Metrics) -> bool:
        now = time.time()
        self.ingest(metrics, now)
        if self.stop is not None and self.stop.requested():
            self.reason, self.killed_at = CANCELLED, now
            return True
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
                            os.killpg(
                                trainer, signal.SIGSTOP
                            )  # a real hang: the process is there, no step comes
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
            self.reason, self.killed_at = HANG, now
            return True
        return False


def _after_step(metrics_path: Path, journal: Journal) -> int:
    """The byte after the metrics line of the last step the journal recorded: where a stopped supervisor stopped
    reading (steps of one start only grow, so the last line of that step is this start's)."""
    if not journal.steps:
        return 0
    step = journal.steps[-1]["step"]
    data = metrics_path.read_bytes() if metrics_path.exists() else b""
    at = 0
    for offset, line in _lines(data):
        if line.startswith(b"{") and b'"loss"' in line:
            with contextlib.suppress(ValueError):
                if json.loads(line).get("step") == step:
                    at = offset
    return at


def _lines(data: bytes) -> list[tuple[int, bytes]]:
    """(the byte after each whole line, the line)."""
    out, start = [], 0
    while (end := data.find(b"\n", start)) >= 0:
        out.append((end + 1, data[start:end]))
        start = end + 1
    return out


def _sleep(seconds: float, stop: StopRequest | None) -> None:
    """Sleep, waking early when a stop is requested."""
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0 and not (stop is not None and stop.requested()):
        time.sleep(min(left, 0.1))


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def _next_node(names: list[str], excluded: set[str]) -> int | None:
    return next((i for i, name in enumerate(names) if name not in excluded), None)


def _excluded(journal: Journal) -> set[str]:
    return {str(e["detail"]).split()[0].removeprefix("node=") for e in journal.kinds("node_excluded")}


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def supervise(
    settings: RealRunSettings,
    folder: Path,
    on_progress: Callable[[int, int], None] | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    stop: StopRequest | None = None,
) -> Journal:
    """Run the trainer to `settings.steps` or `max_wall_s`, whichever comes first, restarting it after each
    failure; returns the journal of every event. Started again on a folder whose run did not end, it resumes.
    `on_event` is told of each event as it is written; `stop` ends the run early, its end `cancelled`."""
    try:
        return _supervise(settings, folder, on_progress, on_event, stop)
    finally:
        if settings.backend == "slurm":
            from campaign.execution import slurm

            slurm.finish(folder)  # nodes an injection took down back in service, no job left queued


def _supervise(
    settings: RealRunSettings,
    folder: Path,
    on_progress: Callable[[int, int], None] | None,
    on_event: Callable[[RunEvent], None] | None,
    stop: StopRequest | None,
) -> Journal:
    journal = Journal.open(folder)
    if journal.is_finished():
        return journal
    journal.listener = on_event
    metrics_path, logs, registry = folder / "metrics.jsonl", folder / "logs", folder / REGISTRY
    kill_registered_groups(
        registry
    )  # a start left by a supervisor that was killed (normally the kernel did it)
    fresh = not journal.events
    if fresh:
        t0 = time.time()
        journal.add(
            0.0,
            "job_start",
            detail=f"started_at={_iso(t0)} target_step={settings.steps} nodes={','.join(settings.nodes)}",
            started_at=t0,
        )
    adopt = False
    if not fresh:
        t0 = float(journal.events[0]["started_at"])
        last = max([e["t_s"] for e in journal.events] + [s["t_s"] for s in journal.steps])
        attempt = max(e["attempt"] for e in journal.events)
        node = next((e["node"] for e in reversed(journal.events) if e["node"] >= 0), 0)
        if settings.backend == "slurm":
            from campaign.execution import slurm

            adopt = slurm.is_running(folder)  # its job still trains: supervise it again, nothing was lost
    if adopt:
        journal.add(
            time.time() - t0,
            "supervisor_resumed",
            node=node,
            detail=f"slurm_job={slurm.current_job(folder)} still running; supervised again",
            attempt=attempt,
        )
    elif not fresh:
        journal.add(
            last,
            "failure",
            SUPERVISOR_LOST,
            "job",
            node,
            detail="organic: the supervisor stopped; its start was stopped with it",
            attempt=attempt,
        )
        journal.add(time.time() - t0, "detected", SUPERVISOR_LOST, "job", node, attempt=attempt)
    deadline_wall = t0 + settings.max_wall_s
    intervals: list[float] = []
    names = list(settings.nodes)  # node indices of the events; a Slurm host not listed is added when seen
    for detail in _excluded(journal) - set(names):
        names.append(detail)
    while True:
        failures = journal.kinds("failure")
        attempt = len(failures)
        excluded = _excluded(journal)
        fired = {e["injection"] for e in failures if e.get("injection") is not None}
        node = _next_node(names, excluded)
        now = time.time()
        cancel = stop.requested() if stop is not None else None
        if cancel or node is None or attempt > settings.max_restarts or now >= deadline_wall:
            why = (
                cancelled_detail(cancel)
                if cancel
                else "no node left (every node excluded)"
                if node is None
                else f"{attempt} failures: more than execute.max_restarts"
                if attempt > settings.max_restarts
                else "the window ended"
            )
            journal.add(now - t0, "window_end", detail=why, attempt=attempt)
            return journal
        if attempt and not adopt:
            journal.add(
                now - t0,
                "restart_start",
                node=node,
                detail=f"backoff_s={settings.backoff_s:g}",
                attempt=attempt,
            )
            _sleep(min(settings.backoff_s, max(0.0, deadline_wall - now)), stop)
            if stop is not None and stop.requested():
                continue  # the top of the loop ends the run, cancelled
        if not adopt:  # never cut a line a running trainer is writing
            drop_partial_line(metrics_path)
        label = f"attempt-{attempt}"
        lost_marker = folder / "nodes" / f"{names[node]}.lost"
        watch = _Watch(
            settings,
            journal,
            t0,
            attempt,
            node,
            logs / f"{label}.supervisor.json",
            lost_marker,
            intervals,
            fired,
            on_progress,
        )
        watch.last_progress = time.time()
        watch.adopted = adopt
        watch.stop = stop
        deadline = time.monotonic() + (deadline_wall - time.time())
        if settings.backend == "slurm":
            from campaign.execution import slurm

            job = slurm.current_job(folder)
            watch.stop_job = lambda: slurm.signal_job(slurm.current_job(folder) or "", "STOP")
            watch.lose_node = lambda: slurm.lose_job_node(folder)

            def submitted(
                job_id: str, first: bool = job is None, at: int = node, attempt: int = attempt
            ) -> None:
                what = "submitted" if first else "requeued"
                journal.add(
                    time.time() - t0, f"job_{what}", node=at, detail=f"slurm_job={job_id}", attempt=attempt
                )

            start, _, host, slurm_end = slurm.run_slurm_start(
                label,
                folder,
                settings.command,
                settings.env,
                metrics_path,
                logs,
                deadline,
                watch,
                sorted(excluded),
                submitted,
                adopt,
                _after_step(metrics_path, journal) if adopt else None,
            )
            if host and host not in names:
                names.append(host)
            if host:
                node = watch.node = names.index(host)
                lost_marker = folder / "nodes" / f"{host}.lost"
        else:
            slurm_end = ""
            start = run_start(
                label,
                settings.command,
                {**settings.env, ENV_NODE: names[node]},
                metrics_path,
                logs,
                deadline,
                kill_when=watch,
                registry=registry,
            )
        ended = time.time()
        adopt = False  # only the first start after a resume can be adopted
        # Lines read only after a stop or a kill were written before it: they are stamped with its time.
        watch.ingest(start.metrics, min(watch.stopped_at or ended, watch.killed_at or ended))
        if start.launch_error:
            journal.add(ended - t0, "window_end", detail=f"cannot start the trainer: {start.launch_error}")
            return journal
        last_step = max([start.metrics.last_step, *start.metrics.resumed])
        # The target reached and a clean exit is the end, even if a fault was due after the trainer's last line.
        if start.returncode == 0 and last_step >= settings.steps:
            tokens = last_step * settings.tokens_per_step
            journal.add(ended - t0, "job_complete", node=node, tokens_trained=tokens, attempt=attempt)
            journal.add(ended - t0, "window_end", detail="target step reached", attempt=attempt)
            return journal
        if start.timed_out:
            journal.add(ended - t0, "window_end", detail="the window ended", attempt=attempt)
            return journal
        if watch.reason == CANCELLED and stop is not None:  # asked to stop: the end, not a failure
            detail = cancelled_detail(stop.requested() or "stop requested")
            journal.add(
                ended - t0,
                "window_end",
                node=node,
                detail=f"{detail}; stopped after step {last_step}",
                attempt=attempt,
            )
            return journal
        injected = watch.injected if watch.reason or watch.stopped_at is not None else None
        kind = settings.injections[injected].kind if injected is not None else ""
        failed_at, detected_at = ended, ended
        if start.metrics.problems:
            category, detail = BAD_METRICS, f"organic: {start.metrics.problems[0]}"
        elif watch.reason == "node_loss" or lost_marker.exists() or slurm_end == "NODE_FAIL":
            category = NODE_LOST
            detail = "injected: node loss" if kind == "node_loss" else "organic: node lost"
            if slurm_end == "NODE_FAIL":
                detail += f" (node {names[node]} DOWN: Slurm ended the start NODE_FAIL and requeued the job)"
            elif watch.lose_error:
                detail += f" (not set DOWN: {watch.lose_error[:200]}; the start was killed on it)"
            failed_at = watch.killed_at or ended
        elif watch.reason == HANG:
            category = HANG
            failed_at = watch.stopped_at or watch.last_progress
            detected_at = watch.killed_at or ended
            detail = (
                f"{'injected' if kind == 'hang' else 'organic'}: no step for {detected_at - failed_at:.2f} s "
                f"(limit {watch.hang_limit_s():.2f} s)"
            )
        elif watch.reason == "kill":
            category, detail = KILL, "injected: SIGKILL of the trainer's process group"
            failed_at = watch.killed_at or ended
        elif start.returncode is None and slurm_end:
            category, detail = SIGNAL, f"organic: Slurm ended the start {slurm_end}"
        elif start.returncode is not None and start.returncode < 0:
            category, detail = SIGNAL, f"organic: killed by {_signal_name(start.returncode)}"
        else:
            category, detail = EXIT_CODE, f"organic: exit code {start.returncode} after step {last_step}"
        failed_at = max(failed_at, watch.last_progress)  # never before the last step the start wrote
        scope = "node" if category == NODE_LOST else "job"
        journal.add(
            failed_at - t0,
            "failure",
            category,
            scope,
            node,
            tokens_trained=last_step * settings.tokens_per_step,
            detail=detail,
            attempt=attempt,
            injection=injected if detail.startswith("injected") else None,
            step=last_step,
        )
        journal.add(detected_at - t0, "detected", category, scope, node, attempt=attempt)
        on_node = sum(1 for e in journal.kinds("failure") if e["node"] == node)
        if category == NODE_LOST or on_node >= settings.exclude_after:
            journal.add(
                detected_at - t0,
                "node_excluded",
                category,
                scope,
                node,
                detail=f"node={names[node]} failures={on_node}",
                attempt=attempt,
            )
        if category == NODE_LOST and settings.backend == "slurm":
            from campaign.execution import slurm

            slurm.return_nodes(folder)  # the loss is recorded: the node RESUMEs, excluded from this run's job

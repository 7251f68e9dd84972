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
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from campaign.execution.journal import EventListener, Journal
from campaign.execution.policy import (
    SHORT,
    STOPPED,
    TARGET,
    backoff_s,
    blame,
    no_progress_streak,
    node_failures,
    quote_stderr,
)
from campaign.execution.progress import ProgressLines
from campaign.execution.settings import (
    BAD_METRICS,
    BLAME_INJECTED,
    BLAME_NODE,
    BLAME_NONE,
    BLAME_SOFTWARE,
    EXIT_CODE,
    HANG,
    KILL,
    NODE_LOST,
    OPERATOR_CANCEL,
    SIGNAL,
    SUPERVISOR_LOST,
    RealRunSettings,
)
from campaign.execution.stopping import StopRequest, cancelled_detail
from campaign.execution.watch import (
    CANCELLED_STOP,
    NODE_LOSS_WAIT_S,
    WINDOW_END_STOP,
    _Watch,
    load_intervals,
    newest_checkpoint,
    save_intervals,
)
from campaign.rehearsal.processes import Start, drop_partial_line, kill_registered_groups, run_start

__all__ = ["NODE_LOSS_WAIT_S", "RealRunSettings", "_Watch", "supervise"]

REGISTRY = "trainers.json"
ENV_NODE = "CAMPAIGN_EXECUTE_NODE"  # the node a start runs on (a slot name on this machine, a host on Slurm)
SUPERVISOR_STATE = (
    "supervisor-state.json"  # the hang limit's history, kept for a supervisor that adopts the job
)


def _after_step(metrics_path: Path, journal: Journal) -> int:
    """The byte after the metrics line of the last step the journal recorded: where a stopped supervisor stopped
    reading (steps of one start only grow, so the last line of that step is this start's)."""
    if not journal.steps:
        return 0
    step = journal.steps[-1].step
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


def _sleep(seconds: float, stop: StopRequest | None, on_tick: Callable[[], None] | None = None) -> None:
    """Sleep, waking early when a stop is requested."""
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0 and not (stop is not None and stop.requested()):
        if on_tick is not None:
            on_tick()
        time.sleep(min(left, 0.1))


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def _next_node(names: list[str], excluded: set[str], after: int | None = None) -> int | None:
    """The first node not excluded; with `after`, the first one after it (in turn), so the next start runs
    elsewhere where it can."""
    order = list(range(len(names)))
    if after is not None and 0 <= after < len(names):
        order = order[after + 1 :] + order[: after + 1]
    return next((i for i in order if names[i] not in excluded), None)


def _excluded(journal: Journal) -> set[str]:
    return {e.detail.split()[0].removeprefix("node=") for e in journal.kinds("node_excluded")}


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def supervise(
    settings: RealRunSettings,
    folder: Path,
    on_progress: Callable[[int, int], None] | None = None,
    on_event: EventListener | None = None,
    stop: StopRequest | None = None,
    on_tick: Callable[[], None] | None = None,
    progress: ProgressLines | None = None,
) -> Journal:
    """Run the trainer to `settings.steps` or `max_wall_s`, whichever comes first, restarting it after each
    failure; returns the journal of every event. Started again on a folder whose run did not end, it resumes.
    `on_event` is told of each event as it is written; `stop` ends the run early, its end `cancelled`;
    `on_tick` is called at every poll and while backing off; `progress` says how the run goes in lines."""
    if progress is not None:
        on_progress, on_tick = _with_progress(progress, on_progress, on_tick)
    try:
        return _supervise(settings, folder, on_progress, on_event, stop, on_tick, progress)
    finally:
        if settings.backend == "slurm":
            from campaign.execution import slurm

            slurm.finish(folder)  # nodes an injection took down back in service, no job left queued


def _with_progress(
    progress: ProgressLines,
    on_progress: Callable[[int, int], None] | None,
    on_tick: Callable[[], None] | None,
) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    def stepped(step: int, steps: int) -> None:
        if on_progress is not None:
            on_progress(step, steps)
        progress.step(step)

    def ticked() -> None:
        if on_tick is not None:
            on_tick()
        progress.tick()

    return stepped, ticked


def _end(journal: Journal, t_s: float, detail: str, outcome: str, attempt: int, node: int = -1) -> Journal:
    journal.add(t_s, "window_end", node=node, detail=detail, attempt=attempt, outcome=outcome)
    return journal


def _read_back(
    metrics_path: Path, journal: Journal, t0: float, last_s: float, attempt: int, node: int
) -> float:
    """Steps and checkpoints the trainer wrote that no supervisor read (it was down): into the journal, at the
    line's own `time` where it has one, else spread evenly up to the metrics file's last write. Returns the time
    of the last line read back (or `last_s`)."""
    if not metrics_path.exists():
        return last_s
    data = metrics_path.read_bytes()[_after_step(metrics_path, journal) :]
    rows = []
    for _, line in _lines(data):
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and isinstance(record.get("step"), int):
                rows.append(record)
    done = {(s.attempt, s.step) for s in journal.steps}
    seen = {(e.attempt, e.step) for e in journal.kinds("checkpoint_end")}
    furthest = max([s.step for s in journal.steps if s.attempt == attempt], default=0)
    rows = [
        r
        for r in rows
        if ("loss" in r and r["step"] > furthest and (attempt, r["step"]) not in done)
        or (r.get("event") == "checkpoint" and (attempt, r["step"]) not in seen)
    ]
    if not rows:
        return last_s
    written_s = max(metrics_path.stat().st_mtime - t0, last_s)
    for i, r in enumerate(rows):
        stamp = r.get("time")
        t_s = (
            float(stamp) - t0
            if isinstance(stamp, (int, float))
            else last_s + (written_s - last_s) * (i + 1) / len(rows)
        )
        if "loss" in r:
            journal.add_step(t_s, r["step"], attempt)
        else:
            journal.add(
                t_s,
                "checkpoint_end",
                node=node,
                detail=f"step={r['step']} (read back: written unsupervised)",
                attempt=attempt,
                step=r["step"],
                tokens_trained=0.0,
            )
        last_s = max(last_s, t_s)
    return last_s


def _supervise(
    settings: RealRunSettings,
    folder: Path,
    on_progress: Callable[[int, int], None] | None,
    on_event: EventListener | None,
    stop: StopRequest | None,
    on_tick: Callable[[], None] | None = None,
    progress: ProgressLines | None = None,
) -> Journal:
    journal = Journal.open(folder)
    if journal.is_finished():
        return journal
    journal.listener = on_event
    if progress is not None:
        progress.journal = journal
        journal.row_listener = progress.event
    metrics_path, logs, registry = folder / "metrics.jsonl", folder / "logs", folder / REGISTRY
    kill_registered_groups(
        registry
    )  # a start left by a supervisor that was killed (normally the kernel did it)
    fresh = not journal.events
    intervals: list[float] = [] if fresh else load_intervals(folder)
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
        t0 = journal.started_at()
        last = max([e.t_s for e in journal.events] + [s.t_s for s in journal.steps])
        attempt = max(e.attempt for e in journal.events)
        last_node = next((e.node for e in reversed(journal.events) if e.node >= 0), 0)
        if settings.backend == "slurm":
            from campaign.execution import slurm

            adopt = slurm.is_running(folder)  # its job still trains: supervise it again, nothing was lost
    if adopt:
        journal.add(
            time.time() - t0,
            "supervisor_resumed",
            node=last_node,
            detail=f"slurm_job={slurm.current_job(folder)} still running; supervised again",
            attempt=attempt,
        )
    elif not fresh:
        # what the trainer wrote while nobody watched is trained: read it back before the gap is a failure
        last = _read_back(metrics_path, journal, t0, last, attempt, last_node)
        journal.add(
            last,
            "failure",
            SUPERVISOR_LOST,
            "job",
            last_node,
            detail="organic: the supervisor stopped; its start was stopped with it",
            attempt=attempt,
            blame=BLAME_NONE,
            progressed=True,
        )
        journal.add(time.time() - t0, "detected", SUPERVISOR_LOST, "job", last_node, attempt=attempt)
    deadline_wall = t0 + settings.max_wall_s
    names = list(settings.nodes)  # node indices of the events; a Slurm host not listed is added when seen
    for detail in _excluded(journal) - set(names):
        names.append(detail)
    while True:
        failures = journal.kinds("failure")
        attempt = len(failures)
        excluded = _excluded(journal)
        fired = {e.injection for e in failures if e.injection is not None}
        streak = no_progress_streak(journal)
        # after a failure that passed no new step, the next start runs on another node: the same failure there
        # says it is the software's
        after = failures[-1].node if failures and failures[-1].blame == BLAME_SOFTWARE else None
        node = _next_node(names, excluded, after)
        now = time.time()
        cancel = stop.requested() if stop is not None else None
        if cancel:
            return _end(journal, now - t0, cancelled_detail(cancel), STOPPED, attempt)
        # given up right after a failure: the run ended with that failure, not when the supervisor said so
        given_up = max(e.t_s for e in journal.events)
        if streak > settings.max_no_progress_restarts:
            return _end(journal, given_up, _software_detail(journal, names, streak, settings), SHORT, attempt)
        if node is None or attempt > settings.max_restarts or now >= deadline_wall:
            why = (
                "no node left (every node excluded)"
                if node is None
                else f"{attempt} failures: more than execute.max_restarts"
                if attempt > settings.max_restarts
                else "the window ended"
            )
            return _end(journal, given_up if now < deadline_wall else now - t0, why, SHORT, attempt)
        if attempt and not adopt:
            wait = backoff_s(settings, journal)
            journal.add(now - t0, "restart_start", node=node, detail=f"backoff_s={wait:g}", attempt=attempt)
            _sleep(min(wait, max(0.0, deadline_wall - now)), stop, on_tick)
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
        watch.adopted = watch.replay_batch = adopt
        watch.stop = stop
        watch.deadline_wall = deadline_wall
        watch.high_water = max([s.step for s in journal.steps], default=0)
        if adopt:  # the adopted start's furthest step so far: a line at or below it is no progress
            watch.max_step = max([s.step for s in journal.steps if s.attempt == attempt], default=0)
            watch.new_steps = 1 if watch.max_step else 0
        watch.on_tick = on_tick
        watch.state_folder = folder  # the hang limit's history, for a supervisor that adopts the job
        # the watch ends the window itself (gracefully): the start's own deadline leaves it the grace
        deadline = time.monotonic() + (deadline_wall - time.time()) + settings.stop_grace_s + 15.0
        if settings.backend == "slurm":
            from campaign.execution import slurm

            job = slurm.current_job(folder)
            watch.stop_job = lambda: slurm.signal_job(slurm.current_job(folder) or "", "STOP")
            watch.lose_node = lambda: slurm.lose_job_node(folder)
            watch.send_signal = lambda name: slurm.signal_job(
                slurm.current_job(folder) or "", name.removeprefix("SIG")
            )

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
        if intervals:
            save_intervals(folder, intervals)
        if start.launch_error:
            return _end(
                journal, ended - t0, f"cannot start the trainer: {start.launch_error}", SHORT, attempt
            )
        last_step = max([watch.max_step, *start.metrics.resumed])
        # The target reached and a clean exit is the end, even if a fault was due after the trainer's last line.
        if start.returncode == 0 and last_step >= settings.steps:
            # the job reached its target with its last line: the trainer's exit after it is not the job's time
            done = max([s.t_s for s in journal.steps if s.attempt == attempt], default=ended - t0)
            done = max([done] + [e.t_s for e in journal.kinds("checkpoint_end") if e.attempt == attempt])
            tokens = last_step * settings.tokens_per_step
            journal.add(done, "job_complete", node=node, tokens_trained=tokens, attempt=attempt)
            return _end(journal, done, "target step reached", TARGET, attempt)
        stopped = _stopped_by(watch, start.killed_by_harness, settings)
        # a start that ended by the stop signal within its grace ended when it was told: what follows is its exit
        told = watch.signalled_at if watch.signalled_at is not None and not start.killed_by_harness else ended
        if watch.reason == WINDOW_END_STOP or start.timed_out:
            return _end(
                journal, told - t0, f"the window ended at step {last_step}{stopped}", SHORT, attempt, node
            )
        if watch.reason == CANCELLED_STOP and stop is not None:  # asked to stop: the end, not a failure
            detail = cancelled_detail(stop.requested() or "stop requested")
            return _end(
                journal,
                told - t0,
                f"{detail}; stopped after step {last_step}{stopped}",
                STOPPED,
                attempt,
                node,
            )
        if slurm_end == "CANCELLED" and not watch.reason and settings.on_operator_cancel == "stop":
            detail = "stopped: the job was cancelled outside campaign (an operator's scancel)"
            return _end(
                journal, ended - t0, f"{detail}; stopped after step {last_step}", STOPPED, attempt, node
            )
        _record_failure(
            journal, settings, folder, names, watch, start, slurm_end, lost_marker, ended, last_step, stopped
        )


def _stopped_by(watch: _Watch, killed: bool, settings: RealRunSettings) -> str:
    """How a start the supervisor stopped ended: by the stop signal within its grace, or SIGKILL after it."""
    if watch.signalled_at is None:
        return f" (ended by {watch.ended_by})" if watch.ended_by else ""
    if killed:
        return f" ({settings.stop_signal}, then SIGKILL after the {settings.stop_grace_s:g} s grace)"
    took = max(0.0, time.time() - watch.signalled_at)
    return f" (ended by {settings.stop_signal} within its grace, in about {took:.1f} s)"


def _software_detail(journal: Journal, names: list[str], streak: int, settings: RealRunSettings) -> str:
    failures = [f for f in journal.kinds("failure") if f.blame not in (BLAME_INJECTED, BLAME_NONE)]
    last = failures[-streak:]
    nodes = sorted({names[f.node] for f in last if 0 <= f.node < len(names)})
    furthest = max([s.step for s in journal.steps], default=0)
    where = "before any step" if not furthest else f"without passing step {furthest}"
    said = next((f.stderr for f in reversed(last) if f.stderr), "")
    return (
        f"software failure: {streak} starts in a row failed {where} (on {', '.join(nodes)}; last: "
        f"{last[-1].detail.removeprefix('organic: ')}), more than execute.max_no_progress_restarts "
        f"({settings.max_no_progress_restarts}); no node is blamed"
        + (f"; the trainer's stderr ends: {said}" if said else "; the trainer wrote nothing on stderr")
    )


def _record_failure(
    journal: Journal,
    settings: RealRunSettings,
    folder: Path,
    names: list[str],
    watch: _Watch,
    start: Start,
    slurm_end: str,
    lost_marker: Path,
    ended: float,
    last_step: int,
    stopped: str,
) -> None:
    """The failure that ended a start: classified, blamed, recorded with its detection, and its node excluded
    when failures that point at it reach `exclude_after` (a lost node at once)."""
    t0, node, attempt = watch.t0, watch.node, watch.attempt
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
        note = watch.no_progress_note()
        detail = (
            f"{'injected' if kind == 'hang' else 'organic'}: no new step for {detected_at - failed_at:.2f} s "
            f"(limit {watch.hang_limit_s():.2f} s)" + (f"; {note}" if note else "") + stopped
        )
    elif watch.reason == "kill":
        category, detail = KILL, "injected: SIGKILL of the trainer's process group"
        failed_at = watch.killed_at or ended
    elif slurm_end == "CANCELLED" and not watch.reason:
        category, detail = (
            OPERATOR_CANCEL,
            "organic: the job was cancelled outside campaign (scancel); requeued",
        )
    elif start.returncode is None and slurm_end:
        category, detail = SIGNAL, f"organic: Slurm ended the start {slurm_end}"
    elif start.returncode is not None and start.returncode < 0:
        category, detail = SIGNAL, f"organic: killed by {_signal_name(start.returncode)}"
    else:
        category, detail = EXIT_CODE, f"organic: exit code {start.returncode} after step {last_step}"
    if category in (EXIT_CODE, SIGNAL) and not slurm_end:  # it ended by itself: when its stderr last moved
        with contextlib.suppress(OSError):
            failed_at = detected_at = min(ended, max(start.stderr_path.stat().st_mtime, watch.last_progress))
    failed_at = max(failed_at, watch.last_progress)  # never before the last step the start wrote
    progressed = watch.max_step > watch.high_water
    who = (
        BLAME_NONE
        if category == OPERATOR_CANCEL
        else blame(category, detail.startswith("injected"), progressed)
    )
    said = quote_stderr(start.stderr_tail())
    if who == BLAME_SOFTWARE and said:
        detail += f"; stderr: {said.split(' | ')[-1]}"
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
        blame=who,
        progressed=progressed,
        stderr=said,
    )
    journal.add(detected_at - t0, "detected", category, scope, node, attempt=attempt)
    newest = newest_checkpoint(journal)
    said_before = [e.event_id for e in journal.kinds("checkpoint_unloadable")]
    since = said_before and not any(e.event_id > said_before[-1] for e in journal.kinds("restart_end"))
    if (
        not (watch.new_steps or watch.resumed_from is not None or since or category == SUPERVISOR_LOST)
        and newest
    ):
        journal.add(  # nothing loaded the newest checkpoint: not counted as trained until a start does
            detected_at - t0,
            "checkpoint_unloadable",
            node=node,
            detail=f"the start failed before it resumed from checkpoint {newest} or wrote a step; that "
            f"checkpoint is not counted as trained unless a later start loads it",
            attempt=attempt,
            step=newest,
        )
    on_node = node_failures(journal, node)
    if category == NODE_LOST or (who == BLAME_NODE and on_node >= settings.exclude_after):
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

"""Supervise a multi-node run on Slurm: every rank's heartbeat, node losses replaced by spares, stragglers, and
what to do when no spare is left.

The allocation (`campaign.execution.allocation`) holds the job's nodes and its spares; each start of the trainer
is one `srun` step on `job_nodes` of them, one rank per node, meeting at rank 0's node. Every rank appends a line
per step to `ranks/attempt-N/rank-R.jsonl` (its heartbeat: the step, and the seconds it computed before the
collective); rank 0 writes the contract's metrics file. The supervisor reads both at every poll:

- a start that writes no step for the hang limit (as the one-node supervisor's) is hung and killed, every rank;
- a rank whose median compute time over its last steps is `straggler_factor` times the others' is a straggler:
  a `straggler` event names its node and rank; with `stragglers: exclude` the start is ended, the node excluded
  and a spare takes its place (with `record` it is only recorded);
- a node Slurm has as failed (DOWN, DRAIN: the step ended on every rank) is a `node_lost` failure on that node; the
  node is excluded at once and the next start runs on a spare (`spare_swap`), with the same world size, from the
  last complete checkpoint;
- with no spare left, `elastic`: `shrink` starts again on the nodes left (the trainer keeps the global batch by
  gradient accumulation over the same gradient shards, so the losses stay those of the full world), `wait` waits
  for an excluded node to come back into service (`waiting_start`/`waiting_end`), `stop` ends the run.

Events are the simulator's (`spare_swap`, `spares_exhausted`, `waiting_start`, ...) with real seconds; a supervisor
killed half-way and started again adopts the start that still runs (the allocation says which), never starting a
second copy of a rank.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Unpack

from campaign.execution import allocation, slurm
from campaign.execution.journal import EventListener, Journal, JournalEvent
from campaign.execution.journal_lines import EventKeys
from campaign.execution.stopping import CANCELLED, StopRequest, cancelled_detail
from campaign.execution.supervisor import (
    EXIT_CODE,
    HANG,
    KILL,
    NODE_LOST,
    SIGNAL,
    SUPERVISOR_LOST,
    RealRunSettings,
)
from campaign.rehearsal.contract import Metrics
from campaign.rehearsal.processes import POLL_S, MetricsTail, drop_partial_line

STRAGGLER = "straggler"
STRAGGLER_WINDOW = 8  # steps of each rank's compute time a straggler is judged on
STEP_END_WAIT_S = 60.0  # a start told to end that has not ended by then: its allocation is given up
PORT_BASE, PORT_SPAN = 20000, 30000


@dataclass(frozen=True)
class MultiNodeSettings:
    """A multi-node run: the one-node run's settings and its nodes, spares and policies."""

    run: RealRunSettings
    job_nodes: int
    spare_nodes: int = 0
    stragglers: str = "record"  # exclude | record
    straggler_factor: float = 3.0
    elastic: str = "stop"  # shrink | wait | stop
    partition: str | None = None


@dataclass
class _Rank:
    node: str
    offset: int = 0
    last_step: int = 0
    compute_s: list[float] = field(default_factory=list)


@dataclass
class _Start:
    """What the supervisor saw of one start."""

    attempt: int
    ranks: list[str]
    world: int
    seen_steps: int = 0  # steps that were progress
    seen_lines: int = 0  # step lines read, progress or not
    seen_checkpoints: int = 0
    max_step: int = 0
    last_progress: float = field(default_factory=time.time)
    intervals: list[float] = field(default_factory=list)
    reason: str = ""
    killed_at: float | None = None
    stopped_at: float | None = None
    injected: int | None = None
    lost: str = ""  # the node an injected node loss took down
    straggler: str = ""
    named: set[str] = field(default_factory=set)  # stragglers already recorded
    rank_beats: dict[int, _Rank] = field(default_factory=dict)
    adopted: bool = False
    repeats: int = 0  # step lines at or below the start's furthest step: no progress, never trained twice
    went_back: tuple[int, int] | None = None  # (furthest, lower) the first time the step number went back
    resumed_steps: int = 0  # steps an adopted start trained before this supervisor (seen by the one before)


def _named(event: JournalEvent) -> str:
    return event.detail.split()[0].removeprefix("node=")


def _excluded(journal: Journal) -> list[str]:
    """The nodes excluded and not readmitted since (a `repair_done` readmits a repaired node)."""
    out: list[str] = []
    for e in sorted(journal.kinds("node_excluded") + journal.kinds("repair_done"), key=lambda e: e.event_id):
        name = _named(e)
        if e.kind == "node_excluded":
            out.append(name)
        elif name in out:
            out.remove(name)
    return out


def _repairable(journal: Journal) -> list[str]:
    """The excluded nodes a repair can bring back: those lost (a straggler stays excluded: Slurm repairs nothing)."""
    lost = {_named(e) for e in journal.kinds("node_excluded") if e.category == NODE_LOST}
    return [n for n in _excluded(journal) if n in lost]


def _port(job_id: str, attempt: int) -> int:
    """The rendezvous port of a start: one per start, so a new start never meets an old one's ranks."""
    return PORT_BASE + (int(job_id) * 131 + attempt * 17) % PORT_SPAN if job_id.isdigit() else PORT_BASE


def _read_ranks(directory: Path, start: _Start) -> None:
    for path in sorted(directory.glob("rank-*.jsonl")) if directory.exists() else []:
        rank = int(path.stem.removeprefix("rank-"))
        beat = start.rank_beats.setdefault(rank, _Rank(start.ranks[rank] if rank < len(start.ranks) else ""))
        with open(path, "rb") as handle:
            handle.seek(beat.offset)
            data = handle.read()
        keep = data.rfind(b"\n") + 1
        beat.offset += keep
        for line in data[:keep].decode(errors="replace").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if row.get("event") == "up":
                beat.node = str(row.get("node") or beat.node)
            elif "step" in row:
                beat.last_step = int(row["step"])
                beat.compute_s.append(float(row.get("compute_s", 0.0)))


def straggler(
    beats: dict[int, _Rank], factor: float, window: int = STRAGGLER_WINDOW
) -> tuple[int, float, float] | None:
    """(rank, its median compute seconds, the others' median) of the slowest rank if it is `factor` times the
    others, judged once every rank has `window` steps; else None."""
    if len(beats) < 2 or any(len(b.compute_s) < window for b in beats.values()):
        return None
    medians = {r: statistics.median(b.compute_s[-window:]) for r, b in beats.items()}
    slow = max(medians, key=lambda r: medians[r])
    others = statistics.median([m for r, m in medians.items() if r != slow])
    if others > 0 and medians[slow] >= factor * others:
        return slow, medians[slow], others
    return None


def supervise_multinode(
    settings: MultiNodeSettings,
    folder: Path,
    on_progress: Callable[[int, int], None] | None = None,
    on_event: EventListener | None = None,
    stop: StopRequest | None = None,
) -> Journal:
    """Run the trainer on `job_nodes` ranks to the target step or the window's end, replacing lost nodes with
    spares; returns the journal. Started again on a folder whose run did not end, it adopts or resumes."""
    finished = False
    try:
        journal = _Supervisor(settings, folder, on_progress, stop).run(on_event)
        finished = journal.is_finished()
        return journal
    finally:
        if finished or not allocation.alive(folder) or stop is not None:
            allocation.release(folder)
        slurm.return_nodes(folder)  # nodes an injected loss took down, back in service


class _Supervisor:
    def __init__(
        self,
        settings: MultiNodeSettings,
        folder: Path,
        on_progress: Callable[[int, int], None] | None,
        stop: StopRequest | None,
    ) -> None:
        self.s, self.run_s, self.folder = settings, settings.run, folder
        self.on_progress, self.stop = on_progress, stop
        self.metrics_path = folder / "metrics.jsonl"
        self.heartbeat = folder / slurm.HEARTBEAT
        self.names: list[str] = []
        self.want: list[str] = []  # the nodes the next allocation asks for by name (a repaired node back)
        self.journal = Journal.open(folder)
        self.t0 = 0.0

    # ------------------------------------------------------------------------------------------ events
    def node(self, name: str) -> int:
        if name not in self.names:
            self.names.append(name)
        return self.names.index(name)

    def add(
        self,
        kind: str,
        at: float | None = None,
        category: str = "",
        scope: str = "",
        node: int = -1,
        tokens_trained: float = 0.0,
        detail: str = "",
        attempt: int = 0,
        **keys: Unpack[EventKeys],
    ) -> None:
        t_s = (at if at is not None else time.time()) - self.t0
        self.journal.add(t_s, kind, category, scope, node, tokens_trained, detail, attempt, **keys)

    def sleep(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0 and not (
            self.stop is not None and self.stop.requested()
        ):
            self.heartbeat.touch()
            time.sleep(min(left, 0.2))

    # --------------------------------------------------------------------------------------------- run
    def run(self, on_event: EventListener | None) -> Journal:
        j = self.journal
        if j.is_finished():
            return j
        j.listener = on_event
        self.folder.mkdir(parents=True, exist_ok=True)
        self.heartbeat.touch()
        adopt = False
        if not j.events:
            self.t0 = time.time()
            j.add(
                0.0,
                "job_start",
                detail=f"started_at={_iso(self.t0)} target_step={self.run_s.steps} job_nodes={self.s.job_nodes} "
                f"spare_nodes={self.s.spare_nodes}",
                started_at=self.t0,
            )
        else:
            self.t0 = j.started_at()
            starts = j.kinds("start")
            self.names = list(starts[-1].names or ()) if starts else []
            attempt = len(j.kinds("failure"))
            adopt = (
                allocation.alive(self.folder)
                and allocation.requested(self.folder, attempt)
                and allocation.exit_code(self.folder, attempt) is None
            )
            if adopt:
                self.add(
                    "supervisor_resumed",
                    detail=f"start {attempt} still running; supervised again",
                    attempt=attempt,
                )
            else:
                last = max([e.t_s for e in j.events] + [s.t_s for s in j.steps])
                j.add(
                    last,
                    "failure",
                    SUPERVISOR_LOST,
                    "job",
                    detail="organic: the supervisor stopped",
                    attempt=attempt,
                )
                self.add("detected", category=SUPERVISOR_LOST, scope="job", attempt=attempt)
                known = allocation.recorded(self.folder)
                if known is not None and allocation.alive(self.folder):
                    allocation.signal_steps(known.job_id, "KILL")
        deadline = self.t0 + self.run_s.max_wall_s
        while True:
            attempt = len(j.kinds("failure"))
            cancel = self.stop.requested() if self.stop is not None else None
            now = time.time()
            if cancel or attempt > self.run_s.max_restarts or now >= deadline:
                why = (
                    cancelled_detail(cancel)
                    if cancel
                    else f"{attempt} failures: more than execute.max_restarts"
                    if attempt > self.run_s.max_restarts
                    else "the window ended"
                )
                self.add("window_end", detail=why, attempt=attempt)
                return j
            alloc = self.ensure_allocation(attempt, deadline)
            if alloc is None:
                continue  # the loop's top ends the run (deadline or stop)
            if isinstance(alloc, str):
                self.add("window_end", detail=alloc, attempt=attempt)
                return j
            ranks = self.place(alloc, attempt, deadline) if not adopt else self.adopted_ranks(attempt)
            if ranks is None:
                continue  # a new allocation, with the repaired node
            if isinstance(ranks, str):
                self.add("window_end", detail=ranks, attempt=attempt)
                return j
            start = self.start(alloc, ranks, attempt, adopt)
            adopt = False
            ended = self.outcome(start, alloc)
            if ended:
                return j

    def adopted_ranks(self, attempt: int) -> list[str]:
        for e in reversed(self.journal.kinds("start")):
            if e.attempt == attempt:
                return list(e.nodes or ())
        return []

    def ensure_allocation(self, attempt: int, deadline: float) -> allocation.Allocation | str | None:
        """The running allocation (submitted if there is none), None when the deadline or a stop came first,
        or why there can be none."""
        if not allocation.alive(self.folder):
            allocation.set_next(self.folder, attempt)
            nodes = self.s.job_nodes + self.s.spare_nodes
            try:
                job = allocation.submit(
                    self.folder,
                    self.run_s.command,
                    self.run_s.env,
                    nodes,
                    _excluded(self.journal),
                    self.s.partition,
                    self.want,
                )
                self.want = []
            except (RuntimeError, OSError) as exc:
                return f"cannot submit the allocation: {exc}"
            self.add("job_submitted", detail=f"slurm_job={job} nodes={nodes}", attempt=attempt)
        while (alloc := allocation.running_nodes(self.folder)) is None:
            if time.time() >= deadline or (self.stop is not None and self.stop.requested()):
                return None
            if not allocation.alive(self.folder):
                return "the allocation ended before it ran"
            self.sleep(0.5)
        return alloc

    def place(self, alloc: allocation.Allocation, attempt: int, deadline: float) -> list[str] | str | None:
        """The nodes of the next start: the job's nodes, a spare for each excluded one; with none left, the
        elastic policy's answer (fewer nodes, a wait, or why the run stops); None when a repaired node needs a new
        allocation."""
        j, s = self.journal, self.s
        while True:
            excluded = set(_excluded(j))
            lost = set(allocation.lost_nodes(list(alloc.nodes)))
            healthy = [n for n in alloc.nodes if n not in excluded and n not in lost]
            if len(healthy) >= s.job_nodes:
                break
            if not j.kinds("spares_exhausted") or j.kinds("spares_exhausted")[-1].attempt != attempt:
                self.add(
                    "spares_exhausted",
                    detail=f"{len(healthy)} of {s.job_nodes} nodes healthy; elastic={s.elastic}",
                    attempt=attempt,
                )
            if s.elastic == "shrink" and healthy:
                world = len(healthy)
                if not j.kinds("elastic_shrink") or j.kinds("elastic_shrink")[-1].attempt != attempt:
                    self.add(
                        "elastic_shrink",
                        detail=f"world={world} of {s.job_nodes}: the global batch kept by "
                        "gradient accumulation",
                        attempt=attempt,
                    )
                return healthy[:world]
            if s.elastic != "wait":
                return f"no spare left ({len(healthy)} of {s.job_nodes} nodes healthy; elastic={s.elastic})"
            back = [
                n for n in _repairable(j) if (state := slurm.node_state(n)) and not slurm.is_node_lost(state)
            ]
            if back:  # a repaired node is back in service: readmitted
                self.add(
                    "waiting_end",
                    detail=f"node={back[0]} back in service",
                    attempt=attempt,
                    node=self.node(back[0]),
                )
                self.add("repair_done", node=self.node(back[0]), detail=f"node={back[0]}", attempt=attempt)
                if back[0] in alloc.nodes:
                    return [*healthy, back[0]][: s.job_nodes]
                # Slurm took the failed node out of the allocation (--no-kill) and cannot give it back to a
                # running job: the allocation is given up and one of the same nodes submitted
                self.want = [*healthy, back[0]]
                allocation.release(self.folder)
                until = time.monotonic() + STEP_END_WAIT_S
                while allocation.alive(self.folder) and time.monotonic() < until:
                    self.sleep(0.2)
                return None
            if not j.kinds("waiting_start") or j.kinds("waiting_start")[-1].attempt != attempt:
                self.add(
                    "waiting_start", detail="no spare left; waiting for a repaired node", attempt=attempt
                )
            if time.time() >= deadline or (self.stop is not None and self.stop.requested()):
                return "no spare left and no node came back before the window ended"
            self.sleep(1.0)
        ranks = healthy[: s.job_nodes]
        before = set(self.adopted_ranks(attempt - 1)) if attempt else set(ranks)
        gone = [n for n in before if n not in ranks]
        for slot, name in enumerate(ranks):
            if attempt and name not in before:
                replaced = gone.pop(0) if gone else ""
                self.add(
                    "spare_swap",
                    node=self.node(name),
                    detail=f"slot={slot} node={name} replaces={replaced}",
                    attempt=attempt,
                )
        return ranks

    def start(self, alloc: allocation.Allocation, ranks: list[str], attempt: int, adopt: bool) -> _Start:
        """Ask for start `attempt` on `ranks` (or adopt it) and watch it until it ends."""
        world = len(ranks)
        start = _Start(attempt, ranks, world, adopted=adopt)
        ranks_dir = self.folder / "ranks" / f"attempt-{attempt}"
        start_byte = 0
        if not adopt:
            if attempt:
                self.add(
                    "restart_start",
                    node=self.node(ranks[0]),
                    detail=f"backoff_s={self.run_s.backoff_s:g}",
                    attempt=attempt,
                )
                self.sleep(self.run_s.backoff_s)
            drop_partial_line(self.metrics_path)
            start_byte = self.metrics_path.stat().st_size if self.metrics_path.exists() else 0
            coordinator = f"{allocation.node_address(ranks[0])}:{_port(alloc.job_id, attempt)}"
            allocation.request_start(
                self.folder,
                attempt,
                {
                    "CAMPAIGN_RANK_NODES": ",".join(ranks),
                    "CAMPAIGN_DIST_WORLD": str(world),
                    "CAMPAIGN_DIST_SHARDS": str(self.s.job_nodes),
                    "CAMPAIGN_DIST_COORDINATOR": coordinator,
                    "CAMPAIGN_DIST_RANKS_DIR": str(ranks_dir),
                },
            )
            for name in ranks:
                self.node(name)
            self.add(
                "start",
                node=self.node(ranks[0]),
                detail=f"world={world} nodes={','.join(ranks)} "
                f"slurm_job={alloc.job_id} rendezvous={coordinator}",
                attempt=attempt,
                nodes=tuple(ranks),
                names=tuple(self.names),
            )
        else:
            start_byte = _after_step(self.metrics_path, self.journal)
            done = [s for s in self.journal.steps if s.attempt == attempt]
            start.max_step = max((s.step for s in done), default=0)
            start.resumed_steps = len(done)  # the tail starts after them: its lines are all new
        tail = MetricsTail(self.metrics_path, start_byte, 1)
        until = time.monotonic() + (self.t0 + self.run_s.max_wall_s - time.time())
        while True:
            self.heartbeat.touch()
            tail.poll()
            now = time.time()
            self.ingest(start, tail.metrics, now)
            _read_ranks(ranks_dir, start)
            if allocation.exit_code(self.folder, attempt) is not None:
                break
            if not allocation.alive(self.folder):
                start.reason = start.reason or "allocation_lost"
                break
            if start.reason:  # told to end: wait for the step to end on every rank
                if now - (start.killed_at or now) > STEP_END_WAIT_S:
                    break
                time.sleep(POLL_S)
                continue
            self.check(start, alloc, now)
            if time.monotonic() > until:
                start.reason, start.killed_at = "timed_out", now
                allocation.signal_steps(alloc.job_id, "KILL")
            time.sleep(POLL_S)
        tail.poll()
        self.ingest(start, tail.metrics, min(start.stopped_at or time.time(), start.killed_at or time.time()))
        _read_ranks(ranks_dir, start)
        # The start's last beats may show a straggler that a fault ending it in the same poll kept from being judged.
        self.judge_stragglers(start, alloc, time.time(), may_end=False)
        return start

    def check(self, start: _Start, alloc: allocation.Allocation, now: float) -> None:
        """Stops, injected faults, hangs and stragglers: each may end the start."""
        run = self.run_s
        if self.stop is not None and self.stop.requested():
            start.reason, start.killed_at = CANCELLED, now
            allocation.signal_steps(alloc.job_id, "KILL")
            return
        for index, injection in enumerate(run.injections):
            fired = {e.injection for e in self.journal.kinds("failure")}
            if index in fired or start.max_step < injection.step or start.stopped_at is not None:
                continue
            start.injected = index
            if injection.kind == "hang":
                allocation.signal_steps(alloc.job_id, "STOP")  # every rank stops: no step comes
                start.stopped_at = now
                return
            if injection.kind == "node_loss":
                victim = start.ranks[-1]  # never the batch host (the first node) when there are two ranks
                why = slurm.lose_node(self.folder, victim, "campaign: injected node loss")
                start.lost = victim
                start.reason, start.killed_at = "node_loss", now
                if why:  # not an operator here: the rank's step is ended instead
                    allocation.signal_steps(alloc.job_id, "KILL")
                return
            start.reason, start.killed_at = KILL, now
            allocation.signal_steps(alloc.job_id, "KILL")
            return
        if (start.seen_steps or start.resumed_steps) and start.max_step < run.steps:
            median = statistics.median(start.intervals) if start.intervals else 0.0
            limit = max(run.hang_min_s, run.hang_factor * median)
        else:
            limit = run.startup_s
        if now - start.last_progress > limit:
            start.reason, start.killed_at = HANG, now
            allocation.signal_steps(alloc.job_id, "KILL")
            return
        self.judge_stragglers(start, alloc, now, may_end=True)

    def judge_stragglers(
        self, start: _Start, alloc: allocation.Allocation, now: float, may_end: bool
    ) -> None:
        """Name a straggler once per start; with `stragglers: exclude` (and the start still running) end it."""
        slow = straggler(start.rank_beats, self.s.straggler_factor)
        if slow is None:
            return
        rank, mine, others = slow
        name = start.rank_beats[rank].node or start.ranks[rank]
        if name in start.named:
            return
        start.named.add(name)
        self.add(
            STRAGGLER,
            category=STRAGGLER,
            scope="node",
            node=self.node(name),
            detail=f"node={name} rank={rank} compute_s={mine:.3f} others_s={others:.3f} "
            f"factor={mine / others:.1f} (limit {self.s.straggler_factor:g}); "
            f"stragglers={self.s.stragglers}",
            attempt=start.attempt,
        )
        if may_end and self.s.stragglers == "exclude":
            start.straggler, start.reason, start.killed_at = name, STRAGGLER, now
            allocation.signal_steps(alloc.job_id, "KILL")

    def ingest(self, start: _Start, metrics: Metrics, now: float) -> None:
        j = self.journal
        for step, _ in metrics.losses[start.seen_lines :]:
            start.seen_lines += 1
            progressed = start.seen_steps or start.resumed_steps
            if progressed and step <= start.max_step:  # no step beyond its furthest
                start.repeats += 1
                if step < start.max_step and start.went_back is None:
                    start.went_back = (start.max_step, step)
                continue  # not progress: the hang limit keeps running, and nothing is counted as trained
            if start.seen_steps:
                start.intervals.append(now - start.last_progress)
            elif start.attempt and not start.adopted:
                self.add("restart_end", at=now, node=self.node(start.ranks[0]), attempt=start.attempt)
            j.add_step(now - self.t0, step, start.attempt)
            start.seen_steps += 1
            start.last_progress = now
            start.max_step = max(start.max_step, step)
        for step in metrics.checkpoints[start.seen_checkpoints :]:
            start.seen_checkpoints += 1
            if start.adopted and any(
                e.attempt == start.attempt and e.step == step for e in j.kinds("checkpoint_end")
            ):
                continue  # recorded by the supervisor before this one
            self.add(
                "checkpoint_end",
                at=now,
                node=self.node(start.ranks[0]),
                tokens_trained=step * self.run_s.tokens_per_step,
                detail=f"step={step}",
                attempt=start.attempt,
                step=step,
            )
        if metrics.resumed:  # a start that resumes at the target has nothing left to train
            start.max_step = max(start.max_step, *metrics.resumed)
        if self.on_progress is not None and metrics.losses:
            self.on_progress(start.max_step, self.run_s.steps)

    def outcome(self, start: _Start, alloc: allocation.Allocation) -> bool:
        """Record how the start ended; True when the run is over."""
        run, ended = self.run_s, time.time()
        code = allocation.exit_code(self.folder, start.attempt)
        last = start.max_step
        head = self.node(start.ranks[0])
        if code == 0 and last >= run.steps:
            self.add(
                "job_complete",
                at=ended,
                node=head,
                tokens_trained=last * run.tokens_per_step,
                attempt=start.attempt,
                detail=f"world={start.world}",
            )
            self.add("window_end", at=ended, detail="target step reached", attempt=start.attempt)
            return True
        if start.reason == "timed_out":
            self.add("window_end", at=ended, detail="the window ended", attempt=start.attempt)
            return True
        if start.reason == CANCELLED and self.stop is not None:
            detail = cancelled_detail(self.stop.requested() or "stop requested")
            self.add(
                "window_end", at=ended, detail=f"{detail}; stopped after step {last}", attempt=start.attempt
            )
            return True
        kind = run.injections[start.injected].kind if start.injected is not None else ""
        lost = [start.lost] if start.lost else allocation.lost_nodes(start.ranks)
        failed_at = start.killed_at or ended
        node, scope = head, "job"
        if lost:
            category, node, scope = NODE_LOST, self.node(lost[0]), "node"
            how = (
                "set DOWN"
                if not start.lost or slurm.is_node_lost(slurm.node_state(start.lost))
                else "its rank killed"
            )
            detail = f"{'injected' if kind == 'node_loss' else 'organic'}: node {lost[0]} lost ({how}); the step ended on every rank"
        elif start.reason == STRAGGLER:
            category, node, scope = STRAGGLER, self.node(start.straggler), "node"
            detail = f"organic: node {start.straggler} straggled; the start was ended to replace it"
        elif start.reason == HANG:
            category = HANG
            failed_at = start.stopped_at or start.last_progress
            detail = (
                f"{'injected' if kind == 'hang' else 'organic'}: no step from any rank for "
                f"{(start.killed_at or ended) - failed_at:.2f} s"
            )
            notes = [
                f"{start.repeats} step line(s) at or below step {start.max_step} (repeated steps)"
            ] * bool(start.repeats)
            if start.went_back is not None:
                notes.append(f"the step number went back from {start.went_back[0]} to {start.went_back[1]}")
            if notes:
                detail += " beyond its furthest; " + "; ".join(notes)
        elif start.reason == KILL:
            category, detail = KILL, "injected: SIGKILL of every rank"
        elif start.reason == "allocation_lost":
            category, detail = SIGNAL, "organic: the allocation ended under the start"
        elif code is not None and code > 128:
            category, detail = SIGNAL, f"organic: a rank was killed by signal {code - 128} (srun exit {code})"
        else:
            category, detail = EXIT_CODE, f"organic: srun exit code {code} after step {last}"
        failed_at = max(failed_at, start.last_progress)
        self.journal.add(
            failed_at - self.t0,
            "failure",
            category,
            scope,
            node,
            tokens_trained=last * run.tokens_per_step,
            detail=detail,
            attempt=start.attempt,
            injection=start.injected if detail.startswith("injected") else None,
            step=last,
        )
        self.add(
            "detected",
            at=max(ended, failed_at),
            category=category,
            scope=scope,
            node=node,
            attempt=start.attempt,
        )
        name = self.names[node]
        on_node = sum(1 for e in self.journal.kinds("failure") if e.node == node)
        if (scope == "node" and (category != STRAGGLER or self.s.stragglers == "exclude")) or (
            on_node >= run.exclude_after and category not in (KILL, HANG, SUPERVISOR_LOST)
        ):
            self.add(
                "node_excluded",
                at=max(ended, failed_at),
                category=category,
                scope=scope,
                node=node,
                detail=f"node={name} failures={on_node}",
                attempt=start.attempt,
            )
        if code is None and allocation.alive(self.folder):
            allocation.release(self.folder)  # a step that would not end: the allocation is given up
        return False


def _after_step(metrics_path: Path, journal: Journal) -> int:
    """The byte after the metrics line of the last step the journal recorded (where a stopped supervisor
    stopped reading)."""
    if not journal.steps or not metrics_path.exists():
        return 0
    step, at, offset = journal.steps[-1].step, 0, 0
    for line in metrics_path.read_bytes().split(b"\n")[:-1]:
        offset += len(line) + 1
        if b'"loss"' in line:
            try:
                if json.loads(line).get("step") == step:
                    at = offset
            except ValueError:
                continue
    return at


def _iso(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")

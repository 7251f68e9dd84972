"""One replica of the execution window, event by event: training segments, checkpoints, failures, restarts,
spares and repair, planned maintenance, diurnal drift and the facility's power.

The job trains in segments of `checkpoint_interval_s` productive seconds, each closed by a blocking
checkpoint write and an optional background upload; a checkpoint is committed when its upload ends. A
failure loses every uncommitted token (rework), is detected after `detect_s`, a lost node is swapped for a
free spare (or the job waits for the earliest repair), and the job restarts in `restart_s`. Planned
maintenance checkpoints first, so it loses nothing, and holds the job for its duration (which includes its
restart). Nodes have identities through spare swaps and repairs: a lemon node's own failures interrupt the job
only while it holds a slot, and a quarantine policy retires a node at its k-th failure within a window (it is
never repaired; a free spare takes its slot). Throughput drifts with the time of day: 1 - A cos(2 pi (t - t_slowest) / 86400), integrated
exactly over each segment. The window end is a hard stop: work not yet committed then is lost.
Source: Llama 3 Herd of Models (arXiv 2407.21783) §3.3.4; Young (1974) and Daly (2006) for checkpoint/restart
accounting; Choukse et al. 2025 for power levels (see campaign/sim/power.py); Kokolis et al. 2024 (arXiv
2410.21680) for lemon nodes and their quarantine.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from campaign.goodput import ALL_KEYS, cost_usd, ettr, goodput_buckets_gpu_h, job_wall_s, window_utilisation
from campaign.sim.diurnal import (
    nominal_seconds,
    nominal_seconds_periodic,
    time_for_nominal_s,
)
from campaign.sim.events import Event, EventQueue
from campaign.sim.failures import NODE_LOSING_SCOPES, draw_arrivals
from campaign.sim.inputs import SimInputs
from campaign.sim.power import (
    PowerCurve,
    one_second_series,
    power_levels,
    power_stats,
    power_stats_from_curve,
    ramp_delay_s,
    rate_limited_curve,
    sampled_power,
    step_curve,
)
from campaign.sim.summary import Interruptions, ReplicaSummary

EVENT_KINDS = (
    "job_start",
    "checkpoint_start",
    "checkpoint_end",
    "failure",
    "detected",
    "restart_start",
    "restart_end",
    "spare_swap",
    "spares_exhausted",
    "quarantine",
    "waiting_start",
    "waiting_end",
    "repair_done",
    "planned_start",
    "planned_end",
    "job_complete",
    "window_end",
)
EVENT_COLUMNS = ("event_id", "t_s", "kind", "category", "scope", "node", "tokens_trained", "detail")
BREAKDOWN_KEYS = (
    ALL_KEYS  # productive, lost_rework, checkpoint, restart, waiting, idle, idle_spares, idle_released
)

# Job states. Training time is tracked per segment (productive once committed, else lost_rework); every other
# state's time goes to one goodput bucket.
INIT, RUNNING, CHECKPOINT, DETECT, RESTART, WAIT_SPARE, PLANNED, DONE = (
    "init",
    "running",
    "checkpoint",
    "detect",
    "restart",
    "wait_spare",
    "planned",
    "done",
)
_BUCKET = {
    INIT: "restart",  # zero-length: the job starts at t = 0 and the window end closes the last state
    CHECKPOINT: "checkpoint",
    DETECT: "restart",
    RESTART: "restart",
    WAIT_SPARE: "waiting",
    PLANNED: "waiting",
    DONE: "released",
}
_UP = (RUNNING, CHECKPOINT)


@dataclass(frozen=True)
class SimResult:
    """One replica: the event log, the sampled facility power and its summary."""

    replica: int
    seed: int
    events: pd.DataFrame
    power: pd.DataFrame
    summary: ReplicaSummary
    power_curve: PowerCurve | None = None  # exact curve behind `power`; one_second_series(curve) gives 1-s MW


# Committed tokens within this fraction of an interval's tokens of the target have reached it: sums of many
# segments' tokens round differently from one closed-form product, and a rounding sliver left to train would
# be a checkpoint of its own (renewal.finishing_wall_s drops a last segment that short the same way).
TARGET_SLACK = 1e-9

# A progress callback hears this many times over the window (2% steps).
PROGRESS_STEPS = 50


def simulate(
    inputs: SimInputs, replica: int = 0, on_progress: Callable[[float, float, float], None] | None = None
) -> SimResult:
    """Simulate one replica of the window event by event, with its event log and sampled power.

    Deterministic for (inputs.seed, replica). This is the reference model; `simulate_summary` gives the same
    summary faster. `on_progress(fraction, t_s, tokens_trained)` hears every 2% of simulated time; it does not
    change the result.
    """
    rep = _Replica(inputs, replica)
    rep.on_progress = on_progress
    return rep.run()


def simulate_summary_interpreted(inputs: SimInputs, replica: int = 0) -> ReplicaSummary:
    """The same summary from the Python model with closed-form cycles (the spec the compiled kernel follows)."""
    return _Replica(inputs, replica, detail=False).run_summary()


class _Replica:
    """The mutable state of one replica while its events run; `run()` returns the frozen SimResult."""

    def __init__(self, inputs: SimInputs, replica: int, detail: bool = True) -> None:
        self.x = inputs
        self.replica = replica
        self.detail = detail  # False: no event rows, checkpoint cycles skipped in closed form
        self.on_progress: Callable[[float, float, float], None] | None = None
        # Skipped cycles: (index in power lists, start s, cycles k, period s, run_s, run MW, checkpoint MW).
        self.blocks: list[tuple[int, float, int, float, float, float, float]] = []
        self.q = EventQueue()
        self.levels = power_levels(inputs)
        self.rate = inputs.tokens_per_s
        self.categories = inputs.failures
        # Nodes: job slots hold node ids 0..nodes-1 at first; spares are nodes..nodes+spare_nodes-1.
        self.slots = list(range(inputs.nodes))
        self.node_slot = {node: node for node in self.slots}  # nodes holding a slot that is not empty
        self.history: dict[int, deque[float]] = {}  # each node's last quarantine_failures failure times
        self.retired: set[int] = set()
        self.empty_slots: set[int] = set()
        self.free_spares: deque[int] = deque(range(inputs.nodes, inputs.nodes + inputs.spare_nodes))
        self.awaiting: deque[int] = deque()  # detected empty slots with no spare yet
        # Job state.
        self.state = INIT
        self.state_since = 0.0
        self.ids = 0
        self.seg_id = self.ckpt_id = self.restart_id = -1
        self.seg_start = self.seg_eff = 0.0
        self.since_run_s = 0.0  # training seconds since the last snapshot
        self.since_tokens = 0.0
        self.pending: deque[list] = deque()  # snapshots [id, run_s, tokens] written but not yet committed
        self.pending_run_s = self.pending_tokens = 0.0  # their sums
        self.committed_run_s = 0.0
        self.committed_tokens = 0.0
        self.lost_run_s = 0.0
        self.bucket_s = {"checkpoint": 0.0, "restart": 0.0, "waiting": 0.0, "released": 0.0}
        # A ramp limit slows the return to training: that time goes to the bucket of the stop it follows.
        self.ramp_bucket = "restart"
        self.hold_until = -math.inf
        self.pending_detections = 0
        self.need_restart_s = 0.0
        self.planned_stop = False  # the checkpoint being written precedes planned maintenance
        self.final_checkpoint = False  # the checkpoint being written follows the last token
        self.completion_s: float | None = None
        self.target_reached_s: float | None = None  # when committed tokens first reached the target
        # Counters and records.
        self.n_unexpected = 0
        self.n_planned = 0
        self.by_category = {c.name: 0 for c in self.categories}
        self.n_checkpoints = 0
        self.n_spares_exhausted = 0
        self.n_quarantined = 0
        self.rework_failures_s = 0.0
        self.n_rework_failures = 0
        self.lost_window_end_s = 0.0
        self.rows: list[tuple] = []
        self.power_t: list[float] = []
        self.power_mw: list[float] = []
        self.baseline_mw = self.levels.facility_mw(inputs.nodes, inputs.gpu_idle_w, inputs.spare_nodes)
        gpu_w = {RUNNING: self.levels.running_gpu_w, CHECKPOINT: self.levels.checkpoint_gpu_w}
        self.job_node_mw = {
            st: self.levels.facility_mw(1, gpu_w.get(st, self.levels.idle_gpu_w), 0)
            for st in (INIT, RUNNING, CHECKPOINT, DETECT, RESTART, WAIT_SPARE, PLANNED, DONE)
        }
        self.idle_node_mw = self.levels.facility_mw(0, 0.0, 1)

    # ------------------------------------------------------------------------------------------ running

    def run(self) -> SimResult:
        self._run_events()
        return self._result()

    def run_summary(self) -> ReplicaSummary:
        self._run_events()
        curve = self._power_curve()
        stats = power_stats_from_curve(curve)
        running_mw = self.levels.facility_mw(self.x.nodes, self.levels.running_gpu_w, self.x.spare_nodes)
        return self._summary(stats, running_mw - self.baseline_mw)

    def _run_events(self) -> None:
        x = self.x
        planned, arrivals = draw_arrivals(x, self.replica)
        self.q.schedule_many(planned.t_s.tolist(), "planned")
        for i, arr in enumerate(arrivals):
            payloads = [
                (i, slot, node) for slot, node in zip(arr.slot.tolist(), arr.nodes().tolist(), strict=True)
            ]
            self.q.schedule_many(arr.t_s.tolist(), "failure", payloads)
        self._row("job_start", detail=f"nodes={x.nodes} spares={x.spare_nodes}")
        self._start_running()
        self._record_power()
        handlers = {
            "failure": self._on_failure,
            "detected": self._on_detected,
            "repair_done": self._on_repair_done,
            "planned": self._on_planned,
            "planned_end": self._on_planned_end,
            "segment_end": self._on_segment_end,
            "target": self._on_target,
            "checkpoint_end": self._on_checkpoint_end,
            "upload_done": self._on_upload_done,
            "restart_end": self._on_restart_end,
        }

        def handle(event: Event) -> None:
            handlers[event.kind](event)
            self._record_power()

        if self.on_progress is None:
            self.q.run(x.window_s, handle)
        else:
            # Report progress at every step of simulated time (the event order is unchanged).
            step_s = x.window_s / PROGRESS_STEPS
            for k in range(1, PROGRESS_STEPS + 1):
                self.q.run(min(k * step_s, x.window_s), handle)
                self.on_progress(k / PROGRESS_STEPS, self.q.now_s, self.tokens_in_progress())
        self._finish()

    def _next_id(self) -> int:
        self.ids += 1
        return self.ids

    def _set_state(self, state: str, exact_tokens: float | None = None) -> None:
        now = self.q.now_s
        if self.state == RUNNING:
            self._close_segment(exact_tokens)
        else:
            self.bucket_s[_BUCKET[self.state]] += now - self.state_since
        self.state, self.state_since = state, now

    def _segment_tokens(self, t_s: float) -> float:
        return self.rate * nominal_seconds(self.x, self.seg_eff, t_s)

    def _close_segment(self, exact_tokens: float | None = None) -> None:
        now = self.q.now_s
        # Until seg_eff the job only makes up for the ramp limit: that time is not training.
        ramp_s = min(now, self.seg_eff) - self.seg_start
        if ramp_s > 0.0:
            self.bucket_s[self.ramp_bucket] += ramp_s
        self.since_run_s += max(0.0, now - max(self.seg_start, self.seg_eff))
        self.since_tokens += self._segment_tokens(now) if exact_tokens is None else exact_tokens
        self.seg_id = -1

    def tokens_in_progress(self) -> float:
        total = self.committed_tokens + self.since_tokens + self.pending_tokens
        if self.state == RUNNING:
            total += self._segment_tokens(self.q.now_s)
        return total

    def _facility_mw(self) -> float:
        job_nodes_up = self.x.nodes - len(self.empty_slots)
        return job_nodes_up * self.job_node_mw[self.state] + len(self.free_spares) * self.idle_node_mw

    def _record_power(self) -> None:
        mw = self._facility_mw()
        if not self.power_mw or self.power_mw[-1] != mw:
            self.power_t.append(self.q.now_s)
            self.power_mw.append(mw)

    def _row(self, kind: str, category: str = "", scope: str = "", node: int = -1, detail: str = "") -> None:
        if not self.detail:
            return
        self.rows.append(
            (len(self.rows), self.q.now_s, kind, category, scope, node, self.tokens_in_progress(), detail)
        )

    # ------------------------------------------------------------------------------ training and checkpoints

    def _start_running(self) -> None:
        before_mw = self._facility_mw()
        self.ramp_bucket = _BUCKET[self.state]
        self._set_state(RUNNING)
        now = self.q.now_s
        self.seg_start = now
        self.seg_eff = now + ramp_delay_s(self._facility_mw() - before_mw, self.x.ramp_mw_per_s)
        self.seg_id = self._next_id()
        remaining = self.x.target_tokens - self.tokens_in_progress()
        t_checkpoint = now + max(self.x.checkpoint_interval_s - self.since_run_s, 0.0)
        if (
            self.x.stop_at_target and self._segment_tokens(t_checkpoint) >= remaining - self._slack_tokens()
        ):  # the target falls inside this segment (or a rounding sliver past it)
            t_target = (
                time_for_nominal_s(self.x, self.seg_eff, remaining / self.rate) if remaining > 0 else now
            )
            self.q.schedule(min(max(t_target, now), t_checkpoint), "target", (self.seg_id, remaining))
        else:
            self.q.schedule(t_checkpoint, "segment_end", self.seg_id)

    def _slack_tokens(self) -> float:
        """Tokens short of the target that still count as reaching it: TARGET_SLACK of a nominal interval's."""
        return TARGET_SLACK * self.rate * self.x.checkpoint_interval_s

    def _begin_checkpoint(self, exact_tokens: float | None = None) -> None:
        self._set_state(CHECKPOINT, exact_tokens)
        self.pending.append([self._next_id(), self.since_run_s, self.since_tokens])
        self.pending_run_s += self.since_run_s
        self.pending_tokens += self.since_tokens
        self.since_run_s = self.since_tokens = 0.0
        self.ckpt_id = self._next_id()
        detail = (
            "final" if self.final_checkpoint else ("before planned maintenance" if self.planned_stop else "")
        )
        self._row("checkpoint_start", detail=detail)
        self.q.schedule(self.q.now_s + self.x.checkpoint_write_s, "checkpoint_end", self.ckpt_id)

    def _commit(self, n: int | None = None) -> None:
        """Commit the oldest n pending snapshots (all when n is None)."""
        for _ in range(len(self.pending) if n is None else n):
            _, run_s, tokens = self.pending.popleft()
            self.committed_run_s += run_s
            self.committed_tokens += tokens
        if (
            self.target_reached_s is None
            and self.committed_tokens >= self.x.target_tokens - self._slack_tokens()
        ):
            self.target_reached_s = self.q.now_s
        if not self.pending:  # re-zero the running sums so rounding never accumulates
            self.pending_run_s = self.pending_tokens = 0.0
        else:
            self.pending_run_s = sum(p[1] for p in self.pending)
            self.pending_tokens = sum(p[2] for p in self.pending)

    def _lose_uncommitted(self) -> tuple[float, float, int]:
        lost_s = self.since_run_s + self.pending_run_s
        lost_tokens = self.since_tokens + self.pending_tokens
        n_lost_checkpoints = len(self.pending)
        self.pending.clear()
        self.pending_run_s = self.pending_tokens = 0.0
        self.since_run_s = self.since_tokens = 0.0
        self.lost_run_s += lost_s
        return lost_s, lost_tokens, n_lost_checkpoints

    def _on_segment_end(self, event: Event) -> None:
        if self.state != RUNNING or event.payload != self.seg_id:
            return
        self._begin_checkpoint()

    def _on_target(self, event: Event) -> None:
        seg_id, remaining = event.payload
        if self.state != RUNNING or seg_id != self.seg_id:
            return
        self.final_checkpoint = True
        self._begin_checkpoint(exact_tokens=remaining)

    def _on_checkpoint_end(self, event: Event) -> None:
        if self.state != CHECKPOINT or event.payload != self.ckpt_id:
            return
        self.n_checkpoints += 1
        self._row("checkpoint_end")
        if self.final_checkpoint:
            # Training is over: the last upload cannot be lost to a later failure, so commit everything.
            self._commit()
            self._set_state(DONE)
            self.completion_s = self.q.now_s
            if self.target_reached_s is None:  # the last checkpoint holds the target, up to float rounding
                self.target_reached_s = self.q.now_s
            self._row("job_complete")
        elif self.planned_stop:
            # The job stops for maintenance; operators let the upload finish inside the maintenance slot.
            self.planned_stop = False
            self._commit()
            self._set_state(PLANNED)
            if self.q.now_s >= self.hold_until:
                self._row("planned_end")
            self._advance()
        else:
            snapshot_id = self.pending[-1][0]
            if self.x.checkpoint_background_s > 0:
                self.q.schedule(self.q.now_s + self.x.checkpoint_background_s, "upload_done", snapshot_id)
            else:
                self._commit(1)
                if not self.detail:
                    self._skip_cycles()
            self._start_running()

    def _skip_cycles(self) -> None:
        """Apply in closed form the whole run + checkpoint cycles that end before the next random event.

        Between two random events (failure, maintenance, detection, repair) the job only repeats one cycle:
        train `interval` seconds (the first ramp-limit delay of each is checkpoint time), write `write_s`,
        commit. k such cycles change nothing but the clock, the committed work and tokens, the checkpoint
        bucket and the power steps; the last cycle before the event (or the target) runs event by event.
        Only without background uploads (their commits are events of their own).
        """
        x = self.x
        now = self.q.now_s
        tau, period = x.checkpoint_interval_s, x.checkpoint_interval_s + x.checkpoint_write_s
        horizon = min(self.q.peek_s(), x.window_s)
        k = math.ceil((horizon - now) / period) - 1  # cycles ending strictly before the horizon
        if k <= 0:
            return
        up = self.x.nodes - len(self.empty_slots)
        idle_mw = len(self.free_spares) * self.idle_node_mw
        run_mw = up * self.job_node_mw[RUNNING] + idle_mw
        ckpt_mw = up * self.job_node_mw[CHECKPOINT] + idle_mw
        ramp = min(ramp_delay_s(run_mw - ckpt_mw, x.ramp_mw_per_s), tau)
        if x.stop_at_target or self.target_reached_s is None:
            # Stop the block a cycle before the target, so the commit that reaches it runs as an event.
            remaining = x.target_tokens - self.tokens_in_progress()
            most = self.rate * (tau - ramp) * (1.0 + x.diurnal_amplitude)  # tokens of one cycle, at most
            k = min(k, math.floor(remaining / most) - 1) if most > 0 else k
            if k <= 0:
                return
        self.bucket_s["checkpoint"] += now - self.state_since + k * (x.checkpoint_write_s + ramp)
        self.committed_run_s += k * (tau - ramp)
        self.committed_tokens += self.rate * nominal_seconds_periodic(x, now + ramp, tau - ramp, period, k)
        self.n_checkpoints += k
        self.blocks.append((len(self.power_t), now, k, period, tau, run_mw, ckpt_mw))
        self.q.now_s = self.state_since = now + k * period

    def _on_upload_done(self, event: Event) -> None:
        if self.pending and self.pending[0][0] == event.payload:
            self._commit(1)

    # ------------------------------------------------------------------------------------ failures

    def _on_failure(self, event: Event) -> None:
        if self.state == DONE:
            return  # the job has released its nodes: failures no longer interrupt it
        index, slot, target = event.payload
        if target >= 0:  # a lemon's own failure: it interrupts the job only while the node holds a slot
            slot = self.node_slot.get(target, -1)
            if slot < 0:
                return
        category = self.categories[index]
        self.n_unexpected += 1
        self.by_category[category.name] += 1
        lost_s = lost_tokens = 0.0
        lost_checkpoints = 0
        if self.state in _UP:
            self._set_state(DETECT)
            lost_s, lost_tokens, lost_checkpoints = self._lose_uncommitted()
            self.rework_failures_s += lost_s
            self.n_rework_failures += 1
            self.final_checkpoint = False
            if self.planned_stop:
                self.planned_stop = False
                if self.q.now_s >= self.hold_until:
                    self._row("planned_end", detail="pre-maintenance checkpoint lost to a failure")
        node = -1
        if category.scope in NODE_LOSING_SCOPES:
            slot = self._occupied_slot(slot)
            if slot >= 0:
                node = self.slots[slot]
                self.empty_slots.add(slot)
                del self.node_slot[node]
                self._note_failure(node)
        self.pending_detections += 1
        self.need_restart_s = max(self.need_restart_s, category.restart_s)
        self._row(
            "failure",
            category.name,
            category.scope,
            node,
            f"lost_s={lost_s:.3f} lost_tokens={lost_tokens:.0f} lost_checkpoints={lost_checkpoints}",
        )
        self.q.schedule(self.q.now_s + category.detect_s, "detected", (index, slot, node))
        self._advance()

    def _note_failure(self, node: int) -> None:
        """Quarantine: retire the node at its k-th failure within the window (the k-th last is that recent)."""
        k = self.x.quarantine_failures
        if k <= 0:
            return
        times = self.history.setdefault(node, deque(maxlen=k))
        times.append(self.q.now_s)
        if len(times) == k and self.q.now_s - times[0] <= self.x.quarantine_window_s:
            self.retired.add(node)
            self.n_quarantined += 1

    def _occupied_slot(self, slot: int) -> int:
        """The slot a node failure hits: the drawn one, or the next occupied one if that slot is empty."""
        n = self.x.nodes
        for k in range(n):
            s = (slot + k) % n
            if s not in self.empty_slots:
                return s
        return -1

    def _on_detected(self, event: Event) -> None:
        index, slot, node = event.payload
        category = self.categories[index]
        self.pending_detections -= 1
        self._row("detected", category.name, category.scope, node)
        if slot >= 0:
            if node in self.retired:
                self._row("quarantine", category.name, category.scope, node, "retired: never repaired")
            else:
                self.q.schedule(self.q.now_s + category.repair_h * 3600.0, "repair_done", node)
            if self.free_spares:
                self._swap(slot, self.free_spares.popleft())
            else:
                self.awaiting.append(slot)
                self.n_spares_exhausted += 1
                self._row(
                    "spares_exhausted",
                    category.name,
                    category.scope,
                    node,
                    f"slot={slot} waits for the earliest repair",
                )
        self._advance()

    def _swap(self, slot: int, node: int) -> None:
        self.slots[slot] = node
        self.node_slot[node] = slot
        self.empty_slots.discard(slot)
        self._row("spare_swap", node=node, detail=f"slot={slot}")

    def _on_repair_done(self, event: Event) -> None:
        node = event.payload
        self._row("repair_done", node=node)
        if self.awaiting:
            self._swap(self.awaiting.popleft(), node)
            self._advance()
        else:
            self.free_spares.append(node)

    def _on_restart_end(self, event: Event) -> None:
        if self.state != RESTART or event.payload != self.restart_id:
            return
        self.need_restart_s = 0.0
        self._row("restart_end")
        self._start_running()

    # ---------------------------------------------------------------------------------- maintenance

    def _on_planned(self, event: Event) -> None:
        if self.state == DONE:
            return
        duration = self.x.planned_duration_s
        self.n_planned += 1
        self.hold_until = max(self.hold_until, self.q.now_s + duration)
        self._row("planned_start", detail=f"duration_s={duration:g}")
        self.q.schedule(self.q.now_s + duration, "planned_end")
        if self.state == RUNNING:
            self.planned_stop = True
            self._begin_checkpoint()
        elif self.state == CHECKPOINT:
            self.planned_stop = not self.final_checkpoint
        else:
            self._advance()

    def _on_planned_end(self, event: Event) -> None:
        if self.state == DONE or self.q.now_s < self.hold_until or self.planned_stop:
            return  # superseded by a later maintenance, or the pre-maintenance checkpoint closes it
        self._row("planned_end")
        self._advance()

    # ------------------------------------------------------------------------------------- down state

    def _advance(self) -> None:
        """Move a stopped job to what it now waits for: maintenance, detection, a spare, a restart, or run."""
        if self.state in _UP or self.state == DONE:
            return
        now = self.q.now_s
        if now < self.hold_until:
            target = PLANNED
        elif self.pending_detections > 0:
            target = DETECT
        elif self.awaiting:
            target = WAIT_SPARE
        elif self.need_restart_s > 0:
            target = RESTART
        else:
            target = RUNNING
        if target == self.state:
            return
        if self.state == WAIT_SPARE:
            self._row("waiting_end")
        if target == RUNNING:
            self._start_running()
            return
        self._set_state(target)
        if target == WAIT_SPARE:
            self._row("waiting_start", detail=f"slots_without_node={len(self.awaiting)}")
        elif target == RESTART:
            self.restart_id = self._next_id()
            self._row("restart_start", detail=f"restart_s={self.need_restart_s:g}")
            self.q.schedule(now + self.need_restart_s, "restart_end", self.restart_id)

    # ------------------------------------------------------------------------------------------ result

    def _finish(self) -> None:
        self._set_state(DONE if self.state == DONE else INIT)
        if self.completion_s is None:
            lost_s, lost_tokens, lost_checkpoints = self._lose_uncommitted()
            self.lost_window_end_s = lost_s
            detail = f"lost_s={lost_s:.3f} lost_tokens={lost_tokens:.0f} lost_checkpoints={lost_checkpoints}"
        else:
            detail = "job complete"
        self._row("window_end", detail=detail)

    def _power_curve(self) -> PowerCurve:
        x = self.x
        power_t = np.asarray(self.power_t)
        power_mw = np.asarray(self.power_mw)
        if self.blocks:
            # Insert the skipped cycles' steps: (start + i period, run MW), (start + i period + run_s, ckpt MW).
            at, start, k, period, run_s, run_mw, ckpt_mw = (
                np.array(c) for c in zip(*self.blocks, strict=False)
            )
            k = k.astype(np.int64)
            owner = np.repeat(np.arange(k.size), k)
            i = np.arange(owner.size) - np.repeat(np.cumsum(k) - k, k)
            t0 = start[owner] + i * period[owner]
            new_t = np.column_stack((t0, t0 + run_s[owner])).ravel()
            new_mw = np.column_stack((run_mw[owner], ckpt_mw[owner])).ravel()
            where = np.repeat(at[owner].astype(np.int64), 2)
            power_t = np.insert(power_t, where, new_t)
            power_mw = np.insert(power_mw, where, new_mw)
        if x.ramp_mw_per_s is None:
            return step_curve(power_t, power_mw, x.window_s)
        return rate_limited_curve(power_t, power_mw, x.window_s, x.ramp_mw_per_s, self.baseline_mw)

    def _result(self) -> SimResult:
        x = self.x
        events = pd.DataFrame.from_records(self.rows, columns=list(EVENT_COLUMNS))
        events = events.astype(
            {"event_id": "int64", "t_s": "float64", "node": "int64", "tokens_trained": "float64"}
        )
        curve = self._power_curve()
        stats = power_stats(one_second_series(curve), curve)
        running_mw = self.levels.facility_mw(x.nodes, self.levels.running_gpu_w, x.spare_nodes)
        summary = self._summary(stats, running_mw - self.baseline_mw)
        return SimResult(self.replica, x.seed, events, sampled_power(curve, x.power_sample_s), summary, curve)

    def _summary(self, stats: dict, job_start_swing_mw: float) -> ReplicaSummary:
        return summary_record(self.x, self.replica, self.tallies(), stats, job_start_swing_mw)

    def tallies(self) -> Tallies:
        return Tallies(
            committed_run_s=self.committed_run_s,
            committed_tokens=self.committed_tokens,
            lost_run_s=self.lost_run_s,
            checkpoint_s=self.bucket_s["checkpoint"],
            restart_s=self.bucket_s["restart"],
            waiting_s=self.bucket_s["waiting"],
            released_s=self.bucket_s["released"],
            completion_s=self.completion_s,
            target_reached_s=self.target_reached_s,
            n_unexpected=self.n_unexpected,
            n_planned=self.n_planned,
            by_category=dict(self.by_category),
            n_checkpoints=self.n_checkpoints,
            n_spares_exhausted=self.n_spares_exhausted,
            n_quarantined=self.n_quarantined,
            rework_failures_s=self.rework_failures_s,
            n_rework_failures=self.n_rework_failures,
            lost_window_end_s=self.lost_window_end_s,
        )


@dataclass(frozen=True)
class Tallies:
    """What a replica counted and summed: everything its summary needs besides the power statistics."""

    committed_run_s: float
    committed_tokens: float
    lost_run_s: float
    checkpoint_s: float
    restart_s: float
    waiting_s: float
    released_s: float
    completion_s: float | None
    target_reached_s: (
        float | None
    )  # when the committed tokens first reached the target (None: not in the window)
    n_unexpected: int
    n_planned: int
    by_category: dict[str, int]
    n_checkpoints: int
    n_spares_exhausted: int
    n_quarantined: int
    rework_failures_s: float
    n_rework_failures: int
    lost_window_end_s: float


def summary_record(
    x: SimInputs, replica: int, t: Tallies, stats: dict, job_start_swing_mw: float
) -> ReplicaSummary:
    """The summary of one replica from its tallies and power statistics (its JSON keys: docs/design.md)."""
    gpus, spare_gpus = x.gpus, x.spare_gpus
    seconds = {
        "productive": t.committed_run_s,
        "lost_rework": t.lost_run_s,
        "checkpoint": t.checkpoint_s,
        "restart": t.restart_s,
        "waiting": t.waiting_s,
    }
    breakdown = goodput_buckets_gpu_h(seconds, gpus, spare_gpus, x.window_s, t.completion_s)
    seconds["released"] = t.released_s
    elapsed_s = job_wall_s(x.window_s, t.completion_s)
    stats = dict(stats)
    energy_mwh = stats.pop("energy_mwh")
    stats["job_start_swing"] = job_start_swing_mw
    return ReplicaSummary(
        replica=replica,
        seed=x.seed,
        window_s=x.window_s,
        gpus=gpus,
        spare_gpus=spare_gpus,
        ettr=ettr(seconds["productive"], elapsed_s),
        window_utilisation=window_utilisation(breakdown["productive"], gpus, spare_gpus, x.window_s),
        job_wall_s=elapsed_s,
        goodput_breakdown_gpu_h=breakdown,
        job_time_s=seconds,
        interruptions=Interruptions(t.n_unexpected, t.n_planned, dict(t.by_category)),
        observed_job_mtbf_h=(elapsed_s / 3600.0 / t.n_unexpected) if t.n_unexpected else None,
        checkpoint_interval_s=x.checkpoint_interval_s,
        n_checkpoints=t.n_checkpoints,
        n_spares_exhausted=t.n_spares_exhausted,
        n_quarantined=t.n_quarantined,
        rework_s_per_failure=(t.rework_failures_s / t.n_rework_failures) if t.n_rework_failures else None,
        lost_at_window_end_s=t.lost_window_end_s,
        tokens_trained=t.committed_tokens,
        tokens_target=x.target_tokens,
        completed=t.completion_s is not None,
        completion_s=t.completion_s,
        target_reached_s=t.target_reached_s,
        power_mw=stats,
        energy_mwh=energy_mwh,
        cost_usd=cost_usd(
            breakdown, gpus, spare_gpus, x.window_s, energy_mwh, x.gpu_hour_usd, x.energy_usd_per_mwh
        ),
    )

"""A real run's journal as the simulator's per-replica summary, so analyse reads it like a simulated window.

Every second of the run goes to one goodput bucket, walking the timeline attempt by attempt: a step's training
time (from the line before it to its own line) is `productive` if a later checkpoint of the same start (or the
target step) kept it, else `lost_rework`; from a step's line to its checkpoint's line is `checkpoint`; from a
failure to its detection, the back-off and a start's time before its first step are `restart`; after a failure
the time since the last line is `lost_rework`. So the buckets sum to the run's wall time exactly. A real run has
no spare GPUs and meters no power here: its window is its own wall time, one process slot (`gpus` 1).
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from datetime import UTC, datetime

from campaign import goodput
from campaign.execution.journal import Journal, JournalEvent
from campaign.execution.policy import outcome as outcome_of
from campaign.sim.summary import Interruptions, MeasuredRun, ReplicaSummary

MEASURED_GPUS = 1  # a real run on this machine is one process slot; its GPU-hours are slot-hours


def counted_checkpoints(journal: Journal) -> list[JournalEvent]:
    """The checkpoint events counted as trained: not those a later start fell back below (it could not use
    them: `checkpoint_fallback`), nor one a later start failed to load (`checkpoint_unloadable`) unless a start
    after that resumed at or beyond it."""
    events = journal.events
    out = []
    for c in journal.kinds("checkpoint_end"):
        later = [e for e in events if e.event_id > c.event_id]
        if any(e.kind == "checkpoint_fallback" and e.at_step < c.at_step for e in later):
            continue
        unloadable = [
            e.event_id for e in later if e.kind == "checkpoint_unloadable" and e.at_step == c.at_step
        ]
        if unloadable and not any(
            e.kind == "restart_end" and e.event_id > unloadable[0] and e.at_step >= c.at_step for e in later
        ):
            continue
        out.append(c)
    return out


def job_seconds(
    journal: Journal, target_step: int, end_s: float | None = None
) -> tuple[dict[str, float], float]:
    """Seconds per job bucket (goodput.JOB_TIME_KEYS) and the run's end (seconds since its start; `end_s` for a
    run still going: now)."""
    out = dict.fromkeys(goodput.JOB_TIME_KEYS, 0.0)
    if end_s is None:
        end_s = max(e.t_s for e in journal.events)
    attempts = sorted({s.attempt for s in journal.steps} | {e.attempt for e in journal.events})
    intervals = [b.t_s - a.t_s for a, b in itertools.pairwise(journal.steps) if a.attempt == b.attempt]
    median_step_s = statistics.median(intervals) if intervals else 0.0
    counted = counted_checkpoints(journal)
    cursor = 0.0

    def put(bucket: str, until: float) -> None:
        nonlocal cursor
        until = min(max(until, cursor), end_s)
        out[bucket] += until - cursor
        cursor = until

    for attempt in attempts:
        steps = [s for s in journal.steps if s.attempt == attempt]
        checkpoints = [e for e in counted if e.attempt == attempt]
        failures = [e for e in journal.events if e.kind == "failure" and e.attempt == attempt]
        complete = any(e.kind == "job_complete" and e.attempt == attempt for e in journal.events)
        kept = max([e.at_step for e in checkpoints] + ([target_step] if complete else []), default=0)
        if steps:
            put("restart", steps[0].t_s - median_step_s)  # start-up, or restart after a failure
        by_step = {e.at_step: e.t_s for e in checkpoints}
        for row in steps:
            put("productive" if row.step <= kept else "lost_rework", row.t_s)
            if row.step in by_step:
                put("checkpoint", by_step[row.step])
        if failures:
            put("lost_rework", failures[0].t_s)  # the partial step the failure cut
            detected = [e for e in journal.events if e.kind == "detected" and e.attempt == attempt]
            put("restart", detected[0].t_s if detected else failures[0].t_s)
            later = [s for s in journal.steps if s.attempt > attempt]
            put("restart", later[0].t_s - median_step_s if later else failures[0].t_s)
    put("lost_rework", end_s)  # a window that ended mid-run: the time since the last line is lost
    return out, end_s


def measured_summary(
    journal: Journal,
    target_step: int,
    tokens_per_step: int,
    checkpoint_every: int,
    seed: int,
    gpu_hour_usd: float,
    injected_kinds: dict[str, str] | None = None,
    max_wall_s: float | None = None,
) -> ReplicaSummary:
    """The ReplicaSummary of a real run (`replica` -1: measured, not simulated), with its `measured` section:
    failures injected and organic apart, steps trained twice, the median step and checkpoint write times."""
    job_s, window_s = job_seconds(journal, target_step)
    complete = journal.kinds("job_complete")
    completion_s = complete[0].t_s if complete else None
    gpus = MEASURED_GPUS
    buckets = goodput.goodput_buckets_gpu_h(job_s, gpus, 0, window_s, completion_s)
    failures = journal.kinds("failure")
    by_category = Counter(e.category for e in failures)
    injected = [e for e in failures if e.detail.startswith("injected")]
    wall_s = goodput.job_wall_s(window_s, completion_s)
    checkpoints = journal.kinds("checkpoint_end")
    counted = counted_checkpoints(journal)
    kept_steps = max([e.at_step for e in counted] + ([target_step] if complete else []), default=0)
    trained = Counter(s.step for s in journal.steps)
    writes = _checkpoint_writes_s(journal)
    times = sorted(e.t_s for e in checkpoints)
    one_interval_s = checkpoint_every * (
        _median_step_s(journal) or 0.0
    )  # one checkpoint: steps x median step
    interval_s = (
        statistics.median([b - a for a, b in itertools.pairwise(times)]) if len(times) > 1 else one_interval_s
    )
    return ReplicaSummary(
        replica=-1,
        seed=seed,
        window_s=window_s,
        gpus=gpus,
        spare_gpus=0,
        ettr=goodput.ettr(job_s["productive"], wall_s),
        window_utilisation=goodput.window_utilisation(buckets["productive"], gpus, 0, window_s),
        job_wall_s=wall_s,
        goodput_breakdown_gpu_h=buckets,
        job_time_s={**job_s, "released": window_s - wall_s},
        interruptions=Interruptions(len(failures), 0, dict(by_category)),
        observed_job_mtbf_h=wall_s / 3600.0 / len(failures) if failures else None,
        checkpoint_interval_s=interval_s,
        n_checkpoints=len(checkpoints),
        n_spares_exhausted=0,
        n_quarantined=0,
        rework_s_per_failure=job_s["lost_rework"] / len(failures) if failures else None,
        lost_at_window_end_s=0.0 if complete else job_s["lost_rework"],
        tokens_trained=float(kept_steps * tokens_per_step),
        tokens_target=float(target_step * tokens_per_step),
        completed=bool(complete),
        completion_s=completion_s,
        target_reached_s=completion_s,
        power_mw={"peak": 0.0, "mean": 0.0, "min": 0.0, "max_ramp_mw_per_s": 0.0},
        energy_mwh=0.0,
        cost_usd=goodput.cost_usd(buckets, gpus, 0, window_s, 0.0, gpu_hour_usd, 0.0),
        measured=MeasuredRun(
            started_at=_iso(journal.events[0].started_at),
            target_step=target_step,
            checkpoint_every_steps=checkpoint_every,
            final_step=kept_steps,
            failures_injected=len(injected),
            failures_organic=len(failures) - len(injected),
            injected_by_category=dict(Counter(e.category for e in injected)),
            restarts=len(journal.kinds("restart_start")),
            excluded_nodes=[e.detail for e in journal.kinds("node_excluded")],
            checkpoint_fallbacks=[e.detail for e in journal.kinds("checkpoint_fallback")],
            checkpoints_not_counted=sorted({e.at_step for e in checkpoints} - {e.at_step for e in counted}),
            outcome=outcome_of(journal),
            # A step trained more than once lay after the checkpoint a restart resumed from: the rework.
            steps_trained_again=sum(n - 1 for n in trained.values()),
            steps_trained=sum(trained.values()),
            rework_steps_expected=rework_steps_expected(journal),
            median_step_s=_median_step_s(journal),
            # the first start's time before its first step (start-up, compile), in the `restart` bucket
            startup_s=max(0.0, journal.steps[0].t_s - (_median_step_s(journal) or 0.0))
            if journal.steps
            else None,
            max_wall_s=max_wall_s,  # the window the run had (None: its own wall time)
            checkpoint_write_s=statistics.median(writes) if writes else None,
            end=journal.kinds("window_end")[-1].detail if journal.kinds("window_end") else "running",
        ),
    )


def rework_steps_expected(journal: Journal) -> int:
    """Steps a restart had to train again: per failed start that was restarted, its last step beyond the newest
    checkpoint so far that was counted (a checkpoint a restart fell back below is not: its steps are rework).
    `steps_trained_again` equal to this says no step was trained twice beyond that rework."""
    total, kept = 0, 0
    attempts = sorted({s.attempt for s in journal.steps})
    counted = counted_checkpoints(journal)
    for attempt in attempts:
        mine = [s.step for s in journal.steps if s.attempt == attempt]
        ckpts = [e.at_step for e in counted if e.attempt == attempt]
        kept = max([kept, *ckpts])
        restarted = attempt != attempts[-1]  # a failure the run ended with is not trained again
        if restarted and any(e.attempt == attempt for e in journal.kinds("failure")):
            total += max(max(mine) - kept, 0)
    return total


def _iso(epoch_s: float | None) -> str | None:
    if epoch_s is None:
        return None
    return datetime.fromtimestamp(float(epoch_s), UTC).isoformat(timespec="milliseconds")


def _median_step_s(journal: Journal) -> float | None:
    gaps = [b.t_s - a.t_s for a, b in itertools.pairwise(journal.steps) if a.attempt == b.attempt]
    return statistics.median(gaps) if gaps else None


def _checkpoint_writes_s(journal: Journal) -> list[float]:
    """Seconds from a step's line to its checkpoint's line, per checkpoint."""
    at = {(s.attempt, s.step): s.t_s for s in journal.steps}
    return [
        e.t_s - at[(e.attempt, e.at_step)]
        for e in journal.kinds("checkpoint_end")
        if (e.attempt, e.at_step) in at
    ]

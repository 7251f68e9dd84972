"""Plan against actual for a real run: the run beside the plan's expectation and the p10-p90 band of simulated
replicas of the same run, as it was executed (docs/execution.md#plan-against-actual).

The replicas are the simulator's (campaign/sim/), run at the real run's scale: its job nodes (one rank, counted as
one GPU, each) and its spares (a one-node run's other nodes stand by as spares), its measured median step time, its
checkpoint interval and measured write time, the window it had, and the failure rates it was exposed to: the
config's organic categories at the job's nodes plus the injected faults as one more category (their count over the
run's planned training time; node losses as a node's failure, so they take a spare), each failure costing the run's
measured detection and restart. The simulator starts a job at once and ends it with its last checkpoint: the run's
measured first start-up and its shutdown are added to every replica (lost), and so is its kept steps' time beyond
the median pace (productive: a compile after a restore). The plan's expectation is Daly's closed form
(campaign/plan/checkpointing.py) on the same inputs.
Source: Daly, FGCS 22(3):303-312, 2006 (expected wall time); the simulator's own sources (campaign/sim/).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from campaign import goodput
from campaign.analysis.result import Band, BandFigure, BandModel, BandNotSimulated
from campaign.config import FailureCategoryConfig
from campaign.plan.checkpointing import daly_expected_wall_s

if TYPE_CHECKING:
    from campaign.analysis.recorded_config import RecordedConfig
    from campaign.sim.inputs import SimInputs
    from campaign.sim.summary import ReplicaSummary

BAND_REPLICAS = 200  # enough for a stable p10 and p90 (each from about 20 replicas), fast enough for analyse
# The fewest replicas with the run's own failure count for a band conditioned on it (a p10 and p90 from fewer than
# 20 replicas would be two of a handful).
MIN_CONDITIONED = 20
LOST_KEYS = goodput.LOST_KEYS
INJECTED = "injected"  # the category of the injected faults in the replicas
INJECTED_NODE_LOSS = "injected_node_loss"  # the injected node losses: a node's failure, which takes a spare
FIGURES = (
    ("ettr", "ETTR while the job ran"),
    ("tokens_trained", "tokens trained"),
    ("interruptions", "unexpected interruptions"),
    ("lost_gpu_h", "lost GPU-hours"),
)


@dataclass(frozen=True)
class RunAsExecuted:
    """What the replicas simulate: the real run's scale, pace, checkpoints, window and failure rates."""

    job_nodes: int  # the job's nodes, one rank (counted as one GPU) each
    spare_nodes: int  # the nodes standing by to take a lost node's place
    world_sizes: tuple[int, ...]  # the ranks of each start (fewer than job_nodes where the run shrank)
    step_time_s: float
    tokens_per_step: int
    target_tokens: float
    checkpoint_interval_s: float  # training seconds between checkpoints
    checkpoint_write_s: float
    window_s: float  # the window the run had (its wall-time limit; for a run read from files, its wall time)
    startup_s: float  # the first start's time before its first step (not simulated: added to every replica)
    shutdown_s: (
        float  # from the last checkpoint at the target to the job's end (not simulated: added as well)
    )
    slow_steps_s: (
        float  # the kept steps' time beyond the pace (a compile after a restore): productive, added too
    )
    detect_s: float
    restart_s: float
    failures: tuple[FailureCategoryConfig, ...]
    gpu_hour_usd: float
    seed: int
    organic_source: str  # where the organic rates came from

    @property
    def unsimulated_s(self) -> float:
        """The run's own lost time the simulator has no part for: its first start-up and its shutdown."""
        return self.startup_s + self.shutdown_s


def run_as_executed(
    summary: ReplicaSummary, events: pd.DataFrame, config: RecordedConfig | None
) -> RunAsExecuted | str:
    """The run as executed, from its measured summary, events and config; or why it cannot be simulated."""
    m = summary.measured_run()
    step_s = m.median_step_s
    target_step = int(m.target_step or 0)
    if not step_s or step_s <= 0 or target_step <= 0:
        return "the run has fewer than two steps in one start: no step time to simulate it with"
    tokens_per_step = max(1, round(float(summary.tokens_target) / target_step))
    # The replicas train at the median step; a slow step the run kept (the compile after a restore: seconds where a
    # step takes a tenth) is productive time in its ETTR, so that time beyond the pace is added to every replica as
    # productive time (never less than none: a run read from its files starts at its first line, whose step then
    # counts no time). Priced into every step, it would make the replicas' rework as slow as the compile.
    kept_steps = float(summary.tokens_trained) / tokens_per_step
    slow_steps_s = max(0.0, float(summary.job_time_s["productive"]) - kept_steps * float(step_s))
    every = int(m.checkpoint_every_steps or 0)
    write_s = float(m.checkpoint_write_s or 0.0)
    interval_s = every * step_s if every else max(float(summary.checkpoint_interval_s) - write_s, step_s)
    failures = events[events["kind"] == "failure"].sort_values("t_s")
    detected = events[events["kind"] == "detected"].sort_values("t_s")
    n = len(failures)
    startup_s = float(m.startup_s or 0.0)
    detect_s = (
        statistics.fmean(max(0.0, d - f) for f, d in zip(failures["t_s"], detected["t_s"], strict=False))
        if n and len(detected)
        else 0.0
    )
    recovery_s = (float(summary.job_time_s["restart"]) - startup_s) / n if n else 0.0
    restart_s = max(0.0, recovery_s - detect_s)
    window_s = float(m.max_wall_s or summary.window_s)
    job_nodes, spare_nodes, worlds = run_scale(events)
    organic, source = _organic(config, failures, float(summary.window_s), job_nodes)
    if n:  # this run's own detection and restart, not the full-scale cluster's
        organic = [c.model_copy(update={"detect_s": detect_s, "restart_s": restart_s}) for c in organic]
    injected = int(m.failures_injected or 0)
    if injected:
        organic_per_s = sum(c.job_rate_per_hour(job_nodes, 1) for c in organic) / 3600.0
        rate_per_s = injected_rate_per_s(
            injected, target_step * step_s, interval_s, write_s, detect_s + restart_s, organic_per_s
        )
        organic += injected_categories(events, rate_per_s, injected, detect_s, restart_s)
    # priced as the summary prices the run: its job and spare GPUs over its window
    gpus = max(1, int(summary.gpus)) + int(summary.spare_gpus or 0)
    total_gpu_h = gpus * float(summary.window_s) / 3600.0
    return RunAsExecuted(
        job_nodes=job_nodes,
        spare_nodes=spare_nodes,
        world_sizes=worlds,
        step_time_s=float(step_s),
        tokens_per_step=tokens_per_step,
        target_tokens=float(summary.tokens_target),
        checkpoint_interval_s=float(interval_s),
        checkpoint_write_s=write_s,
        window_s=max(
            window_s,
            startup_s + shutdown_s(events, target_step) + slow_steps_s + interval_s + write_s + step_s,
        ),
        startup_s=startup_s,
        shutdown_s=shutdown_s(events, target_step),
        slow_steps_s=slow_steps_s,
        detect_s=detect_s,
        restart_s=restart_s,
        failures=tuple(organic),
        gpu_hour_usd=float(summary.cost_usd["compute"]) / total_gpu_h if total_gpu_h else 0.0,
        seed=int(summary.seed or 0),
        organic_source=source,
    )


def shutdown_s(events: pd.DataFrame, target_step: int) -> float:
    """The time from the run's last checkpoint, at its target step, to the job's end (a final evaluation, the ranks'
    exit): lost time in the run, where a simulated job ends with its last checkpoint; 0 for a run that did not."""
    done = events[events["kind"] == "job_complete"]["t_s"] if len(events) else pd.Series([], dtype=float)
    saved = events[events["kind"] == "checkpoint_end"].sort_values("t_s") if len(events) else events
    if (
        not len(done)
        or not len(saved)
        or str(saved["detail"].iloc[-1]).split()[:1] != [f"step={target_step}"]
    ):
        return 0.0
    return max(0.0, float(done.iloc[0]) - float(saved["t_s"].iloc[-1]))


def run_scale(events: pd.DataFrame) -> tuple[int, int, tuple[int, ...]]:
    """(job nodes, spare nodes, each start's world size) of the run as executed, from its journal: a multi-node
    run's `job_start` names `job_nodes=` and `spare_nodes=` and each `start` its `world=`; a one-node run's names
    the `nodes=` it may use (one trains, the others stand by as spares); a run read from its files is one node."""
    starts = events[events["kind"] == "job_start"]["detail"] if len(events) else pd.Series([], dtype=object)
    words = dict(w.split("=", 1) for w in str(starts.iloc[0] if len(starts) else "").split() if "=" in w)
    if words.get("job_nodes", "").isdigit():
        job, spares = max(1, int(words["job_nodes"])), int(words.get("spare_nodes") or 0)
    else:
        job, spares = 1, max(0, len([n for n in words.get("nodes", "").split(",") if n]) - 1)
    worlds = tuple(
        int(w[6:])
        for detail in (events[events["kind"] == "start"]["detail"] if len(events) else [])
        for w in str(detail).split()
        if w.startswith("world=") and w[6:].isdigit()
    )
    return job, spares, worlds or (job,)


def injected_categories(
    events: pd.DataFrame, rate_per_s: float, n: int, detect_s: float, restart_s: float
) -> list[FailureCategoryConfig]:
    """The injected faults as categories of the replicas at `rate_per_s` together: node losses (a failure of
    scope node) as a node's failure, which takes a spare and is repaired (as the simulator repairs, from its
    detection) in the time the run's lost nodes stayed out (to a `repair_done`, else to the run's end); the other
    kinds as the job's failure. Their rate is split as their counts are."""
    failures = events[(events["kind"] == "failure") & events["detail"].astype(str).str.startswith("injected")]
    lost = failures[failures["scope"] == "node"]
    end_s = float(events["t_s"].max()) if len(events) else 0.0
    repairs = events[events["kind"] == "repair_done"]
    out_s = []
    for t, node in zip(lost["t_s"], lost["node"], strict=True):
        back = repairs[(repairs["node"] == node) & (repairs["t_s"] >= t)]["t_s"]
        out_s.append(max(0.0, (float(back.min()) if len(back) else end_s) - t - detect_s))
    n_lost = min(len(lost), n)
    cats = []
    kinds: tuple[tuple[str, Literal["job", "node"], int, float], ...] = (
        (INJECTED, "job", n - n_lost, 0.0),
        (INJECTED_NODE_LOSS, "node", n_lost, statistics.fmean(out_s) if out_s else 0.0),
    )
    for name, scope, count, repair_s in kinds:
        if count:
            # model_construct: a few-minute rehearsal's rate per job-hour lies above the config's bound for a window
            cats.append(
                FailureCategoryConfig.model_construct(
                    name=name,
                    scope=scope,
                    per_gpu_year=None,
                    per_1k_node_days=None,
                    per_job_hour=rate_per_s * count / n * 3600.0,
                    detect_s=detect_s,
                    restart_s=restart_s,
                    repair_h=repair_s / 3600.0,
                    observed=None,
                    source="the faults injected into the run, over its expected wall time",
                )
            )
    return cats


def injected_rate_per_s(
    n: int, productive_s: float, interval_s: float, write_s: float, recovery_s: float, other_per_s: float
) -> float:
    """The rate at which `n` faults are expected over the run's expected wall time (Daly's, which grows with the
    rate: the faults also fall in the time they cost): the root of rate x wall(rate) = n, by bisection."""

    def expected(rate: float) -> float:
        total = rate + other_per_s
        wall = (
            daly_expected_wall_s(productive_s, interval_s, write_s, recovery_s, 1.0 / total) if total else 0.0
        )
        return rate * wall - n

    lo, hi = 0.0, n / productive_s  # wall >= productive: at hi, at least n are expected
    for _ in range(80):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if expected(mid) < 0 else (lo, mid)
    return (lo + hi) / 2.0


def _organic(
    config: RecordedConfig | None, failures: pd.DataFrame, wall_s: float, job_nodes: int
) -> tuple[list[FailureCategoryConfig], str]:
    """The organic categories: the config's (scaled to the job's nodes by the simulator), or, for a run with no
    config, the rates of its own organic failures over its wall time (the band then shows chance alone)."""
    if config is not None:
        cats = [FailureCategoryConfig.model_validate(c) for c in config.failure_categories]
        at = "one node" if job_nodes == 1 else f"the job's {job_nodes} nodes"
        return cats, f"the committed config's failure categories, at {at}"
    own = failures[~failures["detail"].astype(str).str.startswith("injected")]
    hours = max(wall_s, 1e-9) / 3600.0
    cats = [
        FailureCategoryConfig.model_construct(
            name=str(name),
            scope="job",
            per_gpu_year=None,
            per_1k_node_days=None,
            per_job_hour=count / hours,
            detect_s=0.0,
            restart_s=0.0,
            repair_h=0.0,
            observed=None,
            source="the run's own failures",
        )
        for name, count in own.groupby("category").size().items()
    ]
    return cats, "the run's own failures over its wall time (no config: the band shows chance alone)"


def band_inputs(run: RunAsExecuted) -> SimInputs:
    """The simulator's inputs for the run as executed (a campaign.sim.SimInputs)."""
    from campaign.sim.inputs import SimInputs

    return SimInputs(
        nodes=run.job_nodes,
        gpus_per_node=1,
        spare_nodes=run.spare_nodes,
        window_s=run.window_s - run.unsimulated_s - run.slow_steps_s,
        step_time_s=run.step_time_s,
        tokens_per_step=run.tokens_per_step,
        target_tokens=run.target_tokens,
        checkpoint_write_s=run.checkpoint_write_s,
        checkpoint_background_s=0.0,
        checkpoint_interval_s=run.checkpoint_interval_s,
        comm_fraction=0.0,
        failures=run.failures,
        planned_per_day=0.0,
        planned_duration_s=0.0,
        diurnal_amplitude=0.0,
        gpu_tdp_w=1.0,
        gpu_idle_w=0.0,
        node_overhead_w=0.0,
        pue=1.0,
        floor_fraction=None,
        ramp_mw_per_s=None,
        gpu_hour_usd=run.gpu_hour_usd,
        energy_usd_per_mwh=0.0,
        power_sample_s=60.0,
        seed=run.seed,
    )


def replica_figures(summaries: list[ReplicaSummary], run: RunAsExecuted) -> dict[str, np.ndarray]:
    """Each headline figure per replica, with the run's first start-up and shutdown added (the simulator starts a job
    at once and ends it with its last checkpoint: their hours on every job node are lost GPU-hours) and its slow
    steps' time beyond the pace (productive)."""
    startup_h = run.unsimulated_s / 3600.0 * run.job_nodes
    productive = np.array([s.job_time_s["productive"] for s in summaries], dtype=float) + run.slow_steps_s
    wall = np.array([s.job_wall_s for s in summaries], dtype=float) + run.unsimulated_s + run.slow_steps_s
    return {
        "ettr": np.divide(productive, wall, out=np.zeros_like(wall), where=wall > 0),
        "tokens_trained": np.array([s.tokens_trained for s in summaries], dtype=float),
        "interruptions": np.array([s.interruptions.unexpected for s in summaries], dtype=float),
        "lost_gpu_h": np.array(
            [math.fsum(s.goodput_breakdown_gpu_h[k] for k in LOST_KEYS) + startup_h for s in summaries]
        ),
    }


def plan_expectation(run: RunAsExecuted) -> dict[str, float]:
    """The plan's closed form on the run as executed: Daly's expected wall time for its training, its checkpoints
    and its failure rate (each failure costing detect + restart), plus the start-up; cut at the window."""
    productive_s = run.target_tokens / run.tokens_per_step * run.step_time_s
    tau, delta = run.checkpoint_interval_s, run.checkpoint_write_s
    weights = [c.job_rate_per_hour(run.job_nodes, 1) for c in run.failures]
    rate_per_s = sum(weights) / 3600.0
    if rate_per_s > 0:
        recovery_s = sum(w * (c.detect_s + c.restart_s) for w, c in zip(weights, run.failures, strict=True))
        recovery_s /= sum(weights)
        wall_s = daly_expected_wall_s(productive_s, tau, delta, recovery_s, 1.0 / rate_per_s)
    else:
        wall_s = productive_s * (tau + delta) / tau
    share = min(1.0, (run.window_s - run.unsimulated_s - run.slow_steps_s) / wall_s) if wall_s > 0 else 1.0
    trained_s, wall_s = productive_s * share, min(wall_s, run.window_s - run.unsimulated_s - run.slow_steps_s)
    writes_s = trained_s / tau * delta
    return {
        "ettr": (trained_s + run.slow_steps_s) / (wall_s + run.unsimulated_s + run.slow_steps_s),
        "tokens_trained": run.target_tokens * share,
        "interruptions": rate_per_s * wall_s,
        "lost_gpu_h": max(0.0, wall_s + run.unsimulated_s - trained_s - writes_s) / 3600.0 * run.job_nodes,
    }


def scale_text(job_nodes: int, spare_nodes: int, world_sizes: list[int] | tuple[int, ...]) -> str:
    """The run's scale as the report writes it: e.g. "3 job nodes and 1 spare, world size 3" (a world that shrank
    reads "world size 2, then 1")."""
    spares = "no spare" if not spare_nodes else f"{spare_nodes} spare{'s' if spare_nodes != 1 else ''}"
    worlds = ", then ".join(str(w) for w in dict.fromkeys(world_sizes)) or str(job_nodes)
    return f"{job_nodes} job node{'s' if job_nodes != 1 else ''} and {spares}, world size {worlds}"


def figure_text(figure: str, value: float | None) -> str:
    """A band figure as the report writes it."""
    from campaign.figures import num, tokens

    if value is None:
        return "n/a"
    if figure == "tokens_trained":
        return tokens(value)
    if figure == "interruptions":
        return num(value, 0 if float(value).is_integer() else 1)
    if figure == "lost_gpu_h":
        return f"{value:.3g}"
    return num(value, 3)


def replica_band(
    summary: ReplicaSummary,
    events: pd.DataFrame,
    config: RecordedConfig | None,
    replicas: int = BAND_REPLICAS,
) -> Band | BandNotSimulated:
    """The `band` section of a measured run's analysis: per headline figure the real value, the plan's
    expectation, the replicas' p10, p50 and p90, and whether the real run fell inside p10-p90."""
    run = run_as_executed(summary, events, config)
    if isinstance(run, str):
        return BandNotSimulated(0, [], run)
    from campaign.errors import CampaignError
    from campaign.sim.fast import compiled_inputs, simulate_summary

    try:
        inputs = band_inputs(run)
    except CampaignError as err:  # a run the simulator cannot take (e.g. a window shorter than a checkpoint)
        return BandNotSimulated(0, [], str(err))
    prepared = compiled_inputs(inputs)
    per_replica = replica_figures([simulate_summary(inputs, r, prepared) for r in range(replicas)], run)
    real = {
        "ettr": float(summary.ettr),
        "tokens_trained": float(summary.tokens_trained),
        "interruptions": float(summary.interruptions.unexpected),
        "lost_gpu_h": math.fsum(float(summary.goodput_breakdown_gpu_h[k]) for k in LOST_KEYS),
    }
    plan = plan_expectation(run)
    same, conditioned = conditioned_on_failures(per_replica["interruptions"], real["interruptions"])
    rows = []
    for key, label in FIGURES:
        # The failure count's own band is over every replica; the other figures' over those that had the run's count.
        values = per_replica[key] if key == "interruptions" or same is None else per_replica[key][same]
        p10, p50, p90 = (float(v) for v in np.percentile(values, [10, 50, 90]))
        # A band without width (every replica the same) holds the run's figure only if it is that value; it calls
        # no figure outside (n/a, said so): it shows the model has no spread there, not that the run is off.
        flat = math.isclose(p10, p90, rel_tol=1e-9, abs_tol=1e-12)
        same_value = math.isclose(real[key], p10, rel_tol=1e-9, abs_tol=1e-12)
        rows.append(
            BandFigure(
                figure=key,
                label=label,
                real=real[key],
                plan=plan[key],
                p10=p10,
                p50=p50,
                p90=p90,
                is_inside=(True if same_value else None)
                if flat
                else bool(p10 - 1e-9 <= real[key] <= p90 + 1e-9),
                no_spread=flat,
            )
        )
    return Band(
        replicas=replicas,
        seed=run.seed,
        figures=rows,
        n_inside=sum(r.is_inside is True for r in rows),
        n_judged=sum(r.is_inside is not None for r in rows),
        conditioned_on=conditioned,
        # a run stopped before its end (cancelled) is set beside replicas that run to theirs: read it so
        cancelled=str(summary.measured_run().end or "").startswith("cancelled"),
        model=BandModel(
            job_nodes=run.job_nodes,
            spare_nodes=run.spare_nodes,
            world_sizes=list(run.world_sizes),
            step_time_s=run.step_time_s,
            tokens_per_step=run.tokens_per_step,
            checkpoint_interval_s=run.checkpoint_interval_s,
            checkpoint_write_s=run.checkpoint_write_s,
            window_s=run.window_s,
            startup_s=run.startup_s,
            shutdown_s=run.shutdown_s,
            slow_steps_s=run.slow_steps_s,
            detect_s=run.detect_s,
            restart_s=run.restart_s,
            organic_rates=run.organic_source,
            failures_per_hour={c.name: c.job_rate_per_hour(run.job_nodes, 1) for c in run.failures},
        ),
    )


def conditioned_on_failures(interruptions: np.ndarray, real: float) -> tuple[np.ndarray | None, str]:
    """The replicas that had the run's own count of unexpected interruptions (a band conditioned on what the run
    had), or None with the reason the band cannot be conditioned (too few replicas had that count)."""
    same = interruptions == real
    k, n = int(same.sum()), len(interruptions)
    if k >= MIN_CONDITIONED:
        return same, f"the {k} of {n} replicas that had the run's {real:.0f} unexpected interruption(s)"
    return None, (
        f"every replica: only {k} of {n} had the run's {real:.0f} unexpected interruption(s) (fewer than "
        f"{MIN_CONDITIONED}), so the band cannot be conditioned on them and shows the modelled rates' chance"
    )

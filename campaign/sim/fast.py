"""The simulator's fast path: one replica's summary (and its power curve) from the compiled kernel.

campaign/sim/compiled.py is the event-by-event model of campaign/sim/simulator.py compiled with Numba: flat
arrays in, flat arrays out. This module is the adapter between them: it packs a `SimInputs` into the kernel's
parameter arrays (`compiled_inputs`, once per batch of replicas), draws a replica's arrivals exactly as the
reference does (`kernel_arguments`), runs the kernel and turns its tallies into the same summary
`simulate(...).summary` gives (`simulator.summary_record`). docs/simulation-kernels.md says how the two models are
kept in step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import campaign.sim.compiled as compiled
from campaign.sim.failures import NODE_LOSING_SCOPES, draw_arrivals
from campaign.sim.inputs import SimInputs
from campaign.sim.power import PowerCurve, power_levels
from campaign.sim.simulator import (
    CHECKPOINT,
    DETECT,
    DONE,
    INIT,
    PLANNED,
    RESTART,
    RUNNING,
    WAIT_SPARE,
    Tallies,
    summary_record,
)
from campaign.sim.summary import ReplicaSummary


def simulate_summary(
    inputs: SimInputs, replica: int = 0, prepared: CompiledInputs | None = None
) -> ReplicaSummary:
    """The summary of `simulate(inputs, replica)`, fast: the same model compiled (campaign/sim/compiled.py), no
    event log, no sampled power, the routine checkpoint cycles between two random events in closed form and the
    power statistics from the step curve's breakpoints, never from a one-second array.

    Counts are identical to the event-by-event model and every figure agrees to float rounding (the closed
    form sums a block of cycles at once; tests/unit/test_sim_fast.py holds it to the model for any setting).
    `prepared` (from `compiled_inputs`) saves re-deriving the parameters for every replica of a batch.
    """
    summary, _ = _compiled_replica(inputs, replica, prepared or compiled_inputs(inputs), want_curve=False)
    return summary


def simulate_curve(inputs: SimInputs, replica: int = 0) -> tuple[ReplicaSummary, PowerCurve]:
    """The fast summary and the exact facility power curve behind it (for the power notice)."""
    return _compiled_replica(inputs, replica, compiled_inputs(inputs), want_curve=True)


@dataclass(frozen=True, eq=False)
class CompiledInputs:
    """The kernel's parameters for one SimInputs (derived once per batch of replicas)."""

    params: np.ndarray
    job_node_mw: np.ndarray
    categories: np.ndarray
    category_names: tuple[str, ...]
    pending_capacity: int
    baseline_mw: float
    job_start_swing_mw: float
    source_kinds: np.ndarray  # event kind of each random source: planned, then each failure category
    source_index: np.ndarray  # its category index (0 for planned)


def compiled_inputs(x: SimInputs) -> CompiledInputs:
    levels = power_levels(x)
    gpu_w = {RUNNING: levels.running_gpu_w, CHECKPOINT: levels.checkpoint_gpu_w}
    states = (INIT, RUNNING, CHECKPOINT, DETECT, RESTART, WAIT_SPARE, PLANNED, DONE)  # compiled.INIT .. DONE
    job_node_mw = np.array([levels.facility_mw(1, gpu_w.get(st, levels.idle_gpu_w), 0) for st in states])
    params = np.zeros(compiled.N_P)
    params[compiled.P_WINDOW] = x.window_s
    params[compiled.P_RATE] = x.tokens_per_s
    params[compiled.P_TAU] = x.checkpoint_interval_s
    params[compiled.P_WRITE] = x.checkpoint_write_s
    params[compiled.P_BG] = x.checkpoint_background_s
    params[compiled.P_TARGET] = x.target_tokens
    params[compiled.P_STOP] = 1.0 if x.stop_at_target else 0.0
    params[compiled.P_AMP] = x.diurnal_amplitude
    params[compiled.P_T0] = x.diurnal_slowest_s
    params[compiled.P_RAMP] = x.ramp_mw_per_s if x.ramp_mw_per_s is not None else -1.0
    params[compiled.P_PLANNED_DUR] = x.planned_duration_s
    params[compiled.P_IDLE_NODE_MW] = levels.facility_mw(0, 0.0, 1)
    params[compiled.P_Q_K] = x.quarantine_failures
    params[compiled.P_Q_WINDOW] = x.quarantine_window_s
    categories = np.array(
        [
            [c.detect_s, c.restart_s, c.repair_h * 3600.0, 1.0 if c.scope in NODE_LOSING_SCOPES else 0.0]
            for c in x.failures
        ],
        dtype=float,
    ).reshape(len(x.failures), 4)
    baseline = levels.facility_mw(x.nodes, x.gpu_idle_w, x.spare_nodes)
    running = levels.facility_mw(x.nodes, levels.running_gpu_w, x.spare_nodes)
    # Snapshots pending at once: one begins every cycle (at least `interval` apart) and is committed at the latest
    # when its upload ends, `background` after its write: at most background / interval + 2, plus slack.
    capacity = int(x.checkpoint_background_s / x.checkpoint_interval_s) + 4
    n = len(x.failures)
    kinds = np.array([compiled.E_PLANNED] + [compiled.E_FAILURE] * n, np.int64)
    index = np.array([0, *range(n)], np.int64)
    return CompiledInputs(
        params,
        job_node_mw,
        categories,
        tuple(c.name for c in x.failures),
        capacity,
        baseline,
        running - baseline,
        kinds,
        index,
    )


def kernel_arguments(x: SimInputs, replica: int, c: CompiledInputs) -> tuple:
    """compiled.run_replica's arguments for one replica but the last (`summarise`): its arrivals drawn."""
    planned, arrivals = draw_arrivals(x, replica)
    sources = [planned, *arrivals]  # in the reference's scheduling order
    counts = [a.t_s.size for a in sources]
    return (
        c.params,
        c.job_node_mw,
        x.nodes,
        x.spare_nodes,
        c.categories,
        np.concatenate([a.t_s for a in sources]),
        np.repeat(c.source_kinds, counts),
        np.repeat(c.source_index, counts),
        np.concatenate([a.slot for a in sources]),
        np.concatenate([a.nodes() for a in sources]),
        c.pending_capacity,
    )


def _compiled_replica(x: SimInputs, replica: int, c: CompiledInputs, want_curve: bool):
    args = kernel_arguments(x, replica, c)
    if want_curve:  # every power step, for the curve itself
        f, s, by_cat, power_t, power_mw = compiled.run_replica(*args, 0)
        t, mw = compiled.coalesce(power_t, power_mw)
        if x.ramp_mw_per_s is None:
            slope = np.zeros_like(mw)
        else:
            t, mw, slope = compiled.rate_limited(t, mw, x.window_s, x.ramp_mw_per_s, c.baseline_mw)
        peak, low, ramp, energy_mwh = compiled.curve_stats(t, mw, slope, x.window_s)
    else:  # one call: tallies and statistics, the routine cycles' power steps summarised (compiled._write_cycles)
        f, s, by_cat, power = compiled.replica_summary(*args, c.baseline_mw)
        peak, low, ramp, energy_mwh = power.tolist()
    completion = float(f[compiled.F_COMPLETION])
    target_reached = float(f[compiled.F_TARGET_S])
    tallies = Tallies(
        committed_run_s=float(f[compiled.F_COMMIT_S]),
        committed_tokens=float(f[compiled.F_COMMIT_TOK]),
        lost_run_s=float(f[compiled.F_LOST_S]),
        checkpoint_s=float(f[compiled.F_B0 + compiled.B_CHECKPOINT]),
        restart_s=float(f[compiled.F_B0 + compiled.B_RESTART]),
        waiting_s=float(f[compiled.F_B0 + compiled.B_WAITING]),
        released_s=float(f[compiled.F_B0 + compiled.B_RELEASED]),
        completion_s=None if math.isnan(completion) else completion,
        target_reached_s=None if math.isnan(target_reached) else target_reached,
        n_unexpected=int(s[compiled.S_UNEXPECTED]),
        n_planned=int(s[compiled.S_PLANNED]),
        by_category=dict(zip(c.category_names, by_cat.tolist(), strict=False)),
        n_checkpoints=int(s[compiled.S_CHECKPOINTS]),
        n_spares_exhausted=int(s[compiled.S_EXHAUSTED]),
        n_quarantined=int(s[compiled.S_QUARANTINED]),
        rework_failures_s=float(f[compiled.F_REWORK_S]),
        n_rework_failures=int(s[compiled.S_REWORK_N]),
        lost_window_end_s=float(f[compiled.F_LOST_END_S]),
    )
    stats = {
        "peak": peak,
        "mean": energy_mwh * 3600.0 / x.window_s,
        "min": low,
        "max_ramp_mw_per_s": ramp,
        "energy_mwh": energy_mwh,
    }
    summary = summary_record(x, replica, tallies, stats, c.job_start_swing_mw)
    return summary, (PowerCurve(t, mw, slope, x.window_s) if want_curve else None)

"""Many seeded replicas of one window, summarised as means and percentiles ("how sure are we").

Replica r of seed s draws from SeedSequence([s, r]), so any replica can be rerun alone, in any order, on any
worker. Percentiles are numpy's linear interpolation between order statistics.
Source: docs/design.md, "JSON outputs" (`campaign simulate --json` summary keys).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from dataclasses import replace

import numpy as np
import pandas as pd

from campaign.errors import ConfigError
from campaign.goodput import ETTR_DEFINITION, LOST_DEFINITION, UTILISATION_DEFINITION
from campaign.sim.fast import compiled_inputs, simulate_summary
from campaign.sim.inputs import DAY_S, SimInputs
from campaign.sim.simulator import BREAKDOWN_KEYS, SimResult, simulate
from campaign.sim.summary import COMPLETION_DAYS_LABEL, TARGET_DAYS_LABEL, ReplicaSummary
from campaign.window_verdict import window_sufficiency

PERCENTILES = (10, 50, 90)


def simulate_replicas(inputs: SimInputs, replicas: int, first: int = 0) -> list[SimResult]:
    """Run replicas first..first+replicas-1 one after another (a task runner can map `simulate` instead)."""
    return [simulate(inputs, r) for r in range(first, first + replicas)]


def replica_batches(replicas: int, workers: int) -> list[range]:
    """Split replicas 0..replicas-1 into at most `workers` contiguous batches of near-equal size.

    Replica r always draws from SeedSequence([seed, r]), so the results do not depend on the split.
    """
    if replicas <= 0 or workers <= 0:
        raise ValueError("replicas and workers must be positive")
    n = min(replicas, workers)
    edges = [round(i * replicas / n) for i in range(n + 1)]
    return [range(a, b) for a, b in itertools.pairwise(edges)]


# Upper bound of one replica's summary held in memory until the batch returns (a Llama 3 summary, pickled, is
# ~2.5 kB; live dicts take about twice that: tests/unit/test_sim_fast.py checks the bound).
SUMMARY_BYTES = 8_000
# Bytes per checkpoint cycle a running replica holds for its power curve (2 breakpoints x ~6 float arrays,
# plus sorting scratch): the only part that grows with the window, by cycles, never by seconds.
CURVE_BYTES_PER_CYCLE = 2 * 8 * 12


def replicas_memory_bytes(inputs: SimInputs, replicas: int, workers: int) -> int:
    """Estimated peak bytes of `replicas` summary-only replicas on `workers` processes."""
    cycles = inputs.window_s / (inputs.checkpoint_interval_s + inputs.checkpoint_write_s)
    per_running = CURVE_BYTES_PER_CYCLE * (cycles + 1) + 1_000_000  # + arrivals, heap and interpreter scratch
    return int(replicas * SUMMARY_BYTES + min(workers, replicas) * per_running)


def check_replicas_fit(inputs: SimInputs, replicas: int, workers: int, available_bytes: int) -> None:
    """Refuse, before anything runs, a replica count whose estimated memory exceeds half of what is available."""
    need = replicas_memory_bytes(inputs, replicas, workers)
    if need > available_bytes // 2:
        fit = max(1, (available_bytes // 2 - (need - replicas * SUMMARY_BYTES)) // SUMMARY_BYTES)
        raise ConfigError(
            f"{replicas:,} replicas need about {need / 1e9:.2f} GB (estimate), over half of the "
            f"{available_bytes / 1e9:.2f} GB available",
            where="--replicas",
            fix=f"run at most about {fit:,} replicas at once (split the rest over seeds with --seed)",
        )


def available_memory_bytes() -> int:
    """Memory the system can give now (Linux MemAvailable; else physical pages free)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


# The plan's step-time band as multipliers on its step time; (1, 1): every replica at the plan's point.
NO_BAND = (1.0, 1.0)
# The step-time draws' own random stream, apart from the failure model's (spawned from the config's seed).
STEP_TIME_STREAM = 0x5751


def step_time_factors(seed: int, band: tuple[float, float], replicas: range) -> list[float]:
    """Each replica's step-time multiplier, uniform over the plan's band (low, high): where the step is expected
    to land, with no reason given to prefer a point inside it. Replica r takes the r-th draw of the seed's
    step-time stream (the generator is advanced to it), so its draw does not depend on the batch it runs in."""
    if band == NO_BAND:
        return [1.0] * len(replicas)
    bits = np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(STEP_TIME_STREAM,)))
    bits.advance(replicas.start)  # one 64-bit draw per uniform double
    low, high = band
    return [float(x) for x in np.random.Generator(bits).uniform(low, high, size=len(replicas))]


def simulate_batch(
    inputs: SimInputs, replicas: range, band: tuple[float, float] = NO_BAND
) -> list[ReplicaSummary]:
    """Summaries (fast path) of a batch of replicas, in replica order; with a step-time `band` each replica runs at
    the plan's step time times its draw from the band (`step_time_factors`), as the `schedule` gate's do."""
    if band == NO_BAND:
        prepared = compiled_inputs(inputs)
        return [simulate_summary(inputs, r, prepared) for r in replicas]
    factors = step_time_factors(inputs.seed, band, replicas)
    return [
        simulate_summary(replace(inputs, step_time_s=inputs.step_time_s * f), r)
        for r, f in zip(replicas, factors, strict=True)
    ]


def distribution(values: Iterable[float | None]) -> dict:
    """{mean, p10, p50, p90} of the values that are not None; all None when there are none."""
    data = np.array([v for v in values if v is not None], dtype=float)
    if data.size == 0:
        return {"mean": None, **{f"p{p}": None for p in PERCENTILES}}
    pct = np.percentile(data, PERCENTILES)
    return {"mean": float(data.mean()), **{f"p{p}": float(v) for p, v in zip(PERCENTILES, pct, strict=False)}}


def summarise_replicas(summaries: list[ReplicaSummary], window_s: float, stop_at_target: bool = True) -> dict:
    """The `campaign simulate --json` summary from each replica's `SimResult.summary`: distributions over
    replicas plus means of the rest (only summaries cross back from workers, not events or power).

    completion_days is over the replicas that finished (all None when none did). target_days, p_target_in_window
    and window_length come from the rule the `schedule` gate applies (campaign.window_verdict
    .window_sufficiency): target_days' percentiles are the gate's (inverted CDF over every replica, one that did not
    reach the target counting as later than the window, None where the percentile falls among those), its mean is
    over the replicas that reached it. power_mw.peak is the highest peak of any replica,
    power_mw.min the lowest minimum and power_mw.mean the mean of the replica means.
    """
    if not summaries:
        raise ValueError("summarise_replicas needs at least one replica summary")
    s = list(summaries)
    names = list(s[0].interruptions.by_category)
    completed = [x.completed for x in s]
    target_s = [x.target_reached_s for x in s]
    judged = window_sufficiency(target_s, window_s, trains_through=not stop_at_target)
    return {
        "replicas": len(s),
        "window_days": window_s / DAY_S,
        "interruptions_unexpected": distribution(x.interruptions.unexpected for x in s),
        "interruptions_planned": distribution(x.interruptions.planned for x in s),
        "ettr": distribution(x.ettr for x in s),
        "window_utilisation": distribution(x.window_utilisation for x in s),
        "definitions": {"ettr": ETTR_DEFINITION, "window_utilisation": UTILISATION_DEFINITION},
        "tokens_trained": distribution(x.tokens_trained for x in s),
        "tokens_target": s[0].tokens_target,
        "completion_days": distribution(
            x.completion_s / DAY_S if x.completion_s is not None else None for x in s
        ),
        "p_complete_in_window": float(np.mean(completed)),
        "target_days": {
            "mean": distribution(t / DAY_S if t is not None else None for t in target_s)["mean"],
            "p10": judged.p10_target_days,
            "p50": judged.p50_target_days,
            "p90": judged.p90_target_days,
        },
        "p_target_in_window": judged.p_target_in_window,
        "window_length": judged.to_json(),
        "by_category": {n: float(np.mean([x.interruptions.by_category[n] for x in s])) for n in names},
        "power_mw": {
            "peak": max(x.power_mw["peak"] for x in s),
            "mean": float(np.mean([x.power_mw["mean"] for x in s])),
            "min": min(x.power_mw["min"] for x in s),
            "max_ramp_mw_per_s": max(x.power_mw["max_ramp_mw_per_s"] for x in s),
        },
        "energy_mwh": float(np.mean([x.energy_mwh for x in s])),
        "observed_job_mtbf_h": distribution(x.observed_job_mtbf_h for x in s),
        "goodput_breakdown_gpu_h": {
            k: float(np.mean([x.goodput_breakdown_gpu_h[k] for x in s])) for k in BREAKDOWN_KEYS
        },
        "cost_usd": {k: float(np.mean([x.cost_usd[k] for x in s])) for k in ("compute", "energy", "lost")},
    }


def replica_table(results: list[SimResult]) -> pd.DataFrame:
    """One flat row per replica (for the `sim_replicas` catalog table)."""
    rows = []
    for r in results:
        x = r.summary
        row: dict[str, float | None] = {
            "replica": r.replica,
            "seed": r.seed,
            "ettr": x.ettr,
            "window_utilisation": x.window_utilisation,
            "interruptions_unexpected": x.interruptions.unexpected,
            "interruptions_planned": x.interruptions.planned,
            "observed_job_mtbf_h": x.observed_job_mtbf_h,
            "n_checkpoints": x.n_checkpoints,
            "tokens_trained": x.tokens_trained,
            "is_completed": x.completed,
            "completion_s": x.completion_s,
            "peak_mw": x.power_mw["peak"],
            "mean_mw": x.power_mw["mean"],
            "min_mw": x.power_mw["min"],
            "max_ramp_mw_per_s": x.power_mw["max_ramp_mw_per_s"],
            "energy_mwh": x.energy_mwh,
        }
        row.update({f"{k}_gpu_h": v for k, v in x.goodput_breakdown_gpu_h.items()})
        cost = x.cost_usd
        row.update(
            cost_compute_usd=cost["compute"], cost_energy_usd=cost["energy"], cost_lost_usd=cost["lost"]
        )
        rows.append(row)
    return pd.DataFrame(rows)


# Rows of the published table: (label, key in the `campaign simulate --json` summary, unit).
TABLE_ROWS = (
    ("ETTR", "ettr", ""),
    ("window utilisation", "window_utilisation", ""),
    ("unexpected interruptions", "interruptions_unexpected", ""),
    ("planned interruptions", "interruptions_planned", ""),
    ("tokens trained", "tokens_trained", ""),
    (COMPLETION_DAYS_LABEL, "completion_days", "d"),
    (TARGET_DAYS_LABEL, "target_days", "d"),
    ("observed job MTBF (h)", "observed_job_mtbf_h", "h"),
)


def summary_table(summary: dict) -> list[dict]:
    """One row per figure with its mean and percentiles (the simulate run's table artifact)."""
    rows = []
    for label, key, _ in TABLE_ROWS:
        d = summary[key]
        rows.append({"figure": label, **{k: d[k] for k in ("mean", "p10", "p50", "p90")}})
    return rows


def summary_markdown(campaign: str, replicas: int, seed: int, summary: dict) -> str:
    """The simulate run's result as markdown: the distributions, P(finish), power, energy, cost, definitions."""

    def fmt(v) -> str:
        return "n/a" if v is None else (f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.4e}")

    lines = [
        f"# campaign simulate: {campaign}",
        "",
        f"{replicas:,} replicas, seed {seed}, window {summary['window_days']:g} days.",
        "",
        "| figure | mean | p10 | p50 | p90 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in summary_table(summary):
        lines.append(
            f"| {row['figure']} | {fmt(row['mean'])} | {fmt(row['p10'])} | {fmt(row['p50'])} | "
            f"{fmt(row['p90'])} |"
        )
    power = summary["power_mw"]
    cost = summary["cost_usd"]
    lines += [
        "",
        (
            f"P(target reached in the window): {summary['p_target_in_window']:.2f}; the window "
            f"{'suffices' if summary['window_length']['suffices'] else 'is too short'} "
            f"({summary['window_length']['rule']})"
        ),
        f"P(finish in the window): {summary['p_complete_in_window']:.2f}",
        (
            f"Facility power: peak {power['peak']:.2f} MW, mean {power['mean']:.2f} MW, min {power['min']:.2f} MW, "
            f"steepest 1-s change {power['max_ramp_mw_per_s']:.2f} MW/s; energy {summary['energy_mwh']:,.0f} MWh "
            "(mean per replica)."
        ),
        (
            f"Cost per replica (mean): compute ${cost['compute']:,.0f}, energy ${cost['energy']:,.0f}, "
            f"lost to failures ${cost['lost']:,.0f} ({LOST_DEFINITION}); released after an early finish "
            f"{summary['goodput_breakdown_gpu_h']['idle_released']:,.1f} GPU-hours (capacity back to the cluster)."
        ),
        "",
        "Definitions:",
    ]
    lines += [f"- {v}" for v in summary["definitions"].values()]
    return "\n".join(lines) + "\n"

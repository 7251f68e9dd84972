"""The shared definitions of a window's goodput, stated once: ETTR, window utilisation and the GPU-hour buckets.

- ETTR (effective training time ratio) = productive job time / the job's wall time from its start to its
  completion, or to the window's end if it did not finish. The idle tail after an early finish belongs to the
  cluster (released capacity), not to the job.
- window utilisation = productive GPU-hours / ((job GPUs + spare GPUs) x window hours).
- goodput buckets, GPU-hours, summing exactly to (job + spare GPUs) x window hours: `productive` (training
  kept by a committed checkpoint), `lost_rework` (training lost to a failure or the window end), `checkpoint`
  (blocking writes), `restart` (detection and restart), `waiting` (for a spare node or planned maintenance),
  `idle_spares` (spare nodes standing by while the job holds the window) and `idle_released` (the whole
  allocation after the job completed); `idle` = idle_spares + idle_released (the contract key, docs/design.md).
- lost (to failures) = lost_rework + restart + waiting GPU-hours, priced at the GPU-hour price: the job's time
  that a failure, a restart or a wait took. Checkpoint writes are a cost of the method; the spares standing by
  and the released tail are not losses (the tail is capacity back to the cluster).
- cost: compute = every GPU (job and spares) for the whole window at the GPU-hour price; energy = the window's
  energy at the energy price; lost as above.
Time lost to a facility ramp limit while the job comes back up goes to the bucket of the stop it follows.
Source: Meta's ETTR definition as used by Kokolis et al., "Revisiting Reliability in Large-Scale Machine
Learning Research Clusters", HPCA 2025 (arXiv 2410.21680); Llama 3 §3.3.4 ("effective training time").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypedDict

# Job-time buckets (seconds of the job's wall time, multiplied by job GPUs).
JOB_TIME_KEYS = ("productive", "lost_rework", "checkpoint", "restart", "waiting")
# Every bucket, in GPU-hours; `idle` is derived as their last two together.
BUCKET_KEYS = (*JOB_TIME_KEYS, "idle_spares", "idle_released")
CONTRACT_KEYS = (*JOB_TIME_KEYS, "idle")
ALL_KEYS = (*JOB_TIME_KEYS, "idle", "idle_spares", "idle_released")

# Each bucket as the report and its artifacts label it: (key, label, what it counts as).
BUCKETS = (
    ("productive", "productive training", "useful"),
    ("checkpoint", "checkpoint writes", "planned overhead"),
    ("lost_rework", "lost rework", "lost"),
    ("restart", "detection and restart", "lost"),
    ("waiting", "waiting (spare or maintenance)", "lost"),
    ("idle_spares", "spares standing by", "insurance, not lost"),
    ("idle_released", "released early", "capacity back to the cluster, not lost"),
)


class CostUsd(TypedDict):
    compute: float  # every GPU (job and spares) for the whole window
    energy: float
    lost: float  # (lost_rework + restart + waiting) GPU-hours at the GPU-hour price (LOST_DEFINITION)


# The buckets that count as lost to failures (`cost_usd.lost`).
LOST_KEYS = ("lost_rework", "restart", "waiting")

ETTR_DEFINITION = "productive job time / job wall time from its start to completion or the window's end"
UTILISATION_DEFINITION = "productive GPU-hours / ((job + spare GPUs) x window hours)"
LOST_DEFINITION = (
    "(lost_rework + restart + waiting) GPU-hours x the GPU-hour price; idle spares and the released tail are not "
    "losses"
)


def ettr(productive_s: float, job_wall_s: float) -> float:
    """Productive seconds over the job's wall seconds (0 when the job held no time)."""
    return productive_s / job_wall_s if job_wall_s > 0 else 0.0


def job_wall_s(window_s: float, completion_s: float | None) -> float:
    """The job's wall time: from the window start to its completion, or the whole window."""
    return window_s if completion_s is None else min(completion_s, window_s)


def goodput_buckets_gpu_h(
    job_time_s: Mapping[str, float], gpus: int, spare_gpus: int, window_s: float, completion_s: float | None
) -> dict[str, float]:
    """The buckets in GPU-hours from the job's seconds per bucket (keys JOB_TIME_KEYS).

    The job's seconds cover its wall time (the simulator accounts every second of it to one bucket); what
    remains of the window after completion is released capacity for the job's and the spares' GPUs. So the
    sum is (gpus + spare_gpus) x window hours, up to float rounding.
    """
    wall_s = job_wall_s(window_s, completion_s)
    out = {k: float(job_time_s[k]) * gpus / 3600.0 for k in JOB_TIME_KEYS}
    out["idle_spares"] = spare_gpus * wall_s / 3600.0
    out["idle_released"] = (gpus + spare_gpus) * (window_s - wall_s) / 3600.0
    out["idle"] = out["idle_spares"] + out["idle_released"]
    return {k: out[k] for k in ALL_KEYS}


def total_gpu_h(gpus: int, spare_gpus: int, window_s: float) -> float:
    return (gpus + spare_gpus) * window_s / 3600.0


def window_utilisation(productive_gpu_h: float, gpus: int, spare_gpus: int, window_s: float) -> float:
    """Productive GPU-hours over every GPU-hour of the window (job and spares)."""
    total = total_gpu_h(gpus, spare_gpus, window_s)
    return productive_gpu_h / total if total > 0 else 0.0


def buckets_sum_gpu_h(buckets: Mapping[str, float]) -> float:
    """The sum that must equal (job + spare GPUs) x window hours (each GPU-hour counted once)."""
    return math.fsum(buckets[k] for k in BUCKET_KEYS)


def lost_gpu_h(buckets: Mapping[str, float]) -> float:
    """GPU-hours lost to failures: lost rework, detection and restart, and waiting (LOST_DEFINITION)."""
    return math.fsum(float(buckets[k]) for k in LOST_KEYS)


def lost_usd(buckets: Mapping[str, float], gpu_hour_usd: float) -> float:
    """USD lost to failures: `lost_gpu_h` at the GPU-hour price (`cost_usd.lost` on every surface)."""
    return lost_gpu_h(buckets) * gpu_hour_usd


def released_gpu_h(buckets: Mapping[str, float]) -> float:
    """GPU-hours released after an early finish (the whole allocation after completion): not a loss."""
    return float(buckets["idle_released"])


def cost_usd(
    buckets: Mapping[str, float],
    gpus: int,
    spare_gpus: int,
    window_s: float,
    energy_mwh: float,
    gpu_hour_usd: float,
    energy_usd_per_mwh: float,
) -> CostUsd:
    """The window's cost: `compute` (every GPU for the whole window), `energy` and `lost` (to failures), in USD:
    the one home of `summary.cost_usd` and `analysis.json`'s `cost_usd` {compute, energy, lost}."""
    return CostUsd(
        compute=total_gpu_h(gpus, spare_gpus, window_s) * gpu_hour_usd,
        energy=energy_mwh * energy_usd_per_mwh,
        lost=lost_usd(buckets, gpu_hour_usd),
    )


def gpu_hour_usd(compute_usd: float, gpus: int, spare_gpus: int, window_s: float) -> float:
    """The GPU-hour price read back from a summary's compute cost (0 for an empty window)."""
    total = total_gpu_h(gpus, spare_gpus, window_s)
    return float(compute_usd) / total if total > 0 else 0.0

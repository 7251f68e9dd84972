"""Checkpoint size, save time and interval: Young's and Daly's optimum and Daly's expected wall time.

A saved checkpoint holds bf16 weights, fp32 master weights and Adam m, v (~14 B/param, no gradients). A
synchronous save blocks for size / storage bandwidth. An asynchronous save blocks only for the copy of each GPU's
shard (size / GPUs) to host memory at HOST_COPY_GB_PER_S, then uploads in the background for size / storage bw.
The interval is Daly's higher-order optimum with delta = blocking seconds and M = job MTBF.
Source: Young, CACM 17(9), 1974; Daly, FGCS 22(3):303-312, 2006 (doi:10.1016/j.future.2004.11.016);
BLOOM-176B checkpoint (~14 B/param); PyTorch blog on asynchronous checkpointing (blocking 148.8 s -> 6.3 s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from campaign.config import CheckpointConfig

SAVED_BYTES_PER_PARAM = 14.0  # 2 bf16 weights + 4 fp32 master + 4 Adam m + 4 Adam v; gradients are not saved
# Assumption: device-to-host copy of a GPU's shard into pinned memory at 20 GB/s (below PCIe Gen4 x16's 32 GB/s,
# shared with the NIC traffic); not measured.
HOST_COPY_GB_PER_S = 20.0
# The longest interval 'auto' picks (see plan_checkpoint).
MAX_AUTO_INTERVAL_S = 6 * 3600.0


@dataclass(frozen=True)
class CheckpointPlan:
    size_gb: float  # saved state, GB (1e9 bytes)
    write_s: float  # blocking seconds per checkpoint
    background_s: float  # non-blocking upload seconds after the blocking part (0 for sync)
    interval_s: float  # compute seconds between checkpoints in use: config value or Daly's optimum
    optimal_interval_s: float  # Daly's optimum for this job MTBF, always computed

    def to_json(self) -> dict:
        return {
            "size_gb": self.size_gb,
            "write_s": self.write_s,
            "background_s": self.background_s,
            "interval_s": self.interval_s,
            "optimal_interval_s": finite_or_none(self.optimal_interval_s),
        }


def finite_or_none(value: float) -> float | None:
    """JSON has no infinity: a quantity that does not exist (no failures, so no MTBF) is null."""
    return value if math.isfinite(value) else None


def checkpoint_size_gb(parameters: int) -> float:
    """GB (1e9 bytes) of one full checkpoint of a model with `parameters` weights."""
    return parameters * SAVED_BYTES_PER_PARAM / 1e9


def checkpoint_write_s(
    size_gb: float, storage_gb_per_s: float, *, is_async: bool = False, gpus: int = 1
) -> tuple[float, float]:
    """(blocking seconds, background seconds) of one save. Sync: all of size / storage bandwidth blocks.
    Async: each GPU copies its 1/gpus share to host memory (blocking), then the upload runs in the background."""
    upload_s = size_gb / storage_gb_per_s
    if not is_async:
        return upload_s, 0.0
    return size_gb / max(gpus, 1) / HOST_COPY_GB_PER_S, upload_s


def young_interval_s(write_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum sqrt(2 delta M), seconds of compute between checkpoints."""
    return math.sqrt(2.0 * write_s * mtbf_s)


def daly_interval_s(write_s: float, mtbf_s: float) -> float:
    """Daly's optimum: sqrt(2dM)[1 + sqrt(d/2M)/3 + (d/2M)/9] - d for d < 2M, else M."""
    if write_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = write_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * write_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - write_s


def daly_expected_wall_s(
    solve_s: float, interval_s: float, write_s: float, restart_s: float, mtbf_s: float
) -> float:
    """Daly's expected wall time to finish `solve_s` of work: M e^(R/M) (e^((tau+delta)/M) - 1) T_s / tau.

    Exponential failures with mean M (also during writes and restarts), checkpoint every tau of work costing delta,
    each failure costs R and the work since the last checkpoint.
    """
    m = mtbf_s
    return m * math.exp(restart_s / m) * math.expm1((interval_s + write_s) / m) * solve_s / interval_s


def plan_checkpoint(parameters: int, gpus: int, config: CheckpointConfig, mtbf_s: float) -> CheckpointPlan:
    """Size, save times and interval (config value, or Daly's optimum when 'auto') for this job's MTBF."""
    size_gb = checkpoint_size_gb(parameters)
    write_s, background_s = checkpoint_write_s(
        size_gb, config.storage_gb_per_s, is_async=config.is_async, gpus=gpus
    )
    optimal = daly_interval_s(write_s, mtbf_s)
    # An async save cannot start before the previous upload finished.
    optimal = max(optimal, background_s)
    # With no (or very rare) modelled failures Daly's optimum grows without bound; real runs still checkpoint to
    # survive what the model leaves out, so 'auto' never waits longer than MAX_AUTO_INTERVAL_S (an assumption).
    interval = min(optimal, MAX_AUTO_INTERVAL_S) if config.interval_s == "auto" else float(config.interval_s)
    return CheckpointPlan(
        size_gb=size_gb,
        write_s=write_s,
        background_s=background_s,
        interval_s=interval,
        optimal_interval_s=optimal,
    )

"""A synthetic incident log drawn from a known failure profile: the demo's log and the tests' ground truth.

Jobs of several sizes start at random over a span (a year by default) and each holds a random set of the
cluster's nodes; each category fails as a Poisson process at its rate x the job's GPUs (scope `gpu`) or at its
rate per job-hour (scope `job`). A node-scope failure lands on one of the job's nodes, a lemon node being
`lemon_factor` times as likely, so lemons also raise the job's rate: `SyntheticLog.mean_rate_per_h` is the rate
a fit should recover. Seeded: the same arguments give the same log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from campaign.files import atomic_write_text

ORIGIN = pd.Timestamp("2026-01-01T00:00:00Z")


@dataclass(frozen=True)
class SyntheticCategory:
    name: str
    scope: str  # gpu (rate per GPU-hour) or job (rate per job-hour)
    rate_per_h: float  # per GPU-hour or per job-hour


# A cluster in the shape of the one Kokolis et al. describe: a per-job rate that dominates small jobs beside
# per-GPU hardware rates (per GPU-hour). The demo fits it back.
DEMO_CATEGORIES = (
    SyntheticCategory("faulty_gpu", "gpu", 1.6e-5),
    SyntheticCategory("gpu_hbm3", "gpu", 8.0e-6),
    SyntheticCategory("nic", "gpu", 2.0e-6),
    SyntheticCategory("software_bug", "job", 0.06),
    SyntheticCategory("storage", "job", 0.02),
)
DEMO_SIZES = (8, 64, 256, 1024, 2048)


@dataclass(frozen=True)
class SyntheticLog:
    jobs: pd.DataFrame  # job_id, start, end, gpus (UTC timestamps)
    incidents: pd.DataFrame  # time, job_id, category, node
    categories: tuple[SyntheticCategory, ...]
    lemon_nodes: tuple[str, ...]
    mean_weight: float  # average node weight over the jobs' node-hours (1 with no lemons)

    def mean_rate_per_h(self, category: SyntheticCategory) -> float:
        """The rate a fit should recover: a per-GPU rate raised by the lemons' share of the exposure."""
        return category.rate_per_h * (self.mean_weight if category.scope == "gpu" else 1.0)

    def write(self, folder: str | Path) -> tuple[Path, Path]:
        """jobs.csv and incidents.csv in `folder` (ISO 8601 UTC times)."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        iso = "%Y-%m-%dT%H:%M:%SZ"
        jobs = self.jobs.assign(
            start=self.jobs["start"].dt.strftime(iso), end=self.jobs["end"].dt.strftime(iso)
        )
        inc = self.incidents.assign(time=self.incidents["time"].dt.strftime(iso))
        jobs_path = atomic_write_text(out / "jobs.csv", jobs.to_csv(index=False))
        inc_path = atomic_write_text(out / "incidents.csv", inc.to_csv(index=False))
        return jobs_path, inc_path


def synthetic_log(
    *,
    seed: int = 0,
    jobs: int = 3000,
    sizes: Sequence[int] = DEMO_SIZES,
    categories: Sequence[SyntheticCategory] = DEMO_CATEGORIES,
    span_days: float = 365.0,
    mean_job_h: float = 24.0,
    gpus_per_node: int = 8,
    cluster_nodes: int = 512,
    lemons: int = 3,
    lemon_factor: float = 20.0,
) -> SyntheticLog:
    """Draw a log: `jobs` jobs, sizes uniform over `sizes`, exponential durations of mean `mean_job_h`."""
    rng = np.random.default_rng(seed)
    gpus = rng.choice(np.asarray(sizes), size=jobs)
    if int(gpus.max()) > cluster_nodes * gpus_per_node:
        raise ValueError("a job size is larger than the cluster")
    start_h = rng.uniform(0.0, span_days * 24.0, size=jobs)
    hours = np.maximum(rng.exponential(mean_job_h, size=jobs), 0.01)
    weight = np.ones(cluster_nodes)
    lemon_index = rng.choice(cluster_nodes, size=lemons, replace=False)
    weight[lemon_index] = lemon_factor
    names = np.array([f"node{i:04d}" for i in range(cluster_nodes)])
    rows: list[tuple[int, float, str, str]] = []
    weighted_node_h = 0.0
    node_h = 0.0
    for j in range(jobs):
        n_nodes = max(1, int(np.ceil(gpus[j] / gpus_per_node)))
        held = rng.choice(cluster_nodes, size=n_nodes, replace=False)
        w = weight[held]
        weighted_node_h += w.sum() * hours[j]
        node_h += n_nodes * hours[j]
        for c in categories:
            if c.scope == "gpu":
                mean = c.rate_per_h * gpus[j] * hours[j] * w.mean()
            else:
                mean = c.rate_per_h * hours[j]
            k = int(rng.poisson(mean))
            if not k:
                continue
            t = start_h[j] + rng.uniform(0.0, hours[j], size=k)
            on_node = c.scope == "gpu"
            hit = names[rng.choice(held, size=k, p=w / w.sum())] if on_node else np.full(k, "")
            rows.extend((j, float(ti), c.name, str(node)) for ti, node in zip(t, hit, strict=True))
    job_ids = np.array([f"job{j:06d}" for j in range(jobs)])
    # Whole seconds, as a scheduler logs them; an incident stays inside its job's seconds.
    start = (ORIGIN + pd.to_timedelta(start_h, unit="h")).floor("s")
    end = (ORIGIN + pd.to_timedelta(start_h + hours, unit="h")).ceil("s")
    jobs_frame = pd.DataFrame({"job_id": job_ids, "start": start, "end": end, "gpus": gpus})
    inc = pd.DataFrame(rows, columns=["job", "time_h", "category", "node"]).sort_values(
        "time_h", kind="stable"
    )
    incidents = pd.DataFrame(
        {
            "time": (ORIGIN + pd.to_timedelta(inc["time_h"].to_numpy(), unit="h")).floor("s"),
            "job_id": job_ids[inc["job"].to_numpy()],
            "category": inc["category"].to_numpy(),
            "node": inc["node"].to_numpy(),
        }
    )
    return SyntheticLog(
        jobs_frame,
        incidents,
        tuple(categories),
        tuple(sorted(names[lemon_index])),
        weighted_node_h / node_h if node_h else 1.0,
    )

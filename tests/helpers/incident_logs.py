"""Incident logs the failure-fit tests share: a seeded synthetic log from a known profile written to CSV (the
generator itself is campaign.failures.synthetic, which the demo uses too), and small hand-written logs."""

from __future__ import annotations

from pathlib import Path

from campaign.failures import SyntheticLog, synthetic_log

JOBS_HEADER = "job_id,start,end,gpus"
INCIDENTS_HEADER = "time,job_id,category,node"


def write_log(folder: Path, jobs: list[str], incidents: list[str]) -> tuple[Path, Path]:
    """jobs.csv and incidents.csv from their data lines (the header is added: line 1)."""
    folder.mkdir(parents=True, exist_ok=True)
    jobs_path, incidents_path = folder / "jobs.csv", folder / "incidents.csv"
    jobs_path.write_text("\n".join([JOBS_HEADER, *jobs]) + "\n")
    incidents_path.write_text("\n".join([INCIDENTS_HEADER, *incidents]) + "\n")
    return jobs_path, incidents_path


def known_log(
    folder: Path, seed: int = 1, jobs: int = 3000, **kwargs: object
) -> tuple[SyntheticLog, Path, Path]:
    """A seeded log of `jobs` jobs of five sizes over a year with three lemon nodes of 512, written as CSV."""
    log = synthetic_log(seed=seed, jobs=jobs, **kwargs)  # type: ignore[arg-type]
    jobs_path, incidents_path = log.write(folder)
    return log, jobs_path, incidents_path

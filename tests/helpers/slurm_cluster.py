"""A Slurm cluster on this machine for a test: munged, slurmctld and one slurmd per node, stopped (exactly the
processes it started) at the end. The implementation is `campaign.execution.local_cluster`, shared with
`scripts/slurm-local-cluster` (the same cluster a user starts by hand).

`start_cluster(folder, nodes)` returns None with the reason where it cannot run (the packages are missing, or not
root: slurmd runs jobs as their user and needs root to do so).
"""

import subprocess as _subprocess
import time as _time

from campaign.execution.local_cluster import DAEMONS, DEFAULT_NODES, Cluster, start_cluster, why_not
from campaign.execution.slurm import ENDED as _ENDED

__all__ = ["DAEMONS", "DEFAULT_NODES", "Cluster", "final_job_state", "show_job", "start_cluster", "why_not"]


def show_job(job: str) -> str:
    """`scontrol show job -o` of one job."""
    return _subprocess.run(
        ["scontrol", "show", "job", "-o", job], capture_output=True, text=True, check=True
    ).stdout


def final_job_state(job: str, limit_s: float = 30.0) -> str:
    """`scontrol show job` once the job is in a final state (COMPLETING is not one), or as it is after `limit_s`."""
    until = _time.monotonic() + limit_s
    shown = show_job(job)
    while not any(f"JobState={state} " in shown for state in _ENDED) and _time.monotonic() < until:
        _time.sleep(0.1)
        shown = show_job(job)
    return shown

"""A Slurm cluster on this machine for a test: munged, slurmctld and one slurmd per node, stopped (exactly the
processes it started) at the end. The implementation is `campaign.execution.local_cluster`, shared with
`scripts/slurm-local-cluster` (the same cluster a user starts by hand).

`start_cluster(folder, nodes)` returns None with the reason where it cannot run (the packages are missing, or not
root: slurmd runs jobs as their user and needs root to do so).
"""

from campaign.execution.local_cluster import DAEMONS, DEFAULT_NODES, Cluster, start_cluster, why_not

__all__ = ["DAEMONS", "DEFAULT_NODES", "Cluster", "start_cluster", "why_not"]

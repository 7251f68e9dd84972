"""The settings of a multi-node real run from a campaign's config (`execute.job_nodes` above 1, or spares)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from campaign.config import CampaignConfig
from campaign.errors import ConfigError
from campaign.execution.multinode import MultiNodeSettings
from campaign.execution.run import real_run_settings
from campaign.rehearsal.processes import resolve_command

DISTRIBUTED_TRAINER = ("python", "-m", "campaign.rehearsal.distributed")


def is_multinode(config: CampaignConfig) -> bool:
    ex = config.execute
    return ex.backend == "slurm" and (ex.job_nodes > 1 or ex.spare_nodes > 0)


def multinode_settings(
    config: CampaignConfig, workspace: Path, folder: Path, python: str = sys.executable
) -> MultiNodeSettings:
    """A multi-node run of `config` in `folder`: the one-node run's settings, the data-parallel reference trainer
    unless `execute.command` names another, and the job's nodes, spares and policies."""
    ex, r = config.execute, config.rehearsal
    if r.batch_sequences % ex.job_nodes:
        raise ConfigError(
            f"rehearsal.batch_sequences {r.batch_sequences} does not split into {ex.job_nodes} equal gradient shards",
            where="execute.job_nodes",
            fix=f"use a job_nodes that divides {r.batch_sequences}, or set rehearsal.batch_sequences to a multiple",
        )
    run = real_run_settings(config, workspace, folder, python)
    if ex.command is None:
        run = replace(run, command=resolve_command(list(DISTRIBUTED_TRAINER), python))
    return MultiNodeSettings(
        run, ex.job_nodes, ex.spare_nodes, ex.stragglers, ex.straggler_factor, ex.elastic, ex.partition
    )

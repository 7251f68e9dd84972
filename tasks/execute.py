"""Execute: check the commitment still matches, then simulate the committed window and record it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast
from uuid import UUID

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact

from campaign import store
from campaign.approval import read_pending
from campaign.config import CampaignConfig, LoadedConfig
from campaign.errors import Refused
from campaign.evidence import gate_file_changes, gate_files, read_evidence
from campaign.figures import tokens_b
from campaign.files import atomic_write_parquet
from campaign.gates import execute_problems
from campaign.plan import make_plan
from campaign.sim import simulate
from campaign.window import window_inputs
from tasks.artifacts import artifact_key


@dataclass(frozen=True)
class ExecutionRecord:
    commitment_id: str
    replica: int
    reused: bool
    ettr: float
    tokens_trained: float
    completed: bool
    completion_s: float | None = None  # seconds from the window start to the job's end (None: not finished)


@task(name="check-commitment", cache_policy=None)
def check_commitment(ws: store.Workspace, loaded: LoadedConfig) -> store.Commitment:
    """The commitment for this config and the data on disk, or refuse naming what is missing or changed."""
    evidence = read_evidence(
        ws.data_dir, loaded.config.data.in_workspace(ws.root), files=gate_files(loaded.config)
    )
    current = evidence.digest if evidence is not None else None
    changed = list(evidence.problems) if evidence is not None else []
    booked = store.commitments(ws)
    if evidence is not None and booked and all(c.data_digest != current for c in booked):
        committed = store.latest_gates(ws, booked[0].config_digest, booked[0].data_digest).get(
            "data_identity"
        )
        if committed is not None:
            changed += gate_file_changes(committed.details.get("gate_files"), evidence.gate_files, "commit")
    recorded = store.latest_gates(ws, loaded.digest, current) if current else {}
    validated = bool(recorded) or store.ever_validated(ws)
    problems = execute_problems(booked, loaded.digest, current, changed, recorded, validated)
    pending = read_pending(ws.root)
    if problems and pending:
        problems.insert(0, pending.describe())
    if problems:
        raise Refused(
            "execute refused:\n  - " + "\n  - ".join(problems),
            where=str(ws.root),
            fix="no flag skips this: prepare, validate and commit the data and config you want to run",
        )
    return next(c for c in booked if c.config_digest == loaded.digest and c.data_digest == current)


@task(name="simulate-window", cache_policy=None)
def simulate_window(
    ws: store.Workspace, config: CampaignConfig, commitment: store.Commitment, run_id: str, replica: int = 0
) -> ExecutionRecord:
    if store.has_replica(ws, commitment.commitment_id, replica):
        get_run_logger().info("window %s already executed; reusing its record", commitment.commitment_id)
        summary = store.replica_summary(ws, commitment.commitment_id, replica)
        store.record_execution(ws, run_id, commitment.commitment_id, replica, reused=True)
        return ExecutionRecord(
            commitment.commitment_id,
            replica,
            True,
            summary["ettr"],
            summary["tokens_trained"],
            summary["completed"],
            summary.get("completion_s"),
        )
    plan = make_plan(config)
    # Progress as simulated time advances: one Prefect progress artifact, updated every 2%.
    # Prefect types its sync-compatible functions as returning the value or a coroutine; called from sync code
    # they return the value.
    progress_id = cast(
        UUID,
        create_progress_artifact(
            0.0,
            key=artifact_key(config.name, "execute-progress"),
            description=f"window {commitment.commitment_id}: simulated time",
        ),
    )

    def report(fraction: float, t_s: float, tokens: float) -> None:
        update_progress_artifact(
            progress_id,
            100.0 * fraction,
            description=f"window {commitment.commitment_id}: day {t_s / 86400:.1f}, {tokens:.4g} tokens",
        )

    result = simulate(window_inputs(config, plan), replica=replica, on_progress=report)
    summary = result.summary.copy()
    summary["checkpoint_interval_optimal_s"] = plan.checkpoint.optimal_interval_s
    summary["plan"] = plan.to_json()
    # Keyed by commitment: a second window never overwrites the files of the first.
    sim_dir = ws.sim_dir / commitment.commitment_id
    atomic_write_parquet(sim_dir / f"events-{replica}.parquet", _arrow(result.events))
    atomic_write_parquet(sim_dir / f"power-{replica}.parquet", _arrow(result.power))
    store.record_replica(
        ws, run_id, commitment.commitment_id, replica, config.seed, summary, result.events, result.power
    )
    store.record_execution(ws, run_id, commitment.commitment_id, replica, reused=False)
    create_markdown_artifact(
        key=artifact_key(config.name, "execute-summary"),
        markdown=(
            f"# Window {commitment.commitment_id}\n\n* ETTR **{summary['ettr']:.3f}**\n"
            f"* tokens trained {tokens_b(summary['tokens_trained'])} of {tokens_b(summary['tokens_target'])}\n"
            f"* unexpected interruptions {summary['interruptions']['unexpected']}, "
            f"planned {summary['interruptions']['planned']}\n"
        ),
    )
    get_run_logger().info(
        "window simulated: ETTR %.3f, %.4g tokens, %s unexpected interruptions",
        summary["ettr"],
        summary["tokens_trained"],
        summary["interruptions"]["unexpected"],
    )
    return ExecutionRecord(
        commitment.commitment_id,
        replica,
        False,
        summary["ettr"],
        summary["tokens_trained"],
        summary["completed"],
        summary.get("completion_s"),
    )


def _arrow(frame):
    import pyarrow as pa

    return pa.Table.from_pandas(frame, preserve_index=False)

"""Execute: check the commitment still matches, then simulate the committed window and record it."""

from __future__ import annotations

from dataclasses import dataclass

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact

from campaign import store
from campaign.config import CampaignConfig
from campaign.data import clean_file_hashes, digest_of_hashes, read_manifest, verify_clean_files
from campaign.errors import Refused
from campaign.files import atomic_write_parquet
from campaign.gates import execute_problems
from campaign.plan import make_plan
from campaign.sim import simulate
from campaign.window import window_inputs


@dataclass(frozen=True)
class ExecutionRecord:
    commitment_id: str
    replica: int
    reused: bool
    ettr: float
    tokens_trained: float
    completed: bool


@task(name="check-commitment", cache_policy=None)
def check_commitment(ws: store.Workspace, config_digest: str) -> store.Commitment:
    """The commitment for this config and the data on disk, or refuse naming what is missing or changed."""
    manifest = read_manifest(ws.data_dir)
    current, changed = None, []
    if manifest is not None:
        hashes = clean_file_hashes(ws.data_dir / "clean")  # hash the files once for both checks
        current = digest_of_hashes(hashes)
        changed = verify_clean_files(ws.data_dir, hashes)
    booked = store.commitments(ws)
    recorded = store.gates_for(ws, config_digest, current) if current else {}
    problems = execute_problems(booked, config_digest, current, changed, recorded)
    if problems:
        raise Refused("execute refused:\n  - " + "\n  - ".join(problems), where=str(ws.root),
                      fix="no flag skips this: prepare, validate and commit the data and config you want to run")
    return next(c for c in booked if c.config_digest == config_digest and c.data_digest == current)


@task(name="simulate-window", cache_policy=None)
def simulate_window(ws: store.Workspace, config: CampaignConfig, commitment: store.Commitment, run_id: str,
                    replica: int = 0) -> ExecutionRecord:
    if store.has_replica(ws, commitment.commitment_id, replica):
        get_run_logger().info("window %s already executed; reusing its record", commitment.commitment_id)
        summary = store.replica_summary(ws, commitment.commitment_id, replica)
        return ExecutionRecord(commitment.commitment_id, replica, True, summary["ettr"], summary["tokens_trained"],
                               summary["completed"])
    plan = make_plan(config)
    # Progress as simulated time advances (issue 9): one Prefect progress artifact, updated every 2%.
    progress_id = create_progress_artifact(0.0, key="execute-progress",
                                           description=f"window {commitment.commitment_id}: simulated time")

    def report(fraction: float, t_s: float, tokens: float) -> None:
        update_progress_artifact(progress_id, 100.0 * fraction,
                                 description=f"window {commitment.commitment_id}: day {t_s / 86400:.1f}, "
                                 f"{tokens:.4g} tokens")

    result = simulate(window_inputs(config, plan), replica=replica, on_progress=report)
    summary = dict(result.summary)
    summary["checkpoint_interval_optimal_s"] = plan.checkpoint.optimal_interval_s
    summary["plan"] = plan.to_json()
    atomic_write_parquet(ws.sim_dir / f"events-{replica}.parquet", _arrow(result.events))
    atomic_write_parquet(ws.sim_dir / f"power-{replica}.parquet", _arrow(result.power))
    store.record_replica(ws, run_id, commitment.commitment_id, replica, config.seed, summary, result.events,
                         result.power)
    create_markdown_artifact(key="execute-summary", markdown=(
        f"# Window {commitment.commitment_id}\n\n* ETTR **{summary['ettr']:.3f}**\n"
        f"* tokens trained {summary['tokens_trained']:.4g} of {summary['tokens_target']:.4g}\n"
        f"* unexpected interruptions {summary['interruptions']['unexpected']}, "
        f"planned {summary['interruptions']['planned']}\n"))
    get_run_logger().info("window simulated: ETTR %.3f, %.4g tokens, %s unexpected interruptions",
                          summary["ettr"], summary["tokens_trained"], summary["interruptions"]["unexpected"])
    return ExecutionRecord(commitment.commitment_id, replica, False, summary["ettr"], summary["tokens_trained"],
                           summary["completed"])


def _arrow(frame):
    import pyarrow as pa

    return pa.Table.from_pandas(frame, preserve_index=False)

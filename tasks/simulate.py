"""What-if replicas of a window: one task per batch of replicas (one batch per worker), summaries only."""

from __future__ import annotations

import json
import time

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from campaign import store
from campaign.sim.inputs import SimInputs
from campaign.sim.summary import ReplicaSummary
from campaign.sim.sweeps import best_line
from campaign.sql.rows import scalar
from tasks.artifacts import artifact_key, sweep_key


@task(
    name="simulate-batch",
    task_run_name="simulate-replicas-{replicas.start}-{replicas.stop}",
    cache_policy=None,
)
def simulate_replica_batch(
    inputs: SimInputs, replicas: range, band: tuple[float, float] = (1.0, 1.0)
) -> list[ReplicaSummary]:
    # Only the summaries cross back to the flow: no event log or power series is built (fast path). The compiled
    # kernels release the GIL, so batches on threads of one process use every core.
    from campaign.sim.replicas import simulate_batch  # the compiled kernels: imported by the first batch

    started = time.perf_counter()
    summaries = simulate_batch(inputs, replicas, band)
    get_run_logger().info(
        "replicas %d..%d simulated in %.2f s",
        replicas.start,
        replicas.stop - 1,
        time.perf_counter() - started,
    )
    return summaries


@task(name="record-sweep", cache_policy=None)
def record_sweep(
    ws: store.Workspace, sweep_id: str, config_digest: str, seed: int, replicas: int, rows: list[dict]
) -> int:
    """Store the sweep's rows in the catalog (once per sweep id) and publish them as a table artifact."""
    store.adopt_workspace(ws, ws.root.name)  # never writes into a folder campaign does not own
    with store.locked(ws, "campaign simulate --sweep"), store.catalog(ws) as con, store.transaction(con):
        seen = scalar(con, "SELECT count(*) FROM sim_sweeps WHERE sweep_id = ?", [sweep_id])
        if not seen:
            for r in rows:
                con.execute(
                    "INSERT INTO sim_sweeps (sweep_id, point, config_digest, seed, replicas, sweep_values, "
                    "ettr_mean, ettr_p10, ettr_p90, window_utilisation_mean, completion_days_p10, "
                    "completion_days_p50, completion_days_p90, p_complete_in_window, energy_mwh, cost_usd, "
                    "is_best, created_at, target_days_p90, p_target_in_window) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        sweep_id,
                        r["point"],
                        config_digest,
                        seed,
                        replicas,
                        json.dumps(r["values"]),
                        r["ettr_mean"],
                        r["ettr_p10"],
                        r["ettr_p90"],
                        r["window_utilisation_mean"],
                        r["completion_days_p10"],
                        r["completion_days_p50"],
                        r["completion_days_p90"],
                        r["p_complete_in_window"],
                        r["energy_mwh"],
                        r["cost_usd"],
                        r["is_best"],
                        store.now(),
                        r["target_days_p90"],
                        r["p_target_in_window"],
                    ],
                )
    table = [{**{k: v for k, v in r.items() if k != "values"}, **r["values"]} for r in rows]
    create_table_artifact(
        key=sweep_key(sweep_id),
        table=table,
        description=f"campaign simulate --sweep: {replicas} replicas per point, seed {seed}",
    )
    best = next((r for r in rows if r["is_best"]), None)
    figures = (
        f" (P(target in window) {best['p_target_in_window']:.2f}, ETTR {best['ettr_mean']:.4f})"
        if best
        else ""
    )
    get_run_logger().info(
        "sweep %s: %d points, %s%s%s",
        sweep_id[:12],
        len(rows),
        best_line(rows),
        figures,
        " (already in the catalog)" if seen else "",
    )
    return len(rows)


def simulate_artifact_key(campaign: str) -> str:
    """`simulate-<campaign>`, keyed like every campaign artifact (tasks/artifacts.py)."""
    return artifact_key(campaign, "simulate")


@task(name="publish-simulation", cache_policy=None)
def publish_simulation(campaign: str, result: dict) -> str:
    """The run's result where the UI shows it: a summary markdown artifact and a table artifact."""
    from campaign.sim.replicas import summary_markdown, summary_table

    key = simulate_artifact_key(campaign)
    summary = result["summary"]
    create_markdown_artifact(
        key=key,
        markdown=summary_markdown(campaign, result["replicas"], result["seed"], summary),
        description=f"campaign simulate {campaign}: {result['replicas']} replicas",
    )
    create_table_artifact(
        key=artifact_key(campaign, "simulate-table"),
        table=summary_table(summary),
        description=f"campaign simulate {campaign}: distributions over {result['replicas']} replicas",
    )
    get_run_logger().info(
        "%d replicas: ETTR mean %.4f; artifacts %s, %s",
        result["replicas"],
        summary["ettr"]["mean"],
        key,
        artifact_key(campaign, "simulate-table"),
    )
    return key

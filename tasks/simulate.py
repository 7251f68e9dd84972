"""What-if replicas of a window: one task per batch of replicas (one batch per worker), summaries only."""

from __future__ import annotations

import time

from prefect import get_run_logger, task

from campaign.sim import SimInputs, simulate_batch


@task(name="simulate-batch", task_run_name="simulate-replicas-{replicas.start}-{replicas.stop}", cache_policy=None)
def simulate_replica_batch(inputs: SimInputs, replicas: range) -> list[dict]:
    # Only the summaries cross back to the flow: no event log or power series is built (fast path).
    started = time.perf_counter()
    summaries = simulate_batch(inputs, replicas)
    get_run_logger().info("replicas %d..%d simulated in %.2f s", replicas.start, replicas.stop - 1,
                          time.perf_counter() - started)
    return summaries

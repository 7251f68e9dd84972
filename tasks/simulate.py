"""What-if replicas of a window: one task per batch of replicas (one batch per worker), summaries only."""

from __future__ import annotations

import sys
import time

from prefect import get_run_logger, task

from campaign.sim import SimInputs, simulate_batch


@task(name="simulate-batch", task_run_name="simulate-replicas-{replicas.start}-{replicas.stop}", cache_policy=None)
def simulate_replica_batch(inputs: SimInputs, replicas: range) -> list[dict]:
    # Only the summaries cross back to the flow: no event log or power series is built (fast path).
    started = time.perf_counter()
    # The worker process keeps Prefect's threads (event loop, message forwarder) alive beside this CPU-bound
    # batch; at the default 5 ms switch interval they take the GIL back hundreds of times a second for nothing.
    # Measured: ~25% faster per replica with a 0.5 s interval (benchmarks/simulate/README.md).
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    try:
        summaries = simulate_batch(inputs, replicas)
    finally:
        sys.setswitchinterval(interval)
    get_run_logger().info("replicas %d..%d simulated in %.2f s", replicas.start, replicas.stop - 1,
                          time.perf_counter() - started)
    return summaries

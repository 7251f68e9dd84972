"""What-if replicas of a window: simulate one replica per task, on whichever task runner the flow uses."""

from __future__ import annotations

from prefect import task

from campaign.sim import SimInputs, simulate


@task(name="simulate-replica", task_run_name="simulate-replica-{replica}", cache_policy=None)
def simulate_replica(inputs: SimInputs, replica: int) -> dict:
    # Only the summary crosses back to the flow: events and power stay in the worker.
    return simulate(inputs, replica=replica).summary

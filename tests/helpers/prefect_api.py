"""Read what the Prefect UI shows (runs, their states and logs, artifacts) from the test harness's API."""

import contextlib
import time
from collections.abc import Callable

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterName,
    LogFilter,
    LogFilterFlowRunId,
)
from prefect.client.schemas.sorting import ArtifactSort, FlowRunSort


def drain() -> None:
    """Send the logs and events still queued in this process."""
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)


def latest_flow_run(name_prefix: str):
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=name_prefix)),
            sort=FlowRunSort.START_TIME_DESC,
            limit=1,
        )
    assert runs, f"no flow run named {name_prefix}..."
    return runs[0]


def task_runs_of(
    flow_run_id, settled: Callable[[list], bool] = lambda runs: True, timeout_s: float = 30
) -> list:
    """The flow run's task runs, read again until `settled(runs)` (or the timeout): Prefect 3 records task runs
    from events, so a run's templated name (`gate-{row.gate}`) and final state reach the API a moment later."""
    from prefect.events.worker import EventsWorker

    deadline = time.monotonic() + timeout_s
    while True:
        drain()
        with contextlib.suppress(Exception):
            EventsWorker.drain_all(timeout=10)
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
        if settled(runs) or time.monotonic() > deadline:
            return runs
        time.sleep(0.5)


def log_messages(flow_run_ids: list) -> list[str]:
    drain()
    with get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=list(flow_run_ids))))
    return [log.message for log in logs]


def latest_artifact(key: str):
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            limit=1,
            sort=ArtifactSort.CREATED_DESC,
        )
    return found[0] if found else None


def flow_runs_since(started) -> list:
    """Every flow run (subflows too) created at or after `started` (a UTC datetime)."""
    from prefect.client.schemas.filters import FlowRunFilterExpectedStartTime

    with get_client(sync_client=True) as client:
        return client.read_flow_runs(
            flow_run_filter=FlowRunFilter(expected_start_time=FlowRunFilterExpectedStartTime(after_=started)),
            sort=FlowRunSort.START_TIME_DESC,
        )

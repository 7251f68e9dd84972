"""The ASGI app of a CLI command's private Prefect API: Prefect's own server app without its background worker.

`campaign_cli/local_api.py` starts this with uvicorn when no `PREFECT_API_URL` is set. It is Prefect's `create_app`
(the app Prefect's ephemeral mode serves) with one change: the server's background-task worker (pydocket on
an in-memory Redis) is not started. Its jobs are a long-lived server's housekeeping: marking late scheduled runs,
failing expired pauses, cascading cancellations, deleting logs of deleted runs, vacuuming old events, proactive
automation triggers. A private API has no deployments, schedules or automations and lives only as long as its
command, so none of them can come due; the task-run recorder and event persister, which the command's runs do
need, are services of their own and run as usual. The worker polled its queue every 0.25 s and its
cancellation channel every 0.1 s, each poll a Lua script or a thread hop in the in-memory Redis: more than half of
an idle server's CPU (benchmarks/results/2026-12-03-local-api.md).
Jobs the API enqueues are dropped with the server when the command ends.
"""

from __future__ import annotations

from contextlib import asynccontextmanager


@asynccontextmanager
async def _no_background_worker(docket, ephemeral: bool = False, webserver_only: bool = False):
    yield


def create_app():
    """uvicorn's `--factory` entry point."""
    from prefect.server.api import server

    if hasattr(server, "background_worker"):  # Prefect 3.5+: the lifespan enters it by this module-level name
        server.background_worker = _no_background_worker
    return server.create_app()

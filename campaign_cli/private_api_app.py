"""The ASGI app of the CLI's local Prefect API: Prefect's own server app without its background worker, and,
for a server kept between commands, a watchdog that stops it once no command has used it for a while.

`campaign_cli/local_api.py` starts this with uvicorn when no `PREFECT_API_URL` is set. It is Prefect's `create_app`
(the app Prefect's ephemeral mode serves) with one change: the server's background-task worker (pydocket on
an in-memory Redis) is not started. Its jobs are a long-lived server's housekeeping: marking late scheduled runs,
failing expired pauses, cascading cancellations, deleting logs of deleted runs, vacuuming old events, proactive
automation triggers. A private API has no deployments, schedules or automations and lives only as long as its
command, so none of them can come due; the task-run recorder and event persister, which the command's runs do
need, are services of their own and run as usual. The worker polled its queue every 0.25 s and its
cancellation channel every 0.1 s, each poll a Lua script or a thread hop in the in-memory Redis: more than half of
an idle server's CPU (benchmarks/results/2026-12-03-local-api.md).
Jobs the API enqueues are dropped with the server when it stops.

A kept server (CAMPAIGN_SERVER_HOME set, campaign_cli/local_api.py) checks its commands' leases every second and,
once none has been live for CAMPAIGN_SERVER_IDLE_S seconds, unpublishes itself and stops (SIGTERM to itself: uvicorn
shuts down cleanly). A lease whose command died, even by SIGKILL, counts as gone.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path


@asynccontextmanager
async def _no_background_worker(docket, ephemeral: bool = False, webserver_only: bool = False):
    yield


def watch_idle(home: Path, idle_s: float, poll_s: float = 1.0) -> None:
    """Return once no command has held a lease on `home`'s server for `idle_s` seconds and the server has been
    unpublished (campaign_cli.local_api.retire), or once `home` is gone."""
    from campaign_cli.local_api import live_leases, retire

    last_busy = time.monotonic()
    while True:
        time.sleep(poll_s)
        if not home.is_dir():
            return
        if live_leases(home):
            last_busy = time.monotonic()
        elif time.monotonic() - last_busy >= idle_s and retire(home, os.getpid()):
            return


def _stop_when_idle(home: Path, idle_s: float) -> None:
    watch_idle(home, idle_s, poll_s=min(1.0, max(0.2, idle_s / 4)))
    os.kill(os.getpid(), signal.SIGTERM)


def create_app():
    """uvicorn's `--factory` entry point."""
    from prefect.server.api import server

    from campaign_cli.local_api import HOME_ENV, IDLE_ENV

    if hasattr(server, "background_worker"):  # Prefect 3.5+: the lifespan enters it by this module-level name
        server.background_worker = _no_background_worker
    home = os.environ.get(HOME_ENV)
    if home:
        idle_s = float(os.environ.get(IDLE_ENV) or 600)
        threading.Thread(
            target=_stop_when_idle, args=(Path(home), idle_s), name="idle-watch", daemon=True
        ).start()
    return server.create_app()

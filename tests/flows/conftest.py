"""One local Prefect API for every flow test in the session: the server a `campaign` command keeps for a workspace
(campaign_cli/local_api.py: Prefect's own app without its background-task worker, on a copy of a database migrated
once per Prefect version), started for this pytest run only. Prefect's `prefect_test_harness` migrated a new database
and ran the server's background worker: 8.4 CPU-s to start against 3.0, and 0.79 CPU-s an idle minute against
0.14 (benchmarks/results/2026-12-05-test-cpu.md)."""

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.paths import DEMO, FAST_REHEARSAL, set_args
from tests.helpers.saved import SavedFolder


@pytest.fixture(autouse=True, scope="session")
def prefect_harness(tmp_path_factory):
    from prefect.context import _temporary_global_settings_context, get_settings_context
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from campaign_cli.local_api import flush_to_api, private_server

    # The heartbeat thread costs ~1 s per flow run and cannot be switched off by environment variable.
    with (
        private_server(tmp_path_factory.mktemp("prefect_api")) as url,
        temporary_settings({PREFECT_API_URL: url, PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),
    ):
        # The process-wide settings too, as prefect_test_harness does: code in a context copied earlier sees it.
        with _temporary_global_settings_context(get_settings_context()):
            yield
        flush_to_api()  # the run logs and events still queued go out while their server is up


@pytest.fixture(scope="session")
def run_tmp(tmp_path_factory) -> Path:
    """A folder this pytest run's xdist workers share (the run's own base folder without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def demo_inputs_jax(run_tmp) -> list[str]:
    """Overrides that point the demo config at this run's copy of the generated demo corpus.

    One folder for every worker, so a workspace prepared in one worker (`demo_prepared`) is valid in all: the
    manifest names its inputs by absolute path. The corpus is written here first, under a lock; a later prepare
    writes the same bytes again, each file replaced atomically, so a reader never sees a partial file."""
    from filelock import FileLock

    from campaign.config import load_config
    from campaign.data import write_demo_corpus
    from campaign.data.demo_corpus import DEMO_MARKER

    root = run_tmp / "demo_inputs"
    with FileLock(run_tmp / "demo_inputs.lock"):
        if not (root / DEMO_MARKER).is_file():
            write_demo_corpus(root, seed=load_config(DEMO).config.seed)
    return [
        f"data.demo_corpus_dir={root}",
        f"data.sources.0.path={root}/web/*.jsonl",
        f"data.sources.1.path={root}/docs/*.parquet",
    ]


@pytest.fixture(scope="session")
def demo_inputs(demo_inputs_jax) -> list[str]:
    """The same, with the rehearsal gate on the fast contract-following trainer (tests/helpers/paths.py)."""
    return [*demo_inputs_jax, *FAST_REHEARSAL]


@pytest.fixture(scope="session")
def demo_prepared(run_tmp, demo_inputs) -> SavedFolder:
    """The demo prepared once per pytest run on `demo_inputs`, for tests whose subject comes after prepare:
    `demo_prepared.restore_to(ws)` copies it. Its digests are content-based and no file or catalog row of a
    prepared workspace holds the workspace's own path, so a copy is what a prepare there would have made; prepare
    reads only the `data:` section, so it serves any gate, plan, cluster or window settings (each ~10 CPU-s)."""
    from filelock import FileLock

    from campaign_cli.cli import main

    saved = run_tmp / "demo_prepared"
    with FileLock(run_tmp / "demo_prepared.lock"):
        if not saved.is_dir():
            ws = run_tmp / "demo_prepared.tmp" / "w"
            shutil.rmtree(ws.parent, ignore_errors=True)
            assert main(["prepare", str(DEMO), "--workspace", str(ws), *set_args(demo_inputs)]) == 0
            ws.rename(saved)  # only a finished prepare is ever seen
    return SavedFolder.of(saved)


@pytest.fixture(autouse=True)
def prefect_console_to_real_stderr():
    """Point Prefect's console handlers at the real stderr: pytest's capture streams close between tests."""
    import logging
    import sys

    from prefect.logging.handlers import PrefectConsoleHandler

    for name in [None, *logging.root.manager.loggerDict]:
        for handler in getattr(logging.getLogger(name), "handlers", []):
            if isinstance(handler, PrefectConsoleHandler):
                handler.stream = sys.__stderr__  # not setStream(): it flushes the closed stream first
                handler.console.file = sys.__stderr__
    yield

"""One local Prefect API for every flow test in the session: the server a `campaign` command keeps for a workspace
(campaign_cli/local_api.py: Prefect's own app without its background-task worker, on a copy of a database migrated
once per Prefect version), started for this pytest run only. Prefect's `prefect_test_harness` migrated a new database
and ran the server's background worker: 8.4 CPU-s to start against 3.0, and 0.79 CPU-s an idle minute against
0.14 (benchmarks/results/2026-12-05-test-cpu.md)."""

import pytest

from tests.helpers.paths import FAST_REHEARSAL


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
def demo_inputs_jax(tmp_path_factory) -> list[str]:
    """Overrides that point the demo config at a private copy of the generated demo corpus."""
    root = tmp_path_factory.mktemp("demo_inputs")
    return [
        f"data.demo_corpus_dir={root}",
        f"data.sources.0.path={root}/web/*.jsonl",
        f"data.sources.1.path={root}/docs/*.parquet",
    ]


@pytest.fixture(scope="session")
def demo_inputs(demo_inputs_jax) -> list[str]:
    """The same, with the rehearsal gate on the fast contract-following trainer (tests/helpers/paths.py)."""
    return [*demo_inputs_jax, *FAST_REHEARSAL]


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

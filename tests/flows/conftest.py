"""One Prefect test harness for every flow test in the session (9-13 s to start on 2 idle cores; far longer on a
busy machine, hence the generous start timeout)."""

import pytest

from tests.helpers.paths import FAST_REHEARSAL


@pytest.fixture(autouse=True, scope="session")
def prefect_harness():
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    # The heartbeat thread costs ~1 s per flow run and cannot be switched off by environment variable.
    with (
        prefect_test_harness(server_startup_timeout=240),
        temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),
    ):
        yield


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

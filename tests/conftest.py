"""Shared test set-up: quiet Prefect and GX before anything imports them, and mark each test with its tier."""

import os
from pathlib import Path

import pytest

import tests.helpers.examples  # noqa: F401 - loads the Hypothesis profile before any test module builds its settings

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_UI_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("CAMPAIGN_LOCK_WAIT_S", "1")

# The tiers (declared in pyproject.toml), one per folder: `pytest -m unit`, `-m "not e2e"`, ...
TIERS = ("unit", "reference", "flows", "e2e")
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        tier = item.path.relative_to(TESTS).parts[0]
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))

"""Shared test set-up: quiet Prefect and GX before anything imports them."""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_UI_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("CAMPAIGN_LOCK_WAIT_S", "1")

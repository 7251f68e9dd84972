"""The private Prefect API of a CLI command: Prefect's own app without its background-task worker."""

from prefect.server.api import server

from campaign_cli import private_api_app
from campaign_cli.local_api import _server_env


def test_the_private_app_is_prefects_without_the_background_worker() -> None:
    saved = server.background_worker
    try:
        app = private_api_app.create_app()
        assert server.background_worker is private_api_app._no_background_worker
        assert any(getattr(r, "path", "") == "/api" for r in app.routes)  # Prefect's API is mounted as usual
    finally:
        server.background_worker = saved


def test_the_private_server_runs_no_automation_triggers(tmp_path) -> None:
    env = _server_env(tmp_path, fresh_schema=False)
    assert env["PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED"] == "false"
    assert env["PREFECT_API_DATABASE_MIGRATE_ON_START"] == "false"

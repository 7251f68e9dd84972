"""The kept worker's identity and its errors, without starting one (tests/e2e/test_kept_worker.py starts one)."""

import os
import sys
from pathlib import Path

from campaign.errors import CampaignError, ConfigError, DiskFull
from campaign_cli import kept_worker


def test_identity_changes_with_the_environment_but_not_with_a_terminals_variables(monkeypatch):
    before = kept_worker.identity()
    monkeypatch.setenv("PWD", "/somewhere/else")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another test")
    assert kept_worker.identity() == before
    monkeypatch.setenv("CAMPAIGN_LOCK_WAIT_S", "7")
    assert kept_worker.identity() != before


def test_identity_changes_with_the_code(tmp_path, monkeypatch):
    (tmp_path / "campaign").mkdir()
    (tmp_path / "campaign" / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(kept_worker, "ROOT", tmp_path)
    before = kept_worker.identity()
    (tmp_path / "campaign" / "a.py").write_text("x = 22\n")
    assert kept_worker.identity() != before


def test_an_error_from_the_worker_keeps_its_kind_place_fix_and_exit_code():
    err = ConfigError("bad value", where="--replicas", fix="fewer")
    back = kept_worker._error_of(kept_worker._fields(err))
    assert isinstance(back, ConfigError) and back.render() == err.render() and back.exit_code == 2
    full = kept_worker._error_of(kept_worker._fields(DiskFull.writing("/x", "no space")))
    assert isinstance(full, DiskFull) and full.exit_code == 74
    unknown = kept_worker._error_of({"kind": "Nope", "message": "m", "exit_code": 70})
    assert type(unknown) is CampaignError and unknown.exit_code == 70


def test_no_worker_with_an_api_of_the_users_or_a_server_that_stops_with_its_command(monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    if (
        "prefect" in sys.modules
    ):  # a flow test's harness earlier in this process left its API in Prefect's settings
        from prefect.settings import get_current_settings

        monkeypatch.setattr(get_current_settings().api, "url", None)
    monkeypatch.delenv(kept_worker.ENABLE_ENV, raising=False)
    monkeypatch.setenv("CAMPAIGN_SERVER_IDLE_S", "600")
    assert kept_worker.enabled()
    monkeypatch.setenv(kept_worker.ENABLE_ENV, "0")
    assert not kept_worker.enabled()
    monkeypatch.delenv(kept_worker.ENABLE_ENV)
    monkeypatch.setenv("CAMPAIGN_SERVER_IDLE_S", "0")
    assert not kept_worker.enabled()
    monkeypatch.setenv("CAMPAIGN_SERVER_IDLE_S", "600")
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:1/api")
    assert not kept_worker.enabled()


def test_a_deep_workspace_and_a_deep_tmpdir_still_get_a_socket_path_that_fits(tmp_path, monkeypatch):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    assert kept_worker.socket_path(tmp_path, 123) == tmp_path / "worker-123.sock"  # short: beside the server
    deep.mkdir(parents=True)
    monkeypatch.setattr(
        kept_worker.local_api, "temporary_home", lambda: deep
    )  # TMPDIR as deep as the workspace
    path = kept_worker.socket_path(deep, 123)
    assert path == Path("/tmp") / f"campaign-{os.getuid()}" / "worker-123.sock"
    assert len(os.fsencode(path)) <= 100 and path.parent.stat().st_mode & 0o777 == 0o700

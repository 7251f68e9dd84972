"""The local Prefect API of CLI commands, without starting one: leases, finding and stopping a kept server, the idle
watch, where its files go, and a PREFECT_API_URL that does not answer."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaign.errors import ConfigError
from campaign_cli import local_api, private_api_app
from campaign_cli.cli import main
from tests.helpers.fake_servers import fake_kept_server as _fake_server
from tests.helpers.paths import DEMO


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CAMPAIGN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_lease_lives_as_long_as_its_process(tmp_path) -> None:
    lease = local_api._take_lease(tmp_path)
    stale = [
        tmp_path / "clients" / f"{_dead_pid()}-1",
        tmp_path / "clients" / f"{os.getpid()}-0",
        tmp_path / "clients" / "junk",
    ]
    for path in stale:
        path.touch()
    assert local_api.live_leases(tmp_path) == [os.getpid()]
    assert sorted(p.name for p in (tmp_path / "clients").iterdir()) == [lease.name]  # stale leases removed


def test_a_server_json_naming_another_process_is_no_server(tmp_path) -> None:
    (tmp_path / "server.json").write_text(json.dumps({"pid": os.getpid(), "port": 1, "url": "x"}))
    assert local_api.server_info(tmp_path) is None
    (tmp_path / "server.json").write_text("{not json")
    assert local_api.server_info(tmp_path) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_server_stop_stops_every_kept_server_and_status_lists_them(tmp_path, cache, capsys) -> None:
    with _fake_server(tmp_path / "w1" / ".prefect") as one, _fake_server(tmp_path / "w2" / ".prefect") as two:
        assert main(["server", "status"]) == 0
        listed = capsys.readouterr().out
        assert str(one.pid) in listed and str(two.pid) in listed
        assert main(["server", "stop", "--workspace", str(tmp_path / "w1")]) == 0
        assert one.wait(timeout=15) is not None and two.poll() is None
        assert main(["server", "stop", "--all"]) == 0
        assert two.wait(timeout=15) is not None
        assert "stopped" in capsys.readouterr().out
    assert not (tmp_path / "w1" / ".prefect" / "server.json").exists()
    assert local_api.running_servers() == []
    assert main(["server", "stop", "--all"]) == 0
    assert "no local Prefect server was running" in capsys.readouterr().out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_server_stop_stops_only_this_folders_workspaces_and_the_shared_one_by_name(
    tmp_path, cache, capsys, monkeypatch
) -> None:
    """Two checkouts, each with a workspace's server, and the shared server of commands without a workspace:
    `campaign server stop` in one checkout stops its own only; `shared` and `--all` by name."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(local_api.tempfile, "tempdir", None)  # TMPDIR read again
    shared_home = local_api.temporary_home()
    shared_home.rmdir()
    a, b = tmp_path / "checkout-a", tmp_path / "checkout-b"
    with (
        _fake_server(a / "workspace" / "demo" / ".prefect") as mine,
        _fake_server(b / "workspace" / "demo" / ".prefect") as theirs,
        _fake_server(shared_home) as shared,
    ):
        assert main(["server", "status", "--json"]) == 0
        listed = {Path(i["home"]): i["workspace"] for i in json.loads(capsys.readouterr().out)}
        assert listed[shared_home] == "shared" and listed[a / "workspace" / "demo" / ".prefect"] == str(
            a / "workspace" / "demo"
        )
        monkeypatch.chdir(a)
        assert main(["server", "stop"]) == 0
        assert mine.wait(timeout=15) is not None
        assert (
            theirs.poll() is None and shared.poll() is None
        )  # another checkout's, and the shared one, run on
        assert f"stopped {a / 'workspace' / 'demo'}: " in capsys.readouterr().out
        assert main(["server", "stop"]) == 0  # nothing of this checkout's left
        assert "no local Prefect server was running for a workspace under" in capsys.readouterr().out
        assert theirs.poll() is None
        assert main(["server", "stop", "shared"]) == 0
        assert shared.wait(timeout=15) is not None and theirs.poll() is None
        assert main(["server", "stop", "--all"]) == 0
        assert theirs.wait(timeout=15) is not None
    assert local_api.running_servers() == []


def test_an_idle_server_retires_only_when_no_command_holds_a_lease(tmp_path, cache) -> None:
    (tmp_path / "server.json").write_text(json.dumps({"pid": os.getpid(), "port": 1}))
    lease = local_api._take_lease(tmp_path)
    assert not local_api.retire(tmp_path, os.getpid())
    assert (tmp_path / "server.json").exists()
    lease.unlink()
    private_api_app.watch_idle(tmp_path, idle_s=0, poll_s=0)  # returns: idle, and unpublished
    assert not (tmp_path / "server.json").exists()


def test_a_killed_command_leaves_an_idle_server(tmp_path, cache) -> None:
    """kill -9 of a command cannot remove its lease; the server still sees it as gone."""
    (tmp_path / "server.json").write_text(json.dumps({"pid": os.getpid(), "port": 1}))
    (tmp_path / "clients").mkdir()
    (tmp_path / "clients" / f"{_dead_pid()}-1").touch()
    private_api_app.watch_idle(tmp_path, idle_s=0, poll_s=0)
    assert not (tmp_path / "server.json").exists()


def test_a_read_only_or_missing_workspace_keeps_no_server_files_in_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != ws / ".prefect")
    home = local_api.usable_home(ws / ".prefect")
    assert home.parent == tmp_path / "tmp" and (home.stat().st_mode & 0o777) == 0o700
    assert local_api.usable_home(None) == home
    (tmp_path / "file").write_text("")
    assert local_api.usable_home(tmp_path / "file" / ".prefect") == home  # cannot even be made


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "1e9"])
def test_a_bad_idle_timeout_is_named(monkeypatch, value) -> None:
    monkeypatch.setenv(local_api.IDLE_ENV, value)
    with pytest.raises(ConfigError, match=local_api.IDLE_ENV):
        local_api.idle_s()


def test_a_dead_prefect_api_url_is_named_with_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        local_api.check_api("http://127.0.0.1:1/api")
    text = caught.value.render()
    assert "http://127.0.0.1:1/api" in text and "cannot be reached" in text
    assert "unset PREFECT_API_URL" in text and caught.value.exit_code == 2


def test_an_api_that_accepts_and_never_answers_is_refused_in_bounded_time() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # the kernel accepts connections; nobody ever answers them
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/api"
        with pytest.raises(ConfigError, match=r"did not answer within 0\.5 s") as caught:
            local_api.check_api(url, timeout_s=0.5)
    assert url in caught.value.render()


@pytest.mark.parametrize("url", ["http://127.0.0.1:1/api", "not a url"])
def test_a_command_with_an_unusable_prefect_api_url_exits_2_naming_it(
    tmp_path, monkeypatch, capsys, url
) -> None:
    """Found before any flow runs, so no Prefect client ever waits on it."""
    monkeypatch.setenv("PREFECT_API_URL", url)
    code = main(["simulate", str(DEMO), "--replicas", "1", "--workspace", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert url in err and "PREFECT_API_URL" in err


@pytest.mark.skipif(not hasattr(signal, "SIGINT"), reason="needs SIGINT")
def test_ctrl_c_during_campaign_sql_is_an_interrupt_not_a_bug(tmp_path) -> None:
    """`campaign sql` as a user runs it, in its own process, interrupted by SIGINT (what Ctrl-C sends) while its
    query runs: one line saying it was interrupted, exit 130, never the 60 s timeout or a bug."""
    import subprocess
    import sys

    import duckdb

    duckdb.connect(str(tmp_path / "campaign.duckdb")).close()
    query = "select count(*) from range(100000000000) t(i) where i % 7 = 3"
    proc = subprocess.Popen(
        [sys.executable, "-m", "campaign_cli.cli", "sql", query, "-w", str(tmp_path)],
        stderr=subprocess.PIPE,
        text=True,
        # as a terminal starts it: a test run launched in the background (`make test &`, some CI runners) ignores
        # SIGINT, and a child inherits that, so Ctrl-C would rightly never reach it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # the query runs once the command has the catalog open; Ctrl-C then
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not _holds_catalog(proc.pid, tmp_path):
        time.sleep(0.1)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    # well inside the query's own 60 s limit: a Ctrl-C heard only when DuckDB's call returned would time out here
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "bug" not in err


def _holds_catalog(pid: int, folder) -> bool:
    """Whether process `pid` has the workspace's catalog file open."""
    target = str(folder / "campaign.duckdb")
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == target for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_a_new_ui_folder_starts_from_the_template_database_and_an_older_one_migrates(tmp_path, cache) -> None:
    import sqlite3

    from deployments import ui

    cache.mkdir()
    template = cache / f"prefect-{local_api.prefect_version()}.db"
    with sqlite3.connect(template) as con:
        con.execute("CREATE TABLE alembic_version (version_num TEXT)")
    fresh = ui.server_environment(tmp_path / "new", 4200)
    assert (tmp_path / "new" / local_api.DB_NAME).is_file()  # a copy of the template: nothing to migrate
    assert fresh["PREFECT_API_DATABASE_MIGRATE_ON_START"] == "false"
    assert fresh["PREFECT_API_BLOCKS_REGISTER_ON_START"] == "false"
    older = tmp_path / "older"
    older.mkdir()
    (older / local_api.DB_NAME).write_bytes(b"")  # a database from before the version stamp: it migrates
    env = ui.server_environment(older, 4200)
    assert (
        "PREFECT_API_DATABASE_MIGRATE_ON_START" not in env
        and "PREFECT_API_BLOCKS_REGISTER_ON_START" not in env
    )
    assert (older / local_api.DB_NAME).read_bytes() == b""  # never replaced

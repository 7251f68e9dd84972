"""A hostile environment is bad input with a message, never exit 70: a workspace name longer than a file system
allows, a read-only workspace, an OSError about a path the user gave."""

import errno
import os
from pathlib import Path

import pytest

from campaign import store
from campaign.errors import ConfigError
from campaign_cli.cli import main
from campaign_cli.terminal import environment_error
from tests.helpers.paths import DEMO


@pytest.mark.parametrize("name", ["a" * 256, "é" * 128, "w/" + "b" * 300])
def test_a_workspace_name_longer_than_a_file_system_allows_is_refused_naming_it(tmp_path, name) -> None:
    with pytest.raises(ConfigError, match="over the 255") as caught:
        store.workspace_for("demo", tmp_path / name)
    assert caught.value.where == "--workspace" and "shorter" in (caught.value.fix or "")


def test_a_workspace_path_too_deep_to_hold_its_files_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match="too long"):
        store.Workspace(tmp_path.joinpath(*["d" * 200] * 20))


@pytest.mark.parametrize("command", ["prepare", "validate", "simulate"])
def test_every_command_refuses_a_300_character_workspace_name_with_exit_2(tmp_path, capsys, command) -> None:
    code = main([command, str(DEMO), "--workspace", str(tmp_path / ("x" * 300))])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--workspace" in err and "fix:" in err and "internal error" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_stage_that_writes_refuses_a_read_only_workspace_naming_it(tmp_path, monkeypatch) -> None:
    ws = store.Workspace(tmp_path)
    assert store.require_writable(ws, "campaign validate") is ws
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode, **kw: Path(p) != tmp_path and real_access(p, mode, **kw)
    )
    with pytest.raises(ConfigError, match="read-only") as caught:
        store.require_writable(ws, "campaign validate")
    assert caught.value.where == str(tmp_path) and "campaign analyse" in (caught.value.fix or "")


def test_a_read_only_workspaces_report_goes_to_the_users_own_temporary_folder(tmp_path, monkeypatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    a, b = store.Workspace(tmp_path / "x" / "w"), store.Workspace(tmp_path / "y" / "w")
    assert store.outside_report_dir(a).is_relative_to(tmp_path)
    assert store.outside_report_dir(a) != store.outside_report_dir(b)  # same name, other folder


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (errno.ENAMETOOLONG, "longer than the file system allows"),
        (errno.EROFS, "cannot write"),
        (errno.EACCES, "cannot write"),
    ],
)
def test_an_os_error_about_a_users_path_is_bad_input(tmp_path, code, expected) -> None:
    err = environment_error(OSError(code, os.strerror(code), str(tmp_path / "report.html")))
    assert isinstance(err, ConfigError) and err.exit_code == 2
    assert expected in err.render() and str(tmp_path) in err.render()
    assert environment_error(OSError(errno.EIO, "I/O error")) is None
    assert environment_error(ValueError("x")) is None


def test_a_ctrl_c_is_one_line_naming_the_command(capsys) -> None:
    from campaign_cli.terminal import exit_code_of

    def interrupted() -> None:
        raise KeyboardInterrupt

    assert exit_code_of(interrupted, "campaign prepare") == 130
    assert exit_code_of(lambda: 130, "campaign sql") == 130  # typer's silent Exit(130)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "campaign prepare interrupted; rerun the same command to resume (completed work is kept)",
        "campaign sql interrupted; rerun the same command to resume (completed work is kept)",
    ]


def test_prefects_crash_lines_of_an_interrupt_stay_off_the_terminal() -> None:
    import logging

    from campaign_cli.terminal import _said_once

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1, msg, None, None)

    assert not _said_once(record("Crash detected! Execution was aborted by an interrupt signal."))
    assert not _said_once(
        record("Finished in state Crashed('Execution was aborted by an interrupt signal.')")
    )
    assert _said_once(record("Finished in state Completed()"))

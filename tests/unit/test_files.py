"""Atomic writes: the file appears whole, and with the mode a new file of the user's gets (not the temp file's 0600)."""

import os
import stat

import pyarrow as pa

from campaign.files import atomic_write_json, atomic_write_parquet, atomic_write_text


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_written_files_get_the_usual_mode_and_no_temporary_is_left(tmp_path):
    expected = 0o666 & ~_umask()
    written = [
        atomic_write_text(tmp_path / "report.md", "# report\n"),
        atomic_write_json(tmp_path / "analysis.json", {"ettr": 0.96}),
        atomic_write_parquet(tmp_path / "clean.parquet", pa.table({"text": ["a", "b"]})),
    ]
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == expected, path.name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["analysis.json", "clean.parquet", "report.md"]
    assert (tmp_path / "report.md").read_text() == "# report\n"


def _no_space(*_args, **_kwargs):
    import errno

    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_during_an_atomic_write_is_named_with_the_file_and_leaves_nothing(tmp_path, monkeypatch):
    import pytest

    from campaign import files
    from campaign.errors import DiskFull

    monkeypatch.setattr(files.os, "fsync", _no_space)
    target = tmp_path / "data" / "manifest.json"
    with pytest.raises(DiskFull) as err:
        atomic_write_json(target, {"a": 1})
    assert err.value.exit_code == 74 and err.value.where == str(target)
    assert "the disk is full while writing this file" in err.value.message
    assert "run the same command again" in err.value.fix
    assert sorted(p.name for p in target.parent.iterdir()) == []  # the temporary file is gone
    with pytest.raises(DiskFull, match="the disk is full"):
        atomic_write_parquet(tmp_path / "t.parquet", pa.table({"x": [1]}))


def test_a_full_disk_is_recognised_however_a_library_wrapped_it():
    import errno

    from campaign.errors import DiskFull, disk_full

    class LibraryError(Exception):
        pass

    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/ws/checks/result.json")
        except OSError as inner:
            raise LibraryError("could not save the validation result") from inner
    except LibraryError as wrapped:
        found = disk_full(wrapped)
    assert isinstance(found, DiskFull) and found.where == "/ws/checks/result.json"
    text_only = RuntimeError(
        'IO Error: Could not write file "/ws/campaign.duckdb.wal": No space left on device'
    )
    assert disk_full(text_only).where == "/ws/campaign.duckdb.wal"
    assert disk_full(OSError(errno.EDQUOT, "Disk quota exceeded")).exit_code == 74
    assert disk_full(OSError(errno.EACCES, "Permission denied")) is None
    assert disk_full(ValueError("no space here")) is None


def test_the_command_exits_74_on_a_full_disk_never_70(capsys):
    import errno

    from campaign_cli.terminal import exit_code_of

    def command():
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/ws/data/_work/x.arrow")
        except OSError as exc:
            raise RuntimeError("worker failed") from exc

    assert exit_code_of(command) == 74
    err = capsys.readouterr().err
    assert "/ws/data/_work/x.arrow: the disk is full while writing this file" in err
    assert "internal error" not in err


def test_a_disk_with_less_than_a_megabyte_free_is_full(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from campaign import files

    monkeypatch.setattr(files.os, "statvfs", lambda _p: SimpleNamespace(f_bavail=10, f_frsize=4096))
    assert files.disk_is_full(tmp_path / "not" / "yet" / "made")
    monkeypatch.setattr(files.os, "statvfs", lambda _p: SimpleNamespace(f_bavail=10_000, f_frsize=4096))
    assert not files.disk_is_full(tmp_path)

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

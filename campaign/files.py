"""Atomic file writes: write to a temporary file in the same folder, fsync, then rename over the target; and
bounded reads of the files a user names.

A reader never sees a half-written file, and a run killed mid-write leaves either the old file or the new one.
A file a user names (a config, a file a config refers to, an input) is read only when it is a regular file, and
only up to a bound: a FIFO would block `open()` forever and `/dev/zero` never ends.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.errors import DiskFull, disk_full

if (
    TYPE_CHECKING
):  # pyarrow costs a config load (campaign plan) a quarter of a second: imported where it writes
    import pyarrow as pa


def _process_umask() -> int:
    """The process's umask, read without changing it (os.umask sets it, a race with threads writing files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # no /proc: read it by setting it back at once (at import, before any thread)
    os.umask(mask)
    return mask


# A temporary file is created 0600; the file it becomes gets the mode any program's new file gets (0644 under the
# usual umask), so a report or a dataset can be read by whoever may read the folder.
FILE_MODE = 0o666 & ~_process_umask()


class NotRegularFile(OSError):
    """The path names something other than a regular file (a FIFO, a device, a socket, a folder)."""


class FileTooLarge(OSError):
    """The file is larger than the bound its reader allows."""


FULL_BELOW_BYTES = 1 << 20  # a disk with less than this free to the user cannot take a catalog transaction


def disk_is_full(path: str | Path) -> bool:
    """Whether the disk that holds `path` (or its nearest existing parent) has less than FULL_BELOW_BYTES free to
    this user; False when it cannot be told."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < FULL_BELOW_BYTES


def file_kind(mode: int) -> str:
    """What a stat mode names, in words: "a FIFO", "a character device", ..."""
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def open_regular(path: str | Path) -> int:
    """A read-only descriptor of `path` if it is a regular file (symlinks followed), else NotRegularFile.

    Opened non-blocking, so a FIFO answers at once instead of waiting for a writer; the caller closes it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, f"{file_kind(mode)}, not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_regular(path: str | Path) -> os.stat_result:
    """The stat of `path` if it is a regular file (symlinks followed), else NotRegularFile; never opens it."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(errno.EINVAL, f"{file_kind(st.st_mode)}, not a regular file", str(path))
    return st


def read_bounded(path: str | Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; NotRegularFile or FileTooLarge otherwise, raised before
    more than `max_bytes` + 1 bytes are read (a file that grows while it is read is caught too)."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise FileTooLarge(errno.EFBIG, f"{size:,} bytes, more than the {max_bytes:,} allowed", str(path))
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileTooLarge(errno.EFBIG, f"more than the {max_bytes:,} bytes allowed", str(path))
    return data


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        _raise_if_disk_full(exc, path)
        raise
    return path


def _raise_if_disk_full(exc: BaseException, path: Path) -> None:
    """A write that failed for want of space is a DiskFull naming the file (the partial temporary file is gone)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        raise DiskFull.writing(str(path), exc.strerror or "") from None


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def atomic_write_parquet(path: str | Path, table: pa.Table) -> Path:
    """Write an Arrow table as Parquet atomically (zstd, no pandas index, deterministic bytes for equal input)."""
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, FILE_MODE)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, Exception) and disk_full(exc) is not None:  # Arrow says it in its own error's text
            raise DiskFull.writing(str(path), str(exc).splitlines()[0][:200]) from None
        raise
    return path


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """sha256 of a regular file (NotRegularFile for a FIFO or a device: they would block or never end)."""
    digest = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()

"""Atomic file writes: write to a temporary file in the same folder, fsync, then rename over the target; and
bounded reads of the files a user names.

A reader never sees a half-written file, and a run killed mid-write leaves either the old file or the new one.
A file a user names (a config, a file a config refers to, an input) is read only when it is a regular file, and
only up to a bound: a FIFO would block `open()` forever and `/dev/zero` never ends.
An output a user names (`--out`, `--report`, a folder argument) passes `check_outputs` or `check_output_dir` before
the command does anything: never one of the command's inputs, never a file campaign did not write.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.errors import ConfigError, DiskFull, disk_full

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


# Outputs a user names (--out, --report, a folder argument): campaign writes a file there only when it is new, or
# when campaign wrote it before and nobody changed it since. What campaign wrote is recorded beside it, in the
# folder's ledger (a file's name and the sha256 of the bytes written); a folder holding the ledger is campaign's.
OUTPUT_LEDGER = ".campaign-outputs.json"


def _ledger(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_bounded(folder / OUTPUT_LEDGER, 1 << 22).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return {"files": {}}
    files = data.get("files") if isinstance(data, dict) else None
    return {"files": files if isinstance(files, dict) else {}, "folder": bool(data.get("folder"))}


def written_by_campaign(path: str | Path) -> bool:
    """Whether `path` is a regular file (not a symlink) holding exactly the bytes campaign last wrote there."""
    path = Path(path)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        recorded = _ledger(path.parent)["files"].get(path.name)
        return isinstance(recorded, str) and recorded == sha256_file(path)
    except OSError:
        return False


def _same_file(a: Path, b: Path) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _refuse(flag: str, what: str, fix: str) -> ConfigError:
    return ConfigError(what, where=flag, fix=fix)


def check_outputs(
    outputs: Mapping[str, str | Path | None], inputs: Mapping[str, str | Path | None] | None = None
) -> dict[str, Path]:
    """The files the output flags name ({flag: path}), absolute, if campaign may write every one of them; else a
    ConfigError (exit 2) naming the flag, before anything is written.

    Refused: an output that is an input of the same command (`inputs`, {flag: path}: the same path, a link to it,
    or a hard link), two outputs naming one file, a folder or a FIFO/device, a folder that cannot be written, and
    an existing file campaign did not write (or wrote, and someone changed since)."""
    named = {flag: Path(p).expanduser().absolute() for flag, p in outputs.items() if p}
    given = {flag: Path(p).expanduser().absolute() for flag, p in (inputs or {}).items() if p}
    fix = "name a new file"
    seen: dict[Path, str] = {}
    for flag, path in named.items():
        for in_flag, in_path in given.items():
            if _same_file(path.resolve(), in_path.resolve()):
                raise _refuse(
                    flag,
                    f"{flag} {path} is the file {in_flag} reads: writing it would replace this command's input",
                    f"{fix} for {flag}",
                )
        if path.resolve() in seen:
            raise _refuse(
                flag, f"{flag} and {seen[path.resolve()]} name the same file {path}", f"{fix} for each"
            )
        seen[path.resolve()] = flag
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise _refuse(
                flag, f"{flag} {path} cannot be checked ({exc.strerror})", f"{fix} for {flag}"
            ) from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise _refuse(
                flag, f"{flag} {path} is a folder, not a file", f"name a file inside it, e.g. {path}/NAME"
            )
        if st is not None and not written_by_campaign(path):
            kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else file_kind(st.st_mode)
            what = "a file campaign did not write" if stat.S_ISREG(st.st_mode) else kind
            raise _refuse(
                flag,
                f"{flag} {path} exists and is {what} (or was changed since campaign wrote it): campaign does not "
                "overwrite a file it did not write",
                f"{fix} for {flag}, or move the existing one away first",
            )
        _check_writable_folder(flag, path.parent)
    return named


def check_output_dir(
    path: str | Path,
    flag: str,
    inputs: Mapping[str, str | Path | None] | None = None,
    markers: tuple[str, ...] = (),
) -> Path:
    """The folder an output flag names, absolute, if campaign may write into it: new, empty, or campaign's own
    (it holds the ledger, or one of `markers` an earlier command left). A folder holding an input of the same
    command is refused too. ConfigError (exit 2) otherwise."""
    root = Path(path).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise _refuse(flag, f"{flag} {root} is a file, not a folder", f"name a new folder for {flag}")
    for in_flag, in_path in (inputs or {}).items():
        if in_path and Path(in_path).expanduser().resolve().is_relative_to(root):
            raise _refuse(
                flag,
                f"{flag} {root} holds {in_flag} {in_path}: this command's input would sit among its outputs",
                f"name another folder for {flag}",
            )
    owned = any((root / m).is_file() for m in (OUTPUT_LEDGER, *markers))
    if root.is_dir() and not owned and any(root.iterdir()):
        raise _refuse(
            flag,
            f"{root} is not empty and is not a folder campaign wrote into (no {OUTPUT_LEDGER}); campaign does not "
            "write into a folder it does not own",
            f"name a new or empty folder with {flag}",
        )
    _check_writable_folder(flag, root)
    return root


def _check_writable_folder(flag: str, folder: Path) -> None:
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise _refuse(
            flag, f"{flag}: {probe} is not a folder, so {folder} cannot be made", f"name another {flag}"
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise _refuse(
            flag, f"{flag}: the folder {probe} cannot be written", f"name a folder you can write, for {flag}"
        )


def claim_output_dir(folder: str | Path) -> Path:
    """Mark `folder` as campaign's (its ledger), so a later run may write into it again."""
    folder = Path(folder)
    ledger = _ledger(folder)
    if not (folder / OUTPUT_LEDGER).is_file() or not ledger.get("folder"):
        atomic_write_json(folder / OUTPUT_LEDGER, {**ledger, "folder": True})
    return folder


def write_output(path: str | Path, data: bytes | str) -> Path:
    """Write an output a user named (checked first with `check_outputs`) atomically, and record it in the folder's
    ledger so that campaign may replace it next time."""
    return record_output(atomic_write_bytes(path, data.encode("utf-8") if isinstance(data, str) else data))


def record_output(path: str | Path) -> Path:
    """Record in its folder's ledger that campaign has just written `path` (its sha256 now)."""
    path = Path(path)
    ledger = _ledger(path.parent)
    ledger["files"][path.name] = sha256_file(path)
    atomic_write_json(path.parent / OUTPUT_LEDGER, ledger)
    return path

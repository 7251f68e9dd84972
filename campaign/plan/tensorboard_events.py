"""TensorBoard event files (`events.out.tfevents.*`) as scalar series, read with TensorBoard's own reader.

A file is one writer's life (one process); a folder holds one per start of the run, read in the order they were
begun. TensorBoard's `EventAccumulator` (the optional `tensorboard` package, imported only when a file is read) reads
each file. It stops without a word at a cut or garbled record, so this module walks the TFRecord framing (length,
masked CRC-32C of the length, data, masked CRC-32C of the data; tensorflow/core/lib/io/record_writer.cc) itself to
name where a file ends early.
"""

from __future__ import annotations

import logging
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign.errors import DataError
from campaign.files import check_regular

log = logging.getLogger(__name__)

EVENT_NAME_PART = "tfevents"  # every writer names its files events.out.tfevents.<time>.<host>[...]
FILE_VERSION = b"brain.Event:"  # the first record of every event file: an Event whose file_version says so
HEADER_BYTES = 12  # uint64 length + uint32 masked CRC of the length
FOOTER_BYTES = 4  # uint32 masked CRC of the data
MAX_RECORD_BYTES = 1 << 28  # no scalar event comes near this: a longer length is a garbled header
INSTALL = "pip install 'campaign[tensorboard]' (or: pip install 'tensorboard>=2.16,<3')"


@dataclass(frozen=True)
class Scalar:
    step: int
    wall_time: float  # Unix seconds the writer stamped on the event
    value: float


@dataclass(frozen=True)
class EventFile:
    """One event file's scalars, each tag's points in the order written, and what its framing says."""

    path: Path
    scalars: dict[str, tuple[Scalar, ...]]
    started: float  # wall time of its first scalar (inf when it has none)
    notes: tuple[str, ...] = ()


def _crc32c_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # Castagnoli, reflected
        table.append(crc)
    return tuple(table)


CRC32C = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C, rotated right by 15 and offset (tensorflow/core/lib/hash/crc32c.h Mask)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _starts_like_events(head: bytes) -> bool:
    """The first record's header checks out and its data is an Event naming its file version."""
    if len(head) < HEADER_BYTES:
        return False
    (length,) = struct.unpack("<Q", head[:8])
    (crc,) = struct.unpack("<I", head[8:12])
    return crc == masked_crc32c(head[:8]) and FILE_VERSION in head[HEADER_BYTES : HEADER_BYTES + length]


def is_event_path(path: Path) -> bool:
    """A folder (only TensorBoard logs come as one), a file named as event files are, or a file whose first record
    is an event file's; False for anything that does not exist."""
    if path.is_dir():
        return True
    if not path.is_file():
        return False
    if EVENT_NAME_PART in path.name:
        return True
    try:
        with path.open("rb") as handle:
            return _starts_like_events(handle.read(64))
    except OSError:
        return False


def event_files(path: Path) -> list[Path]:
    """The event files `path` names: itself, or the ones directly inside the folder."""
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if EVENT_NAME_PART in p.name and p.is_file())
        if not found:
            below = sorted({p.parent for p in path.rglob(f"*{EVENT_NAME_PART}*") if p.is_file()})
            hint = f" (there are some in {', '.join(map(str, below[:3]))})" if below else ""
            raise DataError(
                f"the folder holds no events.out.tfevents.* file{hint}",
                where=str(path),
                fix="give the folder TensorBoard's logger wrote (NeMo: <exp_dir>/<name>/<version>) or one of its "
                "event files",
            )
        return found
    try:
        check_regular(path)
    except OSError as exc:
        problem = "does not exist" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc})"
        raise DataError(
            f"the TensorBoard event file {problem}",
            where=str(path),
            fix="give an events.out.tfevents.* file or the folder holding them",
        ) from None
    if EVENT_NAME_PART not in path.name:
        raise DataError(
            "this is a TensorBoard event file, but TensorBoard's reader reads only files named events.out.tfevents.*",
            where=str(path),
            fix="give it back its writer's name (events.out.tfevents.<time>.<host>...)",
        )
    return [path]


def framing_note(path: Path) -> str:
    """Where the file's records stop making sense ("" when every record is whole); DataError when the first one
    is not a record at all."""
    size = path.stat().st_size
    if size == 0:
        raise DataError(
            "the event file is empty",
            where=str(path),
            fix="give the event file of a run that logged steps",
        )
    offset, count = 0, 0
    with path.open("rb") as handle:
        while offset < size:
            head = handle.read(HEADER_BYTES)
            length = struct.unpack("<Q", head[:8])[0] if len(head) == HEADER_BYTES else 0
            whole = len(head) == HEADER_BYTES and struct.unpack("<I", head[8:])[0] == masked_crc32c(head[:8])
            if not whole or length > MAX_RECORD_BYTES:
                if count == 0:
                    raise DataError(
                        "not a TensorBoard event file: its first record's header does not check out",
                        where=str(path),
                        fix="give the events.out.tfevents.* file as its writer left it",
                    )
                what = "is cut short" if len(head) < HEADER_BYTES else "has a garbled header"
                return f"{path}: record {count + 1} at byte {offset:,} {what}; the {count:,} records before it are read"
            end = offset + HEADER_BYTES + length + FOOTER_BYTES
            if end > size:
                return (
                    f"{path}: record {count + 1} at byte {offset:,} is cut short (a writer killed mid-write); the "
                    f"{count:,} records before it are read"
                )
            handle.seek(end)
            offset, count = end, count + 1
    return ""


def _accumulator(path: Path) -> Any:  # tensorboard ships no type hints
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        raise DataError(
            "reading a TensorBoard event file needs TensorBoard's reader (the tensorboard package), which is not "
            "installed",
            where=str(path),
            fix=INSTALL,
        ) from None
    # size 0 keeps every scalar (the default keeps a random 10,000 per tag); no purge, since a step going back is a
    # restart to name, not data to drop
    return event_accumulator.EventAccumulator(
        str(path),
        size_guidance={
            **dict.fromkeys(event_accumulator.DEFAULT_SIZE_GUIDANCE, 1),
            event_accumulator.SCALARS: 0,
        },
        purge_orphaned_data=False,
    )


def read_event_file(path: Path) -> EventFile:
    note = framing_note(path)
    accumulator = _accumulator(path)
    accumulator.Reload()
    scalars = {
        tag: tuple(Scalar(int(e.step), float(e.wall_time), float(e.value)) for e in accumulator.Scalars(tag))
        for tag in accumulator.Tags().get("scalars", [])
    }
    started = min((s[0].wall_time for s in scalars.values() if s), default=math.inf)
    return EventFile(path, scalars, started, (note,) if note else ())


def read_event_files(path: Path) -> list[EventFile]:
    """Every event file `path` names, in the order they were begun (their first scalar's time, then name)."""
    files = [read_event_file(p) for p in event_files(path)]
    log.debug("read %d TensorBoard event file(s) from %s", len(files), path)
    return sorted(files, key=lambda f: (f.started, f.path.name))

"""A WARC file's records as byte ranges, found by their own headers and checked against the next one.

FastWARC trusts each record's Content-Length: one that over-declares swallows the records after it unseen. Here the
decompressed stream is split first: a record is its header block (`WARC/1.x` .. an empty line), Content-Length
bytes, and `\\r\\n\\r\\n`, and it stands only when the next bytes are another `WARC/` header or the end of the file.
A length that runs past its record (or stops short of it) makes that record a reject, and the reader
resynchronises on the next `WARC/` header line, so every record after it is read as usual. A header that does not
parse is the same reject; in the first record it means the file is not a WARC file (the reader's corrupt-file
error, as a broken gzip stream gives).
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

MAX_HEADER_BYTES = 1 << 16  # a WARC header block longer than this is not a header
CHUNK = 1 << 20
_NEXT_HEADER = re.compile(rb"\nWARC/1\.[01]\r?\n")
_FIELD = re.compile(rb"^([!-9;-~]+):[ \t]*(.*?)[ \t]*$")


class _Reader(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class RawRecord:
    """One record as the splitter found it: its bytes (header, block and trailer) when its length checked out,
    else why not; its headers as far as they parsed."""

    number: int  # 1-based position in the file
    headers: dict[str, str]
    data: bytes | None  # None: not read (too large) or not a record (problem says why)
    content_length: int | None
    problem: str = ""  # a reject reason's detail; "" when the record is whole
    too_large: bool = False


def open_decompressed(path: Path) -> _Reader:
    """The file's bytes, decompressed (gzip by Python's own reader, which raises on a cut or corrupt stream;
    zstd and lz4 by FastWARC's)."""
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    raw: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed with the reader that wraps it
    if magic == b"\x28\xb5\x2f\xfd":
        from fastwarc.stream_io import ZstdReader

        return ZstdReader(raw)
    if magic == b"\x04\x22\x4d\x18":
        from fastwarc.stream_io import Lz4Reader

        return Lz4Reader(raw)
    return raw


def _parse_header(block: bytes) -> tuple[dict[str, str], int | None, str]:
    """(headers, Content-Length, problem) of a header block without its final empty line."""
    lines = block.split(b"\r\n") if b"\r\n" in block else block.split(b"\n")
    headers: dict[str, str] = {}
    last = ""
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t") and last:
            headers[last] += " " + line.strip().decode("utf-8", "replace")
            continue
        m = _FIELD.match(line)
        if m is None:
            return headers, None, f"header line {line[:60]!r} is not 'Name: value'"
        last = m.group(1).decode("ascii")
        headers[last] = m.group(2).decode("utf-8", "replace")
    length = next((v for k, v in headers.items() if k.lower() == "content-length"), None)
    if length is None or not length.strip().isdigit():
        return headers, None, f"Content-Length {length!r} is not a byte count"
    return headers, int(length), ""


class RecordSplitter:
    """Split a decompressed WARC stream into `RawRecord`s (see the module's docstring)."""

    def __init__(self, reopen: Callable[[], _Reader], max_record_bytes: int) -> None:
        self._reopen = reopen
        self._limit = max_record_bytes
        self._stream = reopen()
        self._buf = bytearray()
        self._pos = 0  # stream offset of _buf[0]
        self._eof = False

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()

    def _fill(self, n: int) -> bool:
        """Read until the buffer holds n bytes; False at the end of the stream first."""
        while len(self._buf) < n and not self._eof:
            chunk = self._stream.read(max(CHUNK, n - len(self._buf)))
            if not chunk:
                self._eof = True
            self._buf += chunk
        return len(self._buf) >= n

    def _drop(self, n: int) -> None:
        del self._buf[:n]
        self._pos += n

    def _seek(self, offset: int) -> None:
        """Move to stream offset `offset` (forward by reading; backward by reading the file again)."""
        if offset < self._pos:
            self.close()
            self._stream = self._reopen()
            self._buf, self._pos, self._eof = bytearray(), 0, False
        while self._pos + len(self._buf) < offset and self._fill(len(self._buf) + 1):
            self._drop(min(len(self._buf), offset - self._pos))
        self._drop(min(len(self._buf), offset - self._pos))

    def _next_header(self, start: int) -> int | None:
        """Stream offset of the next `WARC/1.x` header line that starts a line at or after `start`, or None."""
        self._seek(start - 1)
        while True:
            m = _NEXT_HEADER.search(self._buf)
            if m is not None:
                return self._pos + m.start() + 1
            if self._eof:
                return None
            keep = min(len(self._buf), 16)
            self._drop(len(self._buf) - keep)
            self._fill(len(self._buf) + CHUNK)

    def _skip_gap(self) -> None:
        """Skip the blank lines some writers leave between records."""
        while True:
            self._fill(1)
            n = len(self._buf) - len(self._buf.lstrip(b"\r\n"))
            if n == 0 or not self._buf:
                return
            self._drop(n)

    def __iter__(self) -> Iterator[RawRecord]:
        number = 0
        while True:
            self._skip_gap()
            if not self._fill(1):
                return
            number += 1
            start = self._pos
            self._fill(MAX_HEADER_BYTES + 4)
            end = self._buf.find(b"\r\n\r\n", 0, MAX_HEADER_BYTES + 4)
            headers: dict[str, str]
            length: int | None
            if not self._buf.startswith(b"WARC/1."):
                headers, length, problem = (
                    {},
                    None,
                    f"no WARC/ header at byte {start:,} (starts {bytes(self._buf[:16])!r})",
                )
            elif end < 0:
                headers, length, problem = {}, None, f"header does not end within {MAX_HEADER_BYTES:,} bytes"
            else:
                headers, length, problem = _parse_header(bytes(self._buf[:end]))
            if problem:
                if number == 1:
                    raise ValueError(f"not a WARC file: record 1 {problem}")
                yield RawRecord(number, headers, None, length, f"header does not parse: {problem}")
                nxt = self._next_header(start + 1)
                if nxt is None:
                    return
                self._seek(nxt)
                continue
            assert length is not None
            body = end + 4
            record_end = body + length  # offset in the buffer where the trailer should start
            if length <= self._limit:
                self._fill(record_end + 4 + 8)
                whole = self._ends_record(record_end)
                cut = whole is None
                have = max(0, len(self._buf) - body)
                if whole:
                    data = bytes(self._buf[:record_end]) + b"\r\n\r\n"
                    self._drop(min(len(self._buf), record_end + 4))
                    yield RawRecord(number, headers, data, length)
                    continue
            else:
                self._seek(start + record_end)  # not read: stream past it, then check the trailer there
                self._fill(4 + 8)
                cut = self._pos < start + record_end  # the file ends inside the record
                if not cut and self._ends_record(0):
                    self._drop(min(len(self._buf), 4))
                    yield RawRecord(number, headers, None, length, too_large=True)
                    continue
                have = max(0, self._pos + len(self._buf) - start - body)
            nxt = self._next_header(start + body)
            if cut and nxt is None:  # the last record, cut short: nothing follows to resynchronise on
                yield RawRecord(number, headers, None, length, f"truncated: {have:,} of {length:,} bytes")
                return
            found = (
                f"the next WARC/ header starts at byte {nxt:,}"
                if nxt is not None
                else "no WARC/ header follows"
            )
            yield RawRecord(
                number,
                headers,
                None,
                length,
                f"Content-Length {length:,} does not end the record (byte {start + record_end:,}); {found}",
            )
            if nxt is None:
                return
            self._seek(nxt)

    def _ends_record(self, at: int) -> bool | None:
        """Whether the buffer at `at` holds the record's trailer and then another header or the end of the file;
        None when the file ends before `at` (the record is cut short)."""
        if len(self._buf) < at:
            return None if self._eof else False
        trailer = bytes(self._buf[at : at + 4])
        if len(trailer) < 4 and self._eof:
            return b"\r\n\r\n".startswith(trailer)  # the file ends inside the trailer: the record is whole
        if trailer != b"\r\n\r\n":
            return False
        after = bytes(self._buf[at + 4 : at + 12]).lstrip(b"\r\n")
        return after.startswith(b"WARC/1.") or after == b""

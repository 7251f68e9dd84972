"""Read documents from a shard: JSONL (optionally .gz) line by line, Parquet in record batches, WARC by record.

A bad record is a `RawDocument` with a reason (kept and counted, never raised), whatever went wrong: bad
UTF-8, JSON that does not parse (including nesting too deep for the parser, RecursionError), a line longer
than `max_record_bytes` (skipped without being held in memory), a missing or non-string text field.
A file that fails as a whole part-way (truncated gzip, corrupt Parquet page) raises DataError naming the
file and the fix; the shard runner collects these so a run reports every such file at once.

A UTF-8 byte-order mark (EF BB BF) at the very start of a file belongs to the file, not to its first
record, and is skipped. `file` is the path relative to the glob's fixed prefix (e.g. "part-000.jsonl" for
".../web/*.jsonl"), so outputs and doc ids do not depend on where the corpus lives. `line` is the 1-based
physical line (the row for Parquet), counted from the start of the file even in a later byte-range shard.
Blank lines in JSONL are not records and are skipped.

A WARC file (`format: warc`, campaign.data.warc) is one shard; its response, resource and conversion records are
the documents (their main text extracted from HTML, the URL kept), its other records (warcinfo, request, metadata,
revisit) are counted by type, not read as documents.

While reading, the raw bytes of a whole file are hashed (sha256) when this shard reads the whole file;
for a file split into several shards the first shard hashes the file in one extra sequential read.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from campaign.config import SourceConfig
from campaign.data.inputs import Shard, source_files
from campaign.data.records import (
    EMPTY_TEXT,
    INVALID_UTF8,
    MALFORMED_JSON,
    MISSING_TEXT,
    READER_REASONS,
    RECORD_TOO_LARGE,
    WARC_MALFORMED,
    WARC_NOT_TEXT,
    WRONG_TYPE,
    RawDocument,
)
from campaign.errors import DataError

PARQUET_BATCH_ROWS = 4096
BOM = b"\xef\xbb\xbf"
KEPT_RAW_CHARS = 10_000  # of an unparseable record, the rejected table keeps this much text
_CORRUPT_FIX = "re-copy it or remove it"
_BLOCK = 1 << 20

__all__ = [
    "EMPTY_TEXT",
    "INVALID_UTF8",
    "MALFORMED_JSON",
    "MISSING_TEXT",
    "READER_REASONS",
    "RECORD_TOO_LARGE",
    "WARC_MALFORMED",
    "WARC_NOT_TEXT",
    "WRONG_TYPE",
    "FileDigest",
    "RawDocument",
    "read_shard",
    "read_source",
    "source_files",
]


@dataclass
class FileDigest:
    """Filled in while a shard is read: the raw bytes and sha256 of its whole file, if this shard hashed it."""

    bytes: int = 0
    sha256: str | None = None
    skipped: dict[str, int] = field(default_factory=dict)  # records that are not documents, by WARC type


def read_source(
    source: SourceConfig, index: int = 0, *, max_record_bytes: int = 64 * 2**20
) -> Iterator[RawDocument]:
    """All records of a source in a fixed order: files sorted by path, records in file order (one shard each)."""
    for f_index, (path, name) in enumerate(source_files(source, index)):
        kind = (
            source.format
            if source.format in ("parquet", "warc")
            else ("jsonl.gz" if path.name.endswith(".gz") else "jsonl")
        )
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise _unreadable(path, source, index, exc) from None
        shard = Shard(
            index=f_index,
            source_index=index,
            source=source.name,
            path=str(path.absolute()),
            name=name,
            file_index=f_index,
            part=0,
            n_parts=1,
            start=0,
            stop=2**62,
            file_bytes=size,
            kind=kind,
        )
        yield from read_shard(shard, source, index, max_record_bytes=max_record_bytes)


def read_shard(
    shard: Shard,
    source: SourceConfig,
    index: int = 0,
    *,
    max_record_bytes: int = 64 * 2**20,
    digest: FileDigest | None = None,
) -> Iterator[RawDocument]:
    """The records of one shard, in file order."""
    digest = digest if digest is not None else FileDigest()
    path = Path(shard.path)
    if shard.kind == "warc":
        from campaign.data.warc import read_warc  # fastwarc and resiliparse only where WARC is read

        _hash_whole_file(path, digest, source, index)
        corrupt = functools.partial(_corrupt, path, source, index)
        yield from read_warc(path, shard.name, source, max_record_bytes, digest.skipped, corrupt)
        return
    if shard.kind == "parquet":
        if shard.part == 0:
            _hash_whole_file(path, digest, source, index)
        yield from _read_parquet(path, shard, source, index)
    elif shard.kind == "jsonl.gz":
        yield from _read_jsonl_gz(path, shard, source, index, max_record_bytes, digest)
    else:
        if shard.part == 0 and shard.n_parts > 1:
            _hash_whole_file(path, digest, source, index)
        yield from _read_jsonl_range(path, shard, source, index, max_record_bytes, digest)


# ------------------------------------------------------------------------------------------------ JSONL


class _HashingReader(io.RawIOBase):
    """Passes a binary file through, hashing every byte read (for a gzip file: the compressed bytes)."""

    def __init__(self, raw: io.BufferedReader) -> None:
        self._raw = raw
        self.sha = hashlib.sha256()
        self.n = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._raw.readinto(buffer)
        if n:
            self.sha.update(memoryview(buffer)[:n])
            self.n += n
        return n or 0


def _hash_whole_file(path: Path, digest: FileDigest, source: SourceConfig, index: int) -> None:
    sha = hashlib.sha256()
    n = 0
    try:
        with open(path, "rb") as handle:
            while block := handle.read(_BLOCK):
                sha.update(block)
                n += len(block)
    except OSError as exc:
        raise _unreadable(path, source, index, exc) from None
    digest.bytes, digest.sha256 = n, sha.hexdigest()


def _lines(
    handle, start_line: int, stop: int | None, limit: int, at_file_start: bool
) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, raw line without its line end, or None when longer than `limit`, length in bytes)."""
    line_no = start_line
    pos = 0
    readline = handle.readline
    first = at_file_start
    while stop is None or pos < stop:
        raw = readline(limit + 1)
        if not raw:
            return
        line_no += 1
        if first:
            first = False
            if raw.startswith(BOM):
                raw = raw[len(BOM) :]
                pos += len(BOM)
        if len(raw) > limit and not raw.endswith(b"\n"):
            size = len(raw)
            while raw and not raw.endswith(b"\n"):  # skip the rest of the line without keeping it
                raw = readline(_BLOCK)
                size += len(raw)
            pos += size
            yield line_no, None, size
            continue
        pos += len(raw)
        yield line_no, raw, len(raw)


def _read_jsonl_range(
    path: Path, shard: Shard, source: SourceConfig, index: int, limit: int, digest: FileDigest
) -> Iterator[RawDocument]:
    whole = shard.n_parts == 1
    try:
        with open(path, "rb") as raw_handle:
            handle: Any = raw_handle
            hashing = None
            if whole:
                hashing = _HashingReader(raw_handle)
                handle = io.BufferedReader(hashing, buffer_size=_BLOCK)
            start, start_line = 0, 0
            if shard.start > 0:
                start, start_line = _align(raw_handle, shard.start)
                raw_handle.seek(start)
            stop = None if whole else shard.stop - start
            for line_no, raw, size in _lines(handle, start_line, stop, limit, at_file_start=start == 0):
                if raw is None:
                    yield _too_large(line_no, size, limit, shard.name, source)
                elif raw.strip():
                    yield _jsonl_record(raw, line_no, shard.name, source)
            if hashing is not None:
                while handle.read(_BLOCK):  # a whole file is hashed whole, even past its last line
                    pass
                digest.bytes, digest.sha256 = hashing.n, hashing.sha.hexdigest()
    except OSError as exc:
        raise _unreadable(path, source, index, exc) from None


def _align(handle, offset: int) -> tuple[int, int]:
    """(first byte of the first line starting at or after `offset`, number of lines before it)."""
    handle.seek(0)
    lines = 0
    remaining = offset
    while remaining > 0:
        block = handle.read(min(_BLOCK, remaining))
        if not block:
            break
        lines += block.count(b"\n")
        remaining -= len(block)
    handle.seek(offset - 1)
    if handle.read(1) == b"\n":
        return offset, lines
    rest = handle.readline()  # the line that straddles the boundary belongs to the previous shard
    return offset + len(rest), lines + (1 if rest.endswith(b"\n") else 0)


def _read_jsonl_gz(
    path: Path, shard: Shard, source: SourceConfig, index: int, limit: int, digest: FileDigest
) -> Iterator[RawDocument]:
    try:
        with open(path, "rb") as raw_handle:
            hashing = _HashingReader(raw_handle)
            with gzip.GzipFile(fileobj=io.BufferedReader(hashing, buffer_size=_BLOCK), mode="rb") as handle:
                for line_no, raw, size in _lines(handle, 0, None, limit, at_file_start=True):
                    if raw is None:
                        yield _too_large(line_no, size, limit, shard.name, source)
                    elif raw.strip():
                        yield _jsonl_record(raw, line_no, shard.name, source)
            while hashing.read(_BLOCK):  # trailing bytes after the gzip stream
                pass
            digest.bytes, digest.sha256 = hashing.n, hashing.sha.hexdigest()
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise _corrupt(path, source, index, exc) from None
    except OSError as exc:
        raise _unreadable(path, source, index, exc) from None


def _too_large(line_no: int, size: int, limit: int, name: str, source: SourceConfig) -> RawDocument:
    where = f"{name}:{line_no}"
    return RawDocument(
        f"{source.name}/{where}",
        source.name,
        name,
        line_no,
        "",
        RECORD_TOO_LARGE,
        f"{where}: line of {size:,} bytes > max_record_bytes {limit:,} (not parsed)",
    )


def _jsonl_record(raw: bytes, line_no: int, name: str, source: SourceConfig) -> RawDocument:
    raw = raw.rstrip(b"\r\n")
    try:  # fast path: orjson; anything it refuses is re-read by the stdlib parser, whose verdict counts
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _jsonl_record_slow(raw, line_no, name, source)
    if not isinstance(obj, dict):
        return _jsonl_record_slow(raw, line_no, name, source)
    id_value = obj.get(source.id_field) if source.id_field else None
    return _record(
        obj.get(source.text_field),
        id_value,
        line_no,
        name,
        source,
        present=source.text_field in obj,
        url=obj.get(source.url_field) if source.url_field else None,
    )


def _jsonl_record_slow(raw: bytes, line_no: int, name: str, source: SourceConfig) -> RawDocument:
    where = f"{name}:{line_no}"
    default_id = f"{source.name}/{where}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        replaced = raw.decode("utf-8", errors="replace")
        text, doc_id = replaced, default_id
        try:  # keep the text field (with U+FFFD) rather than the whole JSON line when the line still parses
            obj = json.loads(replaced)
            if isinstance(obj, dict) and isinstance(obj.get(source.text_field), str):
                text = obj[source.text_field]
                doc_id = _doc_id(obj.get(source.id_field) if source.id_field else None, default_id)
        except (ValueError, RecursionError):
            pass
        bad = raw[exc.start : exc.end].hex(" ")
        return RawDocument(
            doc_id,
            source.name,
            name,
            line_no,
            _safe(text[:KEPT_RAW_CHARS]),
            INVALID_UTF8,
            f"{where}: invalid UTF-8 byte(s) {bad} at offset {exc.start}",
        )
    try:
        obj = json.loads(line)
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        col = getattr(exc, "colno", None)
        at = f" at column {col}" if col else ""
        return RawDocument(
            default_id,
            source.name,
            name,
            line_no,
            _safe(line[:KEPT_RAW_CHARS]),
            MALFORMED_JSON,
            f"{where}: {msg}{at}",
        )
    except RecursionError:
        return RawDocument(
            default_id,
            source.name,
            name,
            line_no,
            _safe(line[:KEPT_RAW_CHARS]),
            MALFORMED_JSON,
            f"{where}: JSON nested too deeply to parse ({len(raw):,} bytes)",
        )
    if not isinstance(obj, dict):
        return RawDocument(
            default_id,
            source.name,
            name,
            line_no,
            _safe(line[:KEPT_RAW_CHARS]),
            MALFORMED_JSON,
            f"{where}: a JSON {type(obj).__name__}, not an object",
        )
    present = source.text_field in obj
    id_value = obj.get(source.id_field) if source.id_field else None
    url = obj.get(source.url_field) if source.url_field else None
    return _record(obj.get(source.text_field), id_value, line_no, name, source, present=present, url=url)


# ---------------------------------------------------------------------------------------------- Parquet


def _read_parquet(path: Path, shard: Shard, source: SourceConfig, index: int) -> Iterator[RawDocument]:
    """Records of a run of row groups, read in record batches of the text (and id) column only."""
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise _corrupt(path, source, index, exc) from None
    columns = parquet.schema_arrow.names
    if source.text_field not in columns:
        raise DataError(
            f"source '{source.name}': {path} has no text column '{source.text_field}' "
            f"(columns: {', '.join(columns)})",
            where=f"data.sources[{index}].text_field",
            fix=f"set data.sources[{index}].text_field to the column that holds the text",
        )
    wanted = [source.text_field]
    if source.id_field:
        if source.id_field not in columns:
            raise DataError(
                f"source '{source.name}': {path} has no id column '{source.id_field}' "
                f"(columns: {', '.join(columns)})",
                where=f"data.sources[{index}].id_field",
                fix=f"set data.sources[{index}].id_field to an id column, or remove it to use file:row ids",
            )
        if source.id_field != source.text_field:
            wanted.append(source.id_field)
    if source.url_field:
        if source.url_field not in columns:
            raise DataError(
                f"source '{source.name}': {path} has no URL column '{source.url_field}' "
                f"(columns: {', '.join(columns)})",
                where=f"data.sources[{index}].url_field",
                fix=f"set data.sources[{index}].url_field to the URL column, or remove it",
            )
        if source.url_field not in wanted:
            wanted.append(source.url_field)
    meta = parquet.metadata
    row = sum(meta.row_group(g).num_rows for g in range(shard.start))
    groups = list(range(shard.start, min(shard.stop, meta.num_row_groups)))
    if not groups:
        return
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=wanted, row_groups=groups):
            texts = batch.column(source.text_field).to_pylist()
            ids = batch.column(source.id_field).to_pylist() if source.id_field else [None] * len(texts)
            urls = batch.column(source.url_field).to_pylist() if source.url_field else [None] * len(texts)
            for value, id_value, url in zip(texts, ids, urls, strict=True):
                row += 1
                yield _record(value, id_value, row, shard.name, source, present=True, url=url)
    except (pa.ArrowException, OSError) as exc:
        raise _corrupt(path, source, index, exc) from None


# --------------------------------------------------------------------------------------------- helpers


def _record(
    value: Any,
    id_value: Any,
    line_no: int,
    name: str,
    source: SourceConfig,
    *,
    present: bool,
    url: Any = None,
) -> RawDocument:
    where = f"{name}:{line_no}"
    doc_id = _doc_id(id_value, f"{source.name}/{where}")
    field = source.text_field
    if isinstance(value, str) and value and not value.isspace():
        if value.isascii() or _encodable(value):
            return RawDocument(
                doc_id, source.name, name, line_no, value, url=_safe(url) if isinstance(url, str) else None
            )
        # JSON "\ud800" escapes decode to lone surrogates, which UTF-8 cannot hold
        return RawDocument(
            doc_id,
            source.name,
            name,
            line_no,
            _safe(value),
            INVALID_UTF8,
            f"{where}: field '{field}' holds a lone surrogate (\\ud800-\\udfff escape)",
        )
    if isinstance(value, (bytes, bytearray)):  # Parquet binary column
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = bytes(value)[exc.start : exc.end].hex(" ")
            return RawDocument(
                doc_id,
                source.name,
                name,
                line_no,
                bytes(value).decode("utf-8", errors="replace"),
                INVALID_UTF8,
                f"{where}: invalid UTF-8 byte(s) {bad} at offset {exc.start}",
            )
    if value is None:
        what = "is null" if present else "is absent"
        return RawDocument(
            doc_id, source.name, name, line_no, "", MISSING_TEXT, f"{where}: field '{field}' {what}"
        )
    if not isinstance(value, str):
        try:
            shown = value if isinstance(value, (int, float, bool)) else json.dumps(value, default=str)[:200]
        except (ValueError, RecursionError):
            shown = f"<{type(value).__name__}>"
        return RawDocument(
            doc_id,
            source.name,
            name,
            line_no,
            _safe(str(shown)),
            WRONG_TYPE,
            f"{where}: field '{field}' is {type(value).__name__}, not a string",
        )
    if not _encodable(value):
        return RawDocument(
            doc_id,
            source.name,
            name,
            line_no,
            _safe(value),
            INVALID_UTF8,
            f"{where}: field '{field}' holds a lone surrogate (\\ud800-\\udfff escape)",
        )
    if not value.strip():
        return RawDocument(
            doc_id,
            source.name,
            name,
            line_no,
            value,
            EMPTY_TEXT,
            f"{where}: field '{field}' is empty or whitespace ({len(value)} chars)",
        )
    return RawDocument(
        doc_id, source.name, name, line_no, value, url=_safe(url) if isinstance(url, str) else None
    )


def _doc_id(value: Any, default: str) -> str:
    if isinstance(value, str) and value:
        return _safe(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return default


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _safe(text: str) -> str:
    """Text that UTF-8 (and so Arrow) accepts: lone surrogates become U+FFFD."""
    return text if _encodable(text) else text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _corrupt(path: Path, source: SourceConfig, index: int, exc: BaseException) -> DataError:
    return DataError(
        f"source '{source.name}': truncated or corrupt file {path} ({type(exc).__name__}: {exc})",
        where=str(path),
        fix=f"{_CORRUPT_FIX} (it matched data.sources[{index}].path)",
    )


def _unreadable(path: Path, source: SourceConfig, index: int, exc: OSError) -> DataError:
    return DataError(
        f"source '{source.name}': cannot read {path}: {exc.strerror or exc}",
        where=str(path),
        fix="check the file exists and is readable, or remove it",
    )

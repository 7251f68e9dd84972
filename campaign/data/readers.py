"""Read documents from a configured source: JSONL (optionally .gz) line by line, Parquet in record batches.

A bad record is a `RawDocument` with a reason (kept and counted, never raised); a bad file as a whole
(no match, truncated or corrupt, no text column) raises DataError naming the file and the fix.
`file` is the path relative to the glob's fixed prefix (e.g. "part-000.jsonl" for ".../web/*.jsonl"), so
outputs and doc ids do not depend on where the corpus lives. `line` is 1-based (the row for Parquet).
Blank lines in JSONL are not records and are skipped.
"""

from __future__ import annotations

import glob
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from campaign.config import SourceConfig
from campaign.errors import DataError

INVALID_UTF8 = "invalid_utf8"
MALFORMED_JSON = "malformed_json"
MISSING_TEXT = "missing_text"
WRONG_TYPE = "wrong_type"
EMPTY_TEXT = "empty_text"
READER_REASONS: tuple[str, ...] = (INVALID_UTF8, MALFORMED_JSON, MISSING_TEXT, WRONG_TYPE, EMPTY_TEXT)

PARQUET_BATCH_ROWS = 4096
_GLOB_CHARS = set("*?[")
_CORRUPT_FIX = "re-copy it or remove it"


@dataclass(frozen=True, slots=True)
class RawDocument:
    """One input record as read. `reason` is None for a readable document, else a reader reason code."""

    doc_id: str
    source: str
    file: str
    line: int
    text: str
    reason: str | None = None
    detail: str = ""


def source_files(source: SourceConfig, index: int = 0) -> list[tuple[Path, str]]:
    """The files a source's glob matches, sorted, each with its name relative to the glob's fixed prefix.

    Raises DataError when nothing matches.
    """
    pattern = source.path
    # A `**` glob follows symlinked folders, and a symlink loop yields the same file under endless names:
    # each file is read once, under its first name in sorted order.
    matches, seen = [], set()
    for p in sorted(Path(p) for p in glob.glob(pattern, recursive=True)):
        try:
            if not p.is_file():
                continue
            real = p.resolve()
        except (OSError, RuntimeError):  # a symlink loop that cannot be resolved
            continue
        if real not in seen:
            seen.add(real)
            matches.append(p)
    if not matches:
        raise DataError(f"source '{source.name}': path '{pattern}' matched no files",
                        where=f"data.sources[{index}].path",
                        fix=f"check data.sources[{index}].path (a glob, absolute or relative to the campaign file)")
    root = _glob_root(pattern)
    return [(path, _relative_name(path, root)) for path in matches]


def read_source(source: SourceConfig, index: int = 0) -> Iterator[RawDocument]:
    """All records of a source in a fixed order: files sorted by path, records in file order."""
    for path, name in source_files(source, index):
        if source.format == "jsonl":
            yield from read_jsonl(path, name, source, index)
        else:
            yield from read_parquet(path, name, source, index)


def read_jsonl(path: Path, name: str, source: SourceConfig, index: int = 0) -> Iterator[RawDocument]:
    """Records of one JSONL file (gzip if the name ends in .gz), one per non-blank line."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            for line_no, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                yield _jsonl_record(raw, line_no, name, source)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise _corrupt(path, source, index, exc) from None
    except OSError as exc:
        raise DataError(f"source '{source.name}': cannot read {path}: {exc}", where=str(path),
                        fix="check the file exists and is readable, or remove it") from None


def read_parquet(path: Path, name: str, source: SourceConfig, index: int = 0) -> Iterator[RawDocument]:
    """Records of one Parquet file, read in record batches of the text (and id) column only."""
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
            fix=f"set data.sources[{index}].text_field to the column that holds the text")
    wanted = [source.text_field]
    if source.id_field:
        if source.id_field not in columns:
            raise DataError(
                f"source '{source.name}': {path} has no id column '{source.id_field}' "
                f"(columns: {', '.join(columns)})",
                where=f"data.sources[{index}].id_field",
                fix=f"set data.sources[{index}].id_field to an id column, or remove it to use file:row ids")
        if source.id_field != source.text_field:
            wanted.append(source.id_field)
    row = 0
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=wanted):
            texts = batch.column(source.text_field).to_pylist()
            ids = batch.column(source.id_field).to_pylist() if source.id_field else [None] * len(texts)
            for value, id_value in zip(texts, ids, strict=True):
                row += 1
                yield _record(value, id_value, row, name, source, present=True)
    except (pa.ArrowException, OSError) as exc:
        raise _corrupt(path, source, index, exc) from None


# --------------------------------------------------------------------------------------------- helpers


def _jsonl_record(raw: bytes, line_no: int, name: str, source: SourceConfig) -> RawDocument:
    where = f"{name}:{line_no}"
    default_id = f"{source.name}/{where}"
    raw = raw.rstrip(b"\r\n")
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
        except ValueError:
            pass
        bad = raw[exc.start:exc.end].hex(" ")
        return RawDocument(doc_id, source.name, name, line_no, _safe(text), INVALID_UTF8,
                           f"{where}: invalid UTF-8 byte(s) {bad} at offset {exc.start}")
    if line_no == 1 and line.startswith("\ufeff"):
        line = line[1:]  # a byte-order mark belongs to the file, not to its first record
    try:
        obj = json.loads(line)
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        col = getattr(exc, "colno", None)
        at = f" at column {col}" if col else ""
        return RawDocument(default_id, source.name, name, line_no, _safe(line), MALFORMED_JSON,
                           f"{where}: {msg}{at}")
    except RecursionError:  # nested deeper than the parser's stack: a record we cannot use, not a crash
        return RawDocument(default_id, source.name, name, line_no, _safe(line[:10_000]), MALFORMED_JSON,
                           f"{where}: JSON nested too deeply to parse")
    if not isinstance(obj, dict):
        return RawDocument(default_id, source.name, name, line_no, _safe(line), MALFORMED_JSON,
                           f"{where}: a JSON {type(obj).__name__}, not an object")
    present = source.text_field in obj
    id_value = obj.get(source.id_field) if source.id_field else None
    return _record(obj.get(source.text_field), id_value, line_no, name, source, present=present)


def _record(value: Any, id_value: Any, line_no: int, name: str, source: SourceConfig, *,
            present: bool) -> RawDocument:
    where = f"{name}:{line_no}"
    doc_id = _doc_id(id_value, f"{source.name}/{where}")
    field = source.text_field
    if isinstance(value, (bytes, bytearray)):  # Parquet binary column
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = bytes(value)[exc.start:exc.end].hex(" ")
            return RawDocument(doc_id, source.name, name, line_no, bytes(value).decode("utf-8", errors="replace"),
                               INVALID_UTF8, f"{where}: invalid UTF-8 byte(s) {bad} at offset {exc.start}")
    if value is None:
        what = "is null" if present else "is absent"
        return RawDocument(doc_id, source.name, name, line_no, "", MISSING_TEXT, f"{where}: field '{field}' {what}")
    if not isinstance(value, str):
        shown = value if isinstance(value, (int, float, bool)) else json.dumps(value, default=str)[:200]
        return RawDocument(doc_id, source.name, name, line_no, _safe(str(shown)), WRONG_TYPE,
                           f"{where}: field '{field}' is {type(value).__name__}, not a string")
    if not _encodable(value):  # JSON "\ud800" escapes decode to lone surrogates, which UTF-8 cannot hold
        return RawDocument(doc_id, source.name, name, line_no, _safe(value), INVALID_UTF8,
                           f"{where}: field '{field}' holds a lone surrogate (\\ud800-\\udfff escape)")
    if not value.strip():
        return RawDocument(doc_id, source.name, name, line_no, value, EMPTY_TEXT,
                           f"{where}: field '{field}' is empty or whitespace ({len(value)} chars)")
    return RawDocument(doc_id, source.name, name, line_no, value)


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
    return DataError(f"source '{source.name}': truncated or corrupt file {path} ({type(exc).__name__}: {exc})",
                     where=str(path), fix=f"{_CORRUPT_FIX} (it matched data.sources[{index}].path)")


_ESCAPED = re.compile(r"\[([\[\]*?])\]")


def _glob_root(pattern: str) -> Path:
    """The fixed directory prefix of a glob: the parts before the first one with a wildcard."""
    parts = Path(pattern).parts
    fixed: list[str] = []
    for part in parts:
        literal = _ESCAPED.sub(r"\1", part)  # glob.escape() writes a literal '[' as '[[]'
        if _GLOB_CHARS & set(_ESCAPED.sub("", part)):
            return Path(*fixed) if fixed else Path(".")
        fixed.append(literal)
    return Path(*fixed).parent  # no wildcard: a single file


def _relative_name(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name

"""Web archives as a source: the pages of WARC files as documents, their main text extracted, their URL kept.

A WARC file's `response`, `resource` and `conversion` records are the documents, in file order; each is kept (its
main text), or rejected with a reason: `warc_not_text` (a content type that is not HTML or plain text: images,
PDFs, scripts), `warc_malformed` (a response whose HTTP header does not parse, or a record cut short in an
uncompressed file), `record_too_large` (a payload over
`max_record_bytes`, not read), `empty_text` (no main text). The other records (`warcinfo`, `request`, `metadata`,
`revisit`) are not pages: they are counted by type (`skipped`), never documents. Records are found by their own
headers first (`campaign.data.warc_records`): a Content-Length that runs past its record makes that record a
`warc_malformed` reject and the reader resynchronises on the next `WARC/` header, so no record is swallowed. A file
that breaks part-way (a gzip stream cut short or corrupt), or whose first record is not a WARC header (random
bytes after `WARC/1.0`), raises the reader's corrupt-file DataError. The document id is the WARC-Record-ID, `line` the
record's 1-based position in the file; the URL is the record's WARC-Target-URI.
Source: FastWARC and Resiliparse's `extract_plain_text(main_content=True)` (Bevendorff et al., ChatNoir's tools), the
extraction datatrove's `Resiliparse` extractor runs after its warcio-based `WarcReader`.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from fastwarc.warc import ArchiveIterator, WarcRecordType
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding

from campaign.config import SourceConfig
from campaign.data.records import (
    EMPTY_TEXT,
    RECORD_TOO_LARGE,
    WARC_MALFORMED,
    WARC_NOT_TEXT,
    RawDocument,
)
from campaign.data.warc_records import RawRecord, RecordSplitter, open_decompressed
from campaign.errors import DataError

PAGE_TYPES = WarcRecordType.response | WarcRecordType.resource | WarcRecordType.conversion
PAGE_KINDS = ("response", "resource", "conversion")
HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain",)


def read_warc(
    path: Path,
    name: str,
    source: SourceConfig,
    limit: int,
    skipped: dict[str, int],
    corrupt: Callable[[BaseException], DataError],
) -> Iterator[RawDocument]:
    """The page records of one WARC file (.warc, or compressed: gzip, zstd, lz4 are detected) as documents, every
    record found by `RecordSplitter` whatever its Content-Length declares."""
    splitter = RecordSplitter(lambda: open_decompressed(path), limit)
    try:
        for raw in splitter:
            kind = raw.headers.get("WARC-Type", "").strip().lower()
            if raw.problem:  # whatever its type: a record that is not whole is a reject, never silently gone
                yield _split_reject(raw, name, source, WARC_MALFORMED, raw.problem)
            elif raw.data is None:  # too large to read: a page is a reject, another record is counted
                if kind in PAGE_KINDS:
                    yield _split_reject(
                        raw,
                        name,
                        source,
                        RECORD_TOO_LARGE,
                        f"record of {raw.content_length:,} bytes > max_record_bytes {limit:,}",
                    )
                else:
                    skipped[kind or "unknown"] = skipped.get(kind or "unknown", 0) + 1
            else:
                records = iter(
                    ArchiveIterator(
                        io.BytesIO(raw.data), record_types=WarcRecordType.any_type, parse_http=False
                    )
                )
                record = next(records, None)  # read while its iterator stands: FastWARC reuses the record
                if record is None:
                    yield _split_reject(raw, name, source, WARC_MALFORMED, "record does not parse")
                elif not record.record_type & PAGE_TYPES:
                    kind = str(record.record_type)
                    skipped[kind] = skipped.get(kind, 0) + 1
                else:
                    yield _document(record, raw.number, name, source, limit)
    except DataError:
        raise
    except (OSError, ValueError, EOFError, zlib.error) as exc:
        raise corrupt(exc) from None
    finally:
        splitter.close()


def _split_reject(raw: RawRecord, name: str, source: SourceConfig, reason: str, detail: str) -> RawDocument:
    doc_id = raw.headers.get("WARC-Record-ID") or f"{source.name}/{name}:{raw.number}"
    url = raw.headers.get("WARC-Target-URI") or ""
    return RawDocument(
        doc_id, source.name, name, raw.number, "", reason, f"{name}:{raw.number}: {detail}", url
    )


def _document(record, number: int, name: str, source: SourceConfig, limit: int) -> RawDocument:
    headers = record.headers
    url = headers.get("WARC-Target-URI") or ""
    doc_id = headers.get("WARC-Record-ID") or f"{source.name}/{name}:{number}"
    where = f"{name}:{number}"

    def rejected(reason: str, detail: str, text: str = "") -> RawDocument:
        return RawDocument(doc_id, source.name, name, number, text, reason, f"{where}: {detail}", url)

    if record.content_length > limit:
        return rejected(
            RECORD_TOO_LARGE, f"record of {record.content_length:,} bytes > max_record_bytes {limit:,}"
        )
    is_http = record.record_type == WarcRecordType.response or "application/http" in (
        headers.get("Content-Type") or ""
    )
    if is_http:
        try:
            record.parse_http()
        except (OSError, ValueError) as exc:
            return rejected(WARC_MALFORMED, f"HTTP header does not parse ({exc})")
        status = record.http_headers.status_code if record.http_headers is not None else None
        if not record.is_http or not status:
            line = (record.http_headers.status_line if record.http_headers is not None else "")[:80]
            return rejected(WARC_MALFORMED, f"no HTTP status line (starts {line!r})")
        content_type = (record.http_content_type or "").lower()
        charset = record.http_charset
    else:
        content_type = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        charset = None
    body = record.reader.read()
    if record.reader.tell() < record.content_length:  # an uncompressed file cut inside this record
        return rejected(
            WARC_MALFORMED, f"truncated: {record.reader.tell():,} of {record.content_length:,} bytes"
        )
    if content_type not in HTML_TYPES + TEXT_TYPES:
        return rejected(WARC_NOT_TEXT, f"content type {content_type or 'missing'!r} ({len(body):,} bytes)")
    html = bytes_to_str(body, str(charset) if charset else (detect_encoding(body) or "utf-8"))
    text = extract_plain_text(html, main_content=True) if content_type in HTML_TYPES else html
    if not text.strip():
        return rejected(EMPTY_TEXT, f"no main text in {len(body):,} bytes of {content_type}", html[:10_000])
    return RawDocument(doc_id, source.name, name, number, text, url=url)

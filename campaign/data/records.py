"""What a reader yields: one input record as read (`RawDocument`), and the reason codes of a record no reader can
make a document of. Every format's reader (JSONL and Parquet in readers.py, WARC in warc.py) uses these."""

from __future__ import annotations

from dataclasses import dataclass

INVALID_UTF8 = "invalid_utf8"
MALFORMED_JSON = "malformed_json"
RECORD_TOO_LARGE = "record_too_large"
MISSING_TEXT = "missing_text"
WRONG_TYPE = "wrong_type"
EMPTY_TEXT = "empty_text"
WARC_NOT_TEXT = "warc_not_text"
WARC_MALFORMED = "warc_malformed"
READER_REASONS: tuple[str, ...] = (
    INVALID_UTF8,
    MALFORMED_JSON,
    RECORD_TOO_LARGE,
    MISSING_TEXT,
    WRONG_TYPE,
    EMPTY_TEXT,
    WARC_NOT_TEXT,
    WARC_MALFORMED,
)


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
    url: str | None = None  # from the source's url_field, when it has one

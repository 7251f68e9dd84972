"""WARC files written at test time with FastWARC from HTML pages the machine ships (never committed)."""

from __future__ import annotations

from pathlib import Path

from fastwarc.stream_io import GzipWriter
from fastwarc.warc import WarcRecord, WarcRecordType

HTML_FOLDERS = (Path("/usr/share/doc"), Path("/usr/share/javascript"), Path("/usr/lib/python3"))


def shipped_html(limit: int = 20, min_bytes: int = 2000) -> list[Path]:
    """Up to `limit` HTML files of at least `min_bytes` from the machine's documentation, in path order."""
    found: list[Path] = []
    for folder in HTML_FOLDERS:
        if folder.is_dir():
            found += [
                p for p in sorted(folder.rglob("*.htm*")) if p.is_file() and p.stat().st_size >= min_bytes
            ]
        if len(found) >= limit:
            break
    return found[:limit]


def record(kind: WarcRecordType, url: str, block: bytes, content_type: str | None = None) -> WarcRecord:
    out = WarcRecord()
    out.init_headers(kind)
    if url:
        out.headers["WARC-Target-URI"] = url
    if content_type:
        out.headers["Content-Type"] = content_type
    out.set_bytes_content(block)
    return out


def http_response(url: str, body: bytes, content_type: str = "text/html; charset=utf-8") -> WarcRecord:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return record(WarcRecordType.response, url, head.encode() + body, "application/http; msgtype=response")


def write_warc(path: Path, records: list[WarcRecord], *, gzip: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw:
        stream = GzipWriter(raw) if gzip else raw
        for r in records:
            r.write(stream)
        if gzip:
            stream.close()
    return path


def crawl(pages: list[Path], base: str = "https://docs.example.org/") -> list[WarcRecord]:
    """warcinfo, then a request and a response per page, as a crawler writes them."""
    records = [
        record(WarcRecordType.warcinfo, "", b"software: campaign tests\r\n", "application/warc-fields")
    ]
    for i, page in enumerate(pages):
        url = f"{base}{i}/{page.name}"
        records.append(record(WarcRecordType.request, url, b"GET / HTTP/1.1\r\n\r\n", "application/http"))
        records.append(http_response(url, page.read_bytes()))
    return records

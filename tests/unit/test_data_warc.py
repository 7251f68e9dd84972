"""WARC sources: page records become documents with their URL; every record is kept, rejected or counted."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fastwarc.warc import WarcRecordType

from campaign.config import CleaningConfig, DataConfig, NearDedupConfig, SourceConfig
from campaign.data import prepare_data
from campaign.data.warc import read_warc
from campaign.errors import DataError
from tests.helpers.warc_files import crawl, http_response, record, shipped_html, write_warc

PAGES = shipped_html(8)
pytestmark = pytest.mark.skipif(len(PAGES) < 4, reason="needs HTML documentation under /usr/share/doc")


def _config(tmp_path: Path) -> DataConfig:
    return DataConfig(
        sources=(
            SourceConfig(name="crawl", path=str(tmp_path / "warc" / "*.warc*"), format="warc", weight=1),
        ),
        cleaning=CleaningConfig(near_dedup=NearDedupConfig(enabled=False)),
    )


def _odd_records() -> list:
    return [
        http_response("https://img.example.org/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png"),
        record(
            WarcRecordType.response,
            "https://bad.example.org/",
            b"not an http header at all",
            "application/http",
        ),
        http_response("https://empty.example.org/", b"<html><body><script>var x;</script></body></html>"),
        record(WarcRecordType.resource, "file:///notes.txt", b"plain text notes " * 40, "text/plain"),
        record(
            WarcRecordType.metadata,
            "https://docs.example.org/0/",
            b"fetchTimeMs: 12\r\n",
            "application/warc-fields",
        ),
    ]


def test_every_record_is_kept_rejected_or_counted(tmp_path: Path) -> None:
    write_warc(tmp_path / "warc" / "a.warc.gz", crawl(PAGES[:5]) + _odd_records())
    write_warc(tmp_path / "warc" / "b.warc", crawl(PAGES[5:], base="https://b.example.org/"), gzip=False)
    manifest = prepare_data(_config(tmp_path), tmp_path / "data")
    (src,) = manifest["sources"]
    pages = len(PAGES) + 4  # responses and the resource; not the warcinfo, request and metadata records
    assert src["n_input"] == pages == src["n_kept"] + src["n_rejected"]
    assert src["records_skipped"] == {"metadata": 1, "request": len(PAGES), "warcinfo": 2}
    assert src["by_reason"]["warc_not_text"] == 1 and src["by_reason"]["warc_malformed"] == 1
    assert src["by_reason"]["empty_text"] == 1
    rejected = pq.read_table(tmp_path / "data" / "rejected" / "crawl.parquet").to_pylist()
    by_url = {r["url"]: r for r in rejected}
    assert by_url["https://img.example.org/logo.png"]["detail"].startswith("a.warc.gz:")
    assert "image/png" in by_url["https://img.example.org/logo.png"]["detail"]
    assert by_url["https://bad.example.org/"]["reason"] == "warc_malformed"
    clean = pq.read_table(tmp_path / "data" / "clean" / "crawl.parquet").to_pylist()
    assert clean and all(r["url"] and r["doc_id"].startswith("<urn:uuid:") for r in clean)
    urls = [r["url"] for r in clean + rejected if r["url"].startswith(("https://docs.", "https://b."))]
    assert len(urls) == len(PAGES)  # every page accounted for, under its URL


def test_main_text_is_extracted_from_html(tmp_path: Path) -> None:
    body = (
        b"<html><head><title>t</title><style>p{}</style></head><body><nav>Home | About</nav>"
        b"<article><p>The archive keeps the page as the crawler saw it.</p></article>"
        b"<script>track()</script></body></html>"
    )
    path = write_warc(tmp_path / "a.warc.gz", [http_response("https://x.example.org/a", body)])
    source = _config(tmp_path).sources[0]
    skipped: dict[str, int] = {}
    (doc,) = read_warc(path, "a.warc.gz", source, 2**20, skipped, lambda exc: DataError(str(exc)))
    assert (doc.url, doc.line, doc.reason) == ("https://x.example.org/a", 1, None)
    assert doc.text.strip() == "The archive keeps the page as the crawler saw it."
    assert skipped == {}


def test_a_record_cut_short_in_a_plain_archive_is_malformed(tmp_path: Path) -> None:
    path = write_warc(tmp_path / "a.warc", crawl(PAGES[:2]), gzip=False)
    path.write_bytes(path.read_bytes()[:-500])
    source = _config(tmp_path).sources[0]
    docs = list(read_warc(path, "a.warc", source, 2**30, {}, lambda exc: DataError(str(exc))))
    assert [d.reason for d in docs] == [None, "warc_malformed"]
    assert "truncated: " in docs[1].detail and docs[1].url.endswith(PAGES[1].name)


def test_a_truncated_archive_is_named_with_the_fix(tmp_path: Path) -> None:
    path = write_warc(tmp_path / "warc" / "a.warc.gz", crawl(PAGES[:4]))
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])
    with pytest.raises(DataError, match="truncated or corrupt file") as err:
        prepare_data(_config(tmp_path), tmp_path / "data")
    assert "a.warc.gz" in str(err.value) and "re-copy it or remove it" in str(err.value)

"""WARC sources: page records become documents with their URL; every record is kept, rejected or counted."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fastwarc.warc import WarcRecordType

from campaign.config import (
    BenchmarkFileConfig,
    CleaningConfig,
    DataConfig,
    DecontaminateConfig,
    LanguagesConfig,
    NearDedupConfig,
    PiiConfig,
    SourceConfig,
    UrlFilterConfig,
)
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


def test_every_record_is_accounted_for_with_every_step_on(tmp_path: Path) -> None:
    """URL block list, language, the rule groups, decontamination and PII over a WARC source: every page record is
    kept or rejected with its reason, the steps' reasons name what matched, and the counts add up."""
    pages = crawl(PAGES[:5]) + _odd_records()
    pages.append(http_response("https://blocked.example/page", PAGES[5].read_bytes()))
    french = (
        "<html><body><p>"
        + "Ceci est un texte en français sur la cuisine et le vin. " * 30
        + "</p></body></html>"
    )
    pages.append(http_response("https://fr.example.org/", french.encode()))
    contact = PAGES[6].read_bytes().replace(b"</body>", b"<p>Write to docs@site.example.net now.</p></body>")
    pages.append(http_response("https://c.example.org/contact", contact))
    pages.append(http_response("https://mirror.example.org/contact", contact))  # the same page again
    write_warc(tmp_path / "warc" / "a.warc.gz", pages)
    (tmp_path / "domains.txt").write_text("# blocked\nblocked.example\n", encoding="utf-8")
    prepare_data(_config(tmp_path), tmp_path / "plain")
    kept_before = pq.read_table(tmp_path / "plain" / "clean" / "crawl.parquet").to_pylist()
    target = max(kept_before, key=lambda r: len(r["text"].split()))
    (tmp_path / "qa.jsonl").write_text(
        json.dumps({"question": " ".join(target["text"].split()[20:40])}) + "\n", encoding="utf-8"
    )
    base = _config(tmp_path)
    data = base.model_copy(
        update={
            "cleaning": CleaningConfig(
                near_dedup=NearDedupConfig(enabled=False),
                languages=LanguagesConfig(enabled=True),
                pii=PiiConfig(enabled=True),
                url_filter=UrlFilterConfig(domains_file=str(tmp_path / "domains.txt")),
            ),
            "decontaminate": DecontaminateConfig(
                benchmarks=(
                    BenchmarkFileConfig(
                        name="qa", path=str(tmp_path / "qa.jsonl"), text_fields=("question",)
                    ),
                )
            ),
        }
    )
    manifest = prepare_data(data, tmp_path / "data")
    (src,) = manifest["sources"]
    clean = pq.read_table(tmp_path / "data" / "clean" / "crawl.parquet").to_pylist()
    rejected = pq.read_table(tmp_path / "data" / "rejected" / "crawl.parquet").to_pylist()
    responses = 5 + 4 + 4  # the crawl's pages, the odd records that are pages, the four added here
    assert src["n_input"] == responses == len(clean) + len(rejected) == src["n_kept"] + src["n_rejected"]
    assert sum(src["by_reason"].values()) == src["n_rejected"]
    by_url = {r["url"]: r for r in rejected}
    assert by_url["https://blocked.example/page"]["reason"] == "url_blocked_domain"
    assert "blocked.example" in by_url["https://blocked.example/page"]["detail"]
    assert "domains.txt:2" in by_url["https://blocked.example/page"]["detail"]
    assert by_url["https://fr.example.org/"]["reason"] == "language_not_kept"
    assert by_url["https://fr.example.org/"]["language"] == "fr"
    overlap = [r for r in rejected if r["reason"] == "benchmark_overlap_qa"]
    assert [r["url"] for r in overlap] == [target["url"]] and "qa.jsonl:1" in overlap[0]["detail"]
    duplicate = [r for r in rejected if r["reason"] == "exact_duplicate"]
    assert [r["url"] for r in duplicate] == ["https://mirror.example.org/contact"]
    assert all(r["language"] == "en" and r["language_score"] >= 0.65 for r in clean + overlap + duplicate)
    assert src["pii_by_kind"]["email"] >= 1  # the address added here, and any the pages carry
    contact_text = next(r["text"] for r in clean if r["url"] == "https://c.example.org/contact")
    assert "email@example.com" in contact_text and "docs@site.example.net" not in contact_text


def _with_length(records: list, index: int, length: str, *, gzip: bool, path: Path) -> Path:
    """The records written plainly with record `index`'s WARC Content-Length replaced by `length`, then compressed
    as a whole if `gzip`."""
    import gzip as gz
    import re

    plain = write_warc(path.with_suffix(".tmp"), records, gzip=False).read_bytes()
    starts = [m.start() for m in re.finditer(rb"WARC/1\.[01]\r\n", plain)]
    head_end = plain.index(b"\r\n\r\n", starts[index])
    head = re.sub(
        rb"Content-Length: \d+", b"Content-Length: " + length.encode(), plain[starts[index] : head_end]
    )
    data = plain[: starts[index]] + head + plain[head_end:]
    path.write_bytes(gz.compress(data) if gzip else data)
    return path


def _read(path: Path, limit: int = 2**20) -> tuple[list, dict[str, int]]:
    skipped: dict[str, int] = {}
    source = SourceConfig(name="crawl", path=str(path), format="warc", weight=1)
    docs = list(read_warc(path, path.name, source, limit, skipped, lambda exc: DataError(str(exc))))
    return docs, skipped


def _responses() -> list:  # new records each time: writing a FastWARC record consumes its content
    return [
        http_response(f"https://r.example.org/{i}", b"<p>page %d of prose text</p>" % i) for i in range(101)
    ]


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize(
    ("index", "length", "detail"),
    [
        (
            30,
            "1000000",
            "Content-Length 1,000,000 does not end the record",
        ),  # over-declared, within the limit
        (
            30,
            "999999999999",
            "Content-Length 999,999,999,999 does not end the record",
        ),  # beyond max_record_bytes
        (30, "20", "Content-Length 20 does not end the record"),  # under-declared
        (30, "lots", "header does not parse"),  # not a number
        (100, "1000000", "truncated"),  # the last record: nothing to resynchronise on
    ],
    ids=["over", "over-limit", "under", "not-a-number", "last"],
)
def test_a_record_whose_length_lies_is_its_own_reject_and_the_rest_are_read(
    tmp_path, gzip, index, length, detail
):
    path = _with_length(
        _responses(), index, length, gzip=gzip, path=tmp_path / ("a.warc.gz" if gzip else "a.warc")
    )
    docs, skipped = _read(path)
    assert len(docs) == 101 and skipped == {}  # every record kept or rejected: none swallowed
    bad = [d for d in docs if d.reason]
    assert [(d.line, d.reason) for d in bad] == [(index + 1, "warc_malformed")], [d.detail for d in bad]
    assert detail in bad[0].detail and bad[0].url == f"https://r.example.org/{index}"
    assert [d.url for d in docs if not d.reason] == [
        f"https://r.example.org/{i}" for i in range(101) if i != index
    ]


def test_a_non_page_record_whose_length_lies_is_rejected_not_lost(tmp_path):
    records = crawl(PAGES[:3])  # warcinfo, then request/response pairs
    docs, skipped = _read(_with_length(records, 1, "500000", gzip=False, path=tmp_path / "a.warc"))
    assert [d.reason for d in docs] == ["warc_malformed", None, None, None]  # the request: rejected, named
    assert skipped == {"warcinfo": 1, "request": 2}


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("tail", [b"random", b"random-with-blank-line"])
def test_random_bytes_after_a_warc_line_are_a_corrupt_file_exit_2(tmp_path, gzip, tail):
    import gzip as gz
    import random

    noise = random.Random(7).randbytes(5000)
    if tail == b"random-with-blank-line":
        noise = noise[:100] + b"\r\n\r\n" + noise[100:]
    data = b"WARC/1.0\r\n" + noise
    (tmp_path / "warc").mkdir()
    (tmp_path / "warc" / ("a.warc.gz" if gzip else "a.warc")).write_bytes(gz.compress(data) if gzip else data)
    with pytest.raises(DataError) as err:
        prepare_data(_config(tmp_path), tmp_path / "data")
    assert err.value.exit_code == 2 and "a.warc" in str(err.value)

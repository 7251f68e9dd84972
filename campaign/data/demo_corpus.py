"""A small demo corpus with known defects, generated at run time from Python's own documentation text.

Real prose comes from the standard library's `pydoc_data.topics` (PSF licence; always installed), so nothing
is committed. `web` is synthetic web pages (JSONL, two files) built from its paragraphs, with injected exact
duplicates, junk pages for each Gopher rule and broken records for each reader rejection; `docs` (Parquet,
columns doc_id and body) is the topics cut at their section headings, some of which also appear in `web`.
`write_demo_corpus` returns what the pipeline must find, per document, under the default CleaningConfig.
Deterministic for a seed (numpy Generator); rewriting gives identical bytes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

import campaign.data.filters as F
import campaign.data.readers as R
from campaign.config import CleaningConfig
from campaign.data.dedup import EXACT_DUPLICATE, text_sha256
from campaign.data.normalise import normalise_text
from campaign.errors import ConfigError
from campaign.files import atomic_write_bytes, atomic_write_parquet

N_GOOD_PAGES = 300  # ordinary web pages (3-6 prose paragraphs each)
N_MIRRORS = 12  # web pages that copy a docs section verbatim: the docs copy is the duplicate
N_WEB_DUPLICATES = 24  # exact re-posts of earlier web pages; every third differs only in whitespace
JUNK_PAGES = {  # pages built to fail one Gopher rule each
    F.GOPHER_SHORT_DOC: 6,
    F.GOPHER_BELOW_AVG_THRESHOLD: 3,
    F.GOPHER_ABOVE_AVG_THRESHOLD: 3,
    F.GOPHER_TOO_MANY_HASHES: 5,
    F.GOPHER_TOO_MANY_ELLIPSIS: 4,
    F.GOPHER_BELOW_ALPHA_THRESHOLD: 5,
    F.GOPHER_ENOUGH_STOP_WORDS: 4,
    F.DUP_LINE_FRAC: 5,
}
DOCS_MIN_WORDS = 60  # a docs document is one or more consecutive sections of a topic, merged to this size

_SHORT = [
    "Page not found. The page you are looking for has moved.",
    "Loading... please wait.",
    "Cookies help us deliver our services. By using our services, you agree to our use of cookies.",
    "Sign in to continue reading this article.",
    "403 Forbidden",
    "This site is under construction. Check back soon!",
]
_TAGS = [
    "#python",
    "#coding",
    "#programming",
    "#dev",
    "#tips",
    "#learn",
    "#code",
    "#tutorial",
    "#100daysofcode",
    "#software",
    "#tech",
    "#pythonprogramming",
]
_TEASERS = [
    "Top tips for {}... Read more...",
    "What nobody tells you about {}... Continue...",
    "{} explained... Read more...",
    "Ten facts about {}... More...",
]
_KEYWORDS = [
    "python",
    "tutorial",
    "free",
    "download",
    "best",
    "course",
    "online",
    "examples",
    "beginner",
    "advanced",
    "tips",
    "tricks",
    "cheat",
    "sheet",
    "pdf",
    "book",
    "learn",
    "programming",
    "code",
    "developer",
    "jobs",
    "salary",
    "interview",
    "questions",
    "answers",
    "certification",
    "training",
]
_CHAT = [
    "ok",
    "so",
    "i",
    "go",
    "u",
    "r",
    "lol",
    "ya",
    "k",
    "a",
    "b",
    "me",
    "no",
    "hi",
    "to",
    "the",
    "is",
    "it",
]
_BOILERPLATE = [
    "Subscribe to our newsletter for weekly Python tips.",
    "Share this page with your friends.",
    "Back to the top of the page.",
    "Related posts you might also enjoy.",
]


DEMO_MARKER = ".campaign-demo-corpus"


def claim_demo_folder(out_dir: Path) -> None:
    """Make sure the demo corpus writes only into a folder campaign created: a missing or empty folder is
    claimed with a marker file; a non-empty folder without the marker is someone else's and is refused."""
    marker = out_dir / DEMO_MARKER
    if marker.is_file():
        return
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ConfigError(
            f"{out_dir} already holds files that campaign did not write; the demo corpus is written only into a "
            "folder campaign created",
            where="data.demo_corpus_dir",
            fix="point data.demo_corpus_dir at a new or empty folder (or remove it: real campaigns have none)",
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(marker, b"written by campaign: the synthetic demo corpus lives here\n")


@dataclass(frozen=True, slots=True)
class WebRecord:
    """One line of the web source as written: a good page, a mirror of a docs section, a junk page, a broken
    record or a duplicate, with the reason the pipeline must reject it for (None: kept)."""

    kind: str  # good, mirror, junk, broken, dup
    text: str | None  # None: a broken record
    reason: str | None
    docs_index: int | None = None  # the docs section a mirror copies


@dataclass(frozen=True, slots=True)
class ExpectedCounts:
    """What the pipeline must find in one source under the default CleaningConfig."""

    n_input: int
    n_kept: int
    n_rejected: int
    by_reason: dict[str, int]


@dataclass(frozen=True, slots=True)
class DemoCorpus:
    """The corpus written: its files, the source specs for a DataConfig, and what the pipeline must find."""

    seed: int
    files: list[str]
    sources: list[dict[str, str | float]]  # the `data.sources` entries, as a config gives them
    expected: dict[str, ExpectedCounts]
    rejections: dict[str, str]  # doc_id -> the reason it is rejected for


def write_demo_corpus(out_dir: Path, seed: int = 7) -> DemoCorpus:
    """Write out_dir/web/part-000.jsonl, part-001.jsonl and out_dir/docs/part-000.parquet.

    The expectations it returns hold for CleaningConfig() defaults and exact dedup with web before docs.
    """
    out_dir = Path(out_dir)
    claim_demo_folder(out_dir)
    rng = np.random.default_rng(seed)
    paragraphs, titles = _prose_paragraphs()
    docs = _docs_documents()

    # docs sections that pass the rules (by the independent checks below) can be mirrored into web
    docs_reasons = [_natural_reason(body) for _, body in docs]
    mirror_candidates = [i for i, reason in enumerate(docs_reasons) if reason is None]
    mirrors = sorted(rng.choice(mirror_candidates, size=N_MIRRORS, replace=False).tolist())

    # ---- web records: (kind, payload) in reading order; expected reason per record
    records: list[WebRecord] = []
    seen_pages: set[tuple[int, ...]] = set()
    while sum(r.kind == "good" for r in records) < N_GOOD_PAGES:
        k = int(rng.integers(3, 7))
        pick = tuple(sorted(rng.choice(len(paragraphs), size=k, replace=False).tolist()))
        if pick in seen_pages:
            continue
        seen_pages.add(pick)
        order = rng.permutation(list(pick)).tolist()
        title = titles[order[0]]
        text = f"Notes on {title}\n\n" + "\n\n".join(paragraphs[i] for i in order)
        records.append(WebRecord("good", text, None))
    for i in mirrors:
        records.append(WebRecord("mirror", docs[i][1], None, docs_index=i))
    for reason, count in JUNK_PAGES.items():
        for j in range(count):
            records.append(WebRecord("junk", _junk_page(reason, j, rng, paragraphs, titles), reason))
    for reason in (R.MALFORMED_JSON, R.INVALID_UTF8, R.MISSING_TEXT, R.WRONG_TYPE, R.EMPTY_TEXT):
        records.append(WebRecord("broken", None, reason))
    records = [records[i] for i in rng.permutation(len(records))]

    # exact duplicates go after their original (sort keys: originals at integers, copies in between)
    keys = [float(i) for i in range(len(records))]
    n_base = len(records)
    originals = [i for i, r in enumerate(records) if r.kind in ("good", "mirror")]
    for d in range(N_WEB_DUPLICATES):
        src = int(rng.choice(originals))
        copy = records[src].text
        assert copy is not None  # an original is a page with text
        if d % 3 == 2:  # a re-post that differs only in whitespace: equal after normalisation
            copy = "\r\n".join(line + "  " for line in copy.split("\n")) + "\n\n\n\n\n"
        records.append(WebRecord("dup", copy, EXACT_DUPLICATE))
        keys.append(float(rng.uniform(src + 0.1, n_base)))
    records = [records[i] for i in np.argsort(np.array(keys), kind="stable")]

    # ---- write web: two files, split at the middle
    half = len(records) // 2
    files = []
    rejections: dict[str, str] = {}
    web_ids: list[str] = []  # each record's doc_id, in the order of `records`
    for part, chunk in enumerate((records[:half], records[half:])):
        name = f"part-{part:03d}.jsonl"
        lines = []
        for line_no, record in enumerate(chunk, start=1):
            doc_id = f"web/{name}:{line_no}"
            web_ids.append(doc_id)
            lines.append(_web_line(record, line_no + 1000 * part))
            if record.reason is not None:
                rejections[doc_id] = record.reason
        path = atomic_write_bytes(out_dir / "web" / name, b"".join(lines))
        files.append(str(path))

    # ---- write docs; its expected rejections, web (first in order) having claimed the mirrored texts
    kept_hashes = {
        text_sha256(normalise_text(r.text))
        for r in records
        if r.kind in ("good", "mirror") and r.text is not None
    }
    doc_ids = [doc_id for doc_id, _ in docs]
    for (doc_id, body), natural in zip(docs, docs_reasons, strict=True):
        doc_reason = natural
        if doc_reason is None:
            sha = text_sha256(normalise_text(body))
            doc_reason = EXACT_DUPLICATE if sha in kept_hashes else None
            kept_hashes.add(sha)
        if doc_reason is not None:
            rejections[doc_id] = doc_reason
    table = pa.table(
        {"doc_id": pa.array(doc_ids, pa.string()), "body": pa.array([b for _, b in docs], pa.string())}
    )
    files.append(str(atomic_write_parquet(out_dir / "docs" / "part-000.parquet", table)))

    expected = {
        "web": _expected(web_ids, rejections),
        "docs": _expected(doc_ids, rejections),
    }
    sources: list[dict[str, str | float]] = [
        {
            "name": "web",
            "path": str(out_dir / "web" / "*.jsonl"),
            "format": "jsonl",
            "text_field": "text",
            "weight": 0.6,
        },
        {
            "name": "docs",
            "path": str(out_dir / "docs" / "*.parquet"),
            "format": "parquet",
            "text_field": "body",
            "id_field": "doc_id",
            "weight": 0.4,
        },
    ]
    return DemoCorpus(seed, files, sources, expected, rejections)


# ------------------------------------------------------------------------------------------- internals


def _topics() -> dict[str, str]:
    from pydoc_data.topics import topics

    return {key: topics[key] for key in sorted(topics)}


def _prose_paragraphs() -> tuple[list[str], list[str]]:
    """Plain prose paragraphs of the topics (no code, grammar or doctest blocks), with their topic titles."""
    paragraphs, titles = [], []
    for text in _topics().values():
        title = text.split("\n", 1)[0].strip()
        for para in re.split(r"\n\s*\n", text):
            if (
                not para.startswith((" ", "\t"))
                and len(para.split()) >= 20
                and "::=" not in para
                and ">>>" not in para
                and "#" not in para
                and "..." not in para
                and "|" not in para
                and _alpha_fraction(para) >= 0.9
            ):
                paragraphs.append(para.strip())
                titles.append(title)
    return paragraphs, titles


def _docs_documents() -> list[tuple[str, str]]:
    """Each topic cut at its section headings, consecutive sections merged up to DOCS_MIN_WORDS words."""
    heading = re.compile(r"\n(?=[^\n]+\n[=\-*]{3,}\n)")
    out: list[tuple[str, str]] = []
    for key, text in _topics().items():
        pieces: list[str] = []
        for section in heading.split(text):
            if pieces and len(pieces[-1].split()) < DOCS_MIN_WORDS:
                pieces[-1] = pieces[-1].rstrip() + "\n\n" + section
            else:
                pieces.append(section)
        if len(pieces) > 1 and len(pieces[-1].split()) < DOCS_MIN_WORDS:
            last = pieces.pop()
            pieces[-1] = pieces[-1].rstrip() + "\n\n" + last
        out.extend((f"pydoc/{key}/{n}", piece) for n, piece in enumerate(pieces))
    return out


def _alpha_fraction(text: str) -> float:
    words = text.split()
    n_alpha = sum(1 for w in words if w.isalpha() or any(map(str.isalpha, w)))
    return n_alpha / len(words) if words else 0.0


def _natural_reason(body: str) -> str | None:
    """The rules real documentation sections fail, computed independently of campaign.data.filters.

    The topics only fail two rules: too few words (short topics) and too few words with a letter
    (operator tables, format-spec grammars).
    """
    cfg = CleaningConfig()
    words = body.split()
    if len(words) < cfg.min_words:
        return F.GOPHER_SHORT_DOC
    if _alpha_fraction(body) < cfg.min_alpha_word_fraction:
        return F.GOPHER_BELOW_ALPHA_THRESHOLD
    return None


def _junk_page(
    reason: str, j: int, rng: np.random.Generator, paragraphs: list[str], titles: list[str]
) -> str:
    """A page that fails `reason` first under CleaningConfig() defaults (and passes every earlier rule)."""
    para = paragraphs[int(rng.integers(len(paragraphs)))]
    title = titles[int(rng.integers(len(titles)))]
    if reason == F.GOPHER_SHORT_DOC:
        return _SHORT[j % len(_SHORT)]
    if reason == F.GOPHER_BELOW_AVG_THRESHOLD:  # chat noise: many 1-2 letter words
        return " ".join(rng.choice(_CHAT, size=80).tolist())
    if reason == F.GOPHER_ABOVE_AVG_THRESHOLD:  # link farm: long URLs
        slugs = ["-".join(rng.choice(_KEYWORDS, size=4).tolist()) for _ in range(60)]
        return "\n".join(f"https://pynotes.example/{s}/index.html" for s in slugs)
    if reason == F.GOPHER_TOO_MANY_HASHES:  # one paragraph plus hashtag spam
        tags = " ".join(rng.choice(_TAGS, size=30).tolist())
        return f"{para}\n\n{tags}"
    if reason == F.GOPHER_TOO_MANY_ELLIPSIS:  # teaser list
        subject = title.lower()
        return "\n".join(_TEASERS[i % len(_TEASERS)].format(subject) for i in range(12 + j))
    if reason == F.GOPHER_BELOW_ALPHA_THRESHOLD:  # numeric table dump
        numbers = " ".join(f"{x:.2f}" for x in rng.uniform(10, 9999, size=90))
        return f"Price list {title}\n{numbers}"
    if reason == F.GOPHER_ENOUGH_STOP_WORDS:  # keyword stuffing
        return " ".join(rng.choice(_KEYWORDS, size=70).tolist())
    if reason == F.DUP_LINE_FRAC:  # boilerplate lines repeated around one paragraph
        lines = [line for item in _BOILERPLATE for line in [item] * (3 + j % 3)]
        return para + "\n" + "\n".join(lines)
    raise ValueError(f"no junk page for {reason}")


def _web_line(record: WebRecord, n: int) -> bytes:
    url = f"https://pynotes.example/page/{n:05d}"
    reason = record.reason
    if record.kind == "broken":
        if reason == R.MALFORMED_JSON:  # a line cut off mid-string
            return f'{{"url": "{url}", "text": "This page was cut off in the middle of a\n'.encode()
        if reason == R.INVALID_UTF8:  # a Latin-1 page in a UTF-8 file
            text = "Caf\u00e9 notes: the menu of the caf\u00e9 changes every week, and that is all we have to say."
            return (json.dumps({"url": url, "text": text}, ensure_ascii=False) + "\n").encode("latin-1")
        if reason == R.MISSING_TEXT:
            return (json.dumps({"url": url, "title": "An empty shell"}) + "\n").encode()
        if reason == R.WRONG_TYPE:
            return (json.dumps({"url": url, "text": ["a", "list", "of", "paragraphs"]}) + "\n").encode()
        if reason == R.EMPTY_TEXT:
            return (json.dumps({"url": url, "text": "  \n\t "}) + "\n").encode()
    return (json.dumps({"url": url, "text": record.text}, ensure_ascii=False) + "\n").encode("utf-8")


def _expected(doc_ids: list[str], rejections: dict[str, str]) -> ExpectedCounts:
    by_reason = Counter(rejections[d] for d in doc_ids if d in rejections)
    n_rejected = sum(by_reason.values())
    return ExpectedCounts(
        len(doc_ids), len(doc_ids) - n_rejected, n_rejected, dict(sorted(by_reason.items()))
    )

"""The batch filters decide exactly as the per-document filters they replaced (tests/oracles/filters_reference.py).

Input: real text already on this machine (Debian's /usr/share/common-licenses and /usr/share/doc files cut into
page-sized documents at blank lines, in several groupings) plus edge cases the rules are sensitive to. For every
document and several configurations (defaults, the benchmark's C4 + FineWeb, unusual thresholds and n-gram
lists out of order), the kept text, the rejection reason and detail, the word and byte counts and the
characters edited must be identical.
"""

from __future__ import annotations

import glob
import gzip
import os
import random
from pathlib import Path

import pytest

from campaign.config import C4Config, CleaningConfig, FineWebConfig, GopherRepetitionConfig
from campaign.data import filters as F
from campaign.data.normalise import normalise_text
from tests.oracles import filters_reference as R

CONFIGS = {
    "default": CleaningConfig(),
    "bench": CleaningConfig(c4=C4Config(enabled=True), fineweb=FineWebConfig(enabled=True)),
    "odd": CleaningConfig(
        min_words=5,
        max_bullet_lines_fraction=0.2,
        max_ellipsis_lines_fraction=0.05,
        c4=C4Config(
            enabled=True,
            min_words_per_line=0,
            filter_no_terminal_punct=True,
            min_sentences=1,
            max_word_length=12,
        ),
        fineweb=FineWebConfig(enabled=True, short_line_chars=12, max_duplicate_line_char_fraction=0.02),
        gopher_repetition=GopherRepetitionConfig(
            top_ngram_char_fractions=((1, 0.05), (3, 0.1)),
            duplicate_ngram_char_fractions=((9, 0.05), (4, 0.02), (2, 0.3)),
        ),
    ),
}


def _debian_texts(limit_chars: int = 150_000) -> list[str]:
    texts, total = [], 0
    paths = sorted(glob.glob("/usr/share/common-licenses/*")) + sorted(glob.glob("/usr/share/doc/*/*"))
    for path in paths:
        if not os.path.isfile(path) or os.path.getsize(path) > 60_000:
            continue
        try:
            raw = Path(path).read_bytes()
            text = (gzip.decompress(raw) if path.endswith(".gz") else raw).decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
            continue
        texts.append(text)
        total += len(text)
        if total > limit_chars:
            break
    return texts


def _documents() -> list[str]:
    rng = random.Random(6)
    texts = _debian_texts()
    if len(texts) < 5:
        pytest.skip("needs Debian's /usr/share/doc and /usr/share/common-licenses text")
    paras = [p for t in texts for p in t.split("\n\n") if p.strip()]
    docs = list(texts)
    for _ in range(250):
        k = rng.randint(1, 12)
        start = rng.randrange(len(paras))
        docs.append("\n\n".join(paras[start : start + k]))
    for _ in range(60):  # pages with repeated paragraphs/lines, as boilerplate-heavy pages have
        p = rng.choice(paras)
        docs.append("\n\n".join([p] * rng.randint(2, 4) + [rng.choice(paras)]))
        docs.append("\n".join([p.split("\n")[0]] * rng.randint(2, 20) + [rng.choice(paras)]))
    line = "The quick brown fox jumps over the lazy dog near the river bank."
    docs += [
        "",
        " ",
        "a",
        "\n\n\n",
        "word " * 60,
        "the and " * 30,
        "#tag " * 60,
        "... " * 60,
        "…\n" * 60,
        "\n".join(f"- item {i} of the list and more" for i in range(60)),
        "\n".join(f"  • point {i} with the text..." for i in range(60)),
        "\n".join([line] * 10 + ["lorem ipsum dolor sit amet."]),
        line + " {" + " x" * 60,
        "\n".join(f"{line} [1] [edit] [citation needed]" for _ in range(8)),
        "élan vital ½ ² ٣ and the " * 20,
        "İt wıth the ſome " * 20,
        "_ __ 123 4.5 -- " * 30,
        ("Terms of use. " + line + "\n") * 8 + "javascript is required. " * 5,
        "\u00a0".join(["the", "of", "word"] * 40),
        "a b c d e f a b c d e f " * 10,
        "\n".join(f"{line} lorem [2]ipsum, java[edit]script." for _ in range(8)),
        "\n".join([line] * 6 + ["x" * 1200 + " and the rest of the line.", "y" * 1300]),
    ]
    return [normalise_text(d) for d in docs]


DOCS: list[str] | None = None


def _docs() -> list[str]:
    global DOCS
    if DOCS is None:
        DOCS = _documents()
    return DOCS


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_batch_filters_decide_as_the_reference(name: str) -> None:
    cfg, docs = CONFIGS[name], _docs()
    got = []
    for i in range(0, len(docs), 512):
        got += F.filter_batch(docs[i : i + 512], cfg)
    mismatches = []
    reasons = set()
    for doc, new in zip(docs, got, strict=True):
        ref = R.apply_filters(doc, cfg)
        a = (ref.text, ref.rejection, ref.stats.n_words, ref.stats.n_bytes, ref.chars_edited)
        b = (new.text, new.rejection, new.stats.n_words, new.stats.n_bytes, new.chars_edited)
        if a != b:
            mismatches.append((doc[:80], a[1:], b[1:]))
        reasons.add(ref.rejection.reason if ref.rejection else "kept")
    assert not mismatches, mismatches[:3]
    assert len(reasons) >= 6, reasons  # the corpus exercises many rules, not just one


def test_single_document_path_is_the_batch_path() -> None:
    cfg = CONFIGS["bench"]
    docs = _docs()[:200]
    assert [F.apply_filters(d, cfg)[:2] for d in docs] == [r[:2] for r in F.filter_batch(docs, cfg)]

"""The batch engine: the enabled rule groups in pipeline order over the texts of a batch.

`apply_filters(text, cleaning)` runs the enabled groups in order (size cap, Gopher quality, Gopher repetition,
C4, FineWeb) and returns the first failing rule's `Rejection`, or the text to keep (C4's line rules edit it).
Quality before repetition is MassiveWeb's order (Rae et al. 2021, App. A: quality filtering, then repetition
removal); FineWeb's pipeline runs the repetition filter first. The order decides only which reason a document
failing both is counted under, never whether it is kept.

`filter_batch` takes the normalised texts of a shard's batch and runs each rule group over the texts still in
play, so a document stops at its first failing rule and later groups never measure it (the decisions are those
of checking one document at a time, rule by rule; a regression test holds the batch code to the per-document
code it replaced, `tests/oracles/filters_reference.py`, on real text).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from campaign.config import CleaningConfig, GopherRepetitionConfig
from campaign.data.filters.base import TOO_LARGE, Rejection, TextStats
from campaign.data.filters.c4 import C4_CURLY_BRACKET, C4_LOREM_IPSUM, C4_TOO_FEW_SENTENCES, apply_c4
from campaign.data.filters.fineweb import (
    FINEWEB_CHAR_DUP_RATIO,
    FINEWEB_LINE_PUNCT_RATIO,
    FINEWEB_SHORT_LINE_RATIO,
    check_fineweb,
)
from campaign.data.filters.gopher_quality import (
    GOPHER_ABOVE_AVG_THRESHOLD,
    GOPHER_BELOW_ALPHA_THRESHOLD,
    GOPHER_BELOW_AVG_THRESHOLD,
    GOPHER_ENOUGH_STOP_WORDS,
    GOPHER_LONG_DOC,
    GOPHER_SHORT_DOC,
    GOPHER_TOO_MANY_BULLETS,
    GOPHER_TOO_MANY_ELLIPSIS,
    GOPHER_TOO_MANY_END_ELLIPSIS,
    GOPHER_TOO_MANY_HASHES,
    check_quality,
)
from campaign.data.filters.gopher_repetition import (
    DUP_LINE_CHAR_FRAC,
    DUP_LINE_FRAC,
    DUP_PARA_CHAR_FRAC,
    DUP_PARA_FRAC,
    DUPLICATED_NGRAMS,
    TOP_NGRAM,
    check_repetition,
)
from campaign.data.filters.measures import ngram_tables, word_tables


def filter_reasons(cleaning: CleaningConfig | None = None) -> tuple[str, ...]:
    """Every filter reason in pipeline order (all of them when `cleaning` is None, else the enabled ones)."""
    rep = cleaning.gopher_repetition if cleaning else GopherRepetitionConfig()
    reasons = [TOO_LARGE]
    if cleaning is None or cleaning.gopher_quality:
        reasons += [
            GOPHER_SHORT_DOC,
            GOPHER_LONG_DOC,
            GOPHER_BELOW_AVG_THRESHOLD,
            GOPHER_ABOVE_AVG_THRESHOLD,
            GOPHER_TOO_MANY_HASHES,
            GOPHER_TOO_MANY_ELLIPSIS,
            GOPHER_TOO_MANY_BULLETS,
            GOPHER_TOO_MANY_END_ELLIPSIS,
            GOPHER_BELOW_ALPHA_THRESHOLD,
            GOPHER_ENOUGH_STOP_WORDS,
        ]
    if cleaning is None or rep.enabled:
        reasons += [DUP_PARA_FRAC, DUP_PARA_CHAR_FRAC, DUP_LINE_FRAC, DUP_LINE_CHAR_FRAC]
        top = [n for n, _ in rep.top_ngram_char_fractions] if cleaning else [2, 3, 4]
        dup = [n for n, _ in rep.duplicate_ngram_char_fractions] if cleaning else list(range(5, 11))
        reasons += [TOP_NGRAM.format(n=n) for n in top] + [DUPLICATED_NGRAMS.format(n=n) for n in dup]
    if cleaning is None or cleaning.c4.enabled:
        reasons += [C4_LOREM_IPSUM, C4_CURLY_BRACKET, C4_TOO_FEW_SENTENCES]
    if cleaning is None or cleaning.fineweb.enabled:
        reasons += [FINEWEB_LINE_PUNCT_RATIO, FINEWEB_SHORT_LINE_RATIO, FINEWEB_CHAR_DUP_RATIO]
    return tuple(reasons)


FILTER_REASONS: tuple[str, ...] = filter_reasons()


class FilterResult(NamedTuple):
    """The text to keep (after C4's line edits), the rejection if any, and the stats of the final text."""

    text: str
    rejection: Rejection | None
    stats: TextStats
    chars_edited: int  # characters removed from a kept document by line edits


def apply_filters(text: str, cleaning: CleaningConfig) -> FilterResult:
    """Run the enabled rule groups in pipeline order on a normalised text."""
    return filter_batch([text], cleaning)[0]


# Texts measured together at most: the batch measures take about 20 bytes per character at their peak
# (word ids, n-gram ids, hash tables), so this bounds a worker's extra memory near 40 MB per chunk.
CHUNK_CHARS = 1_000_000


def filter_batch(texts: list[str], cleaning: CleaningConfig) -> list[FilterResult]:
    """`apply_filters` for many normalised texts: the same result for each, with the word and n-gram
    measures of the texts still in play computed together, group by group (see `word_tables`,
    `ngram_tables`), in chunks of about `CHUNK_CHARS` characters (a text's result never depends on the
    others in its chunk)."""
    out: list[FilterResult] = []
    start = size = 0
    for i, text in enumerate(texts):
        size += len(text)
        if size >= CHUNK_CHARS:
            out += _filter_chunk(texts[start : i + 1], cleaning)
            start, size = i + 1, 0
    if start < len(texts):
        out += _filter_chunk(texts[start:], cleaning)
    return out


def _filter_chunk(texts: list[str], cleaning: CleaningConfig) -> list[FilterResult]:
    results: list[FilterResult | None] = [None] * len(texts)
    stats = [TextStats(t) for t in texts]
    alive: list[int] = []
    for i, st in enumerate(stats):
        if st.n_bytes > cleaning.max_doc_bytes:
            results[i] = FilterResult(
                st.text,
                Rejection(TOO_LARGE, f"{st.n_bytes:,} bytes > max_doc_bytes {cleaning.max_doc_bytes:,}"),
                st,
                0,
            )
        else:
            alive.append(i)
    rep = cleaning.gopher_repetition
    for group in _GROUPS:
        if not group.enabled(cleaning) or not alive:
            continue
        if group.name == "gopher_quality":
            word_tables([stats[i] for i in alive])
        elif group.name == "gopher_repetition":
            ngram_tables(
                [stats[i] for i in alive],
                [n for n, _ in rep.top_ngram_char_fractions],
                [n for n, _ in rep.duplicate_ngram_char_fractions],
            )
        still: list[int] = []
        for i in alive:
            st = stats[i]
            if group.edit is not None:
                new_text, rejection = group.edit(st.text, cleaning)
                if rejection is None and new_text != st.text:
                    st = stats[i] = TextStats(new_text)
                    # the kept text must still meet Gopher's length bounds (data_checks asserts them on clean data)
                    if cleaning.gopher_quality and st.n_words < cleaning.min_words:
                        rejection = Rejection(
                            GOPHER_SHORT_DOC,
                            f"{st.n_words} words after C4 line edits < min_words {cleaning.min_words}",
                        )
            else:
                assert group.check is not None  # a group either edits or checks
                rejection = group.check(st, cleaning)
            if rejection is not None:
                results[i] = FilterResult(texts[i], rejection, st, 0)
            else:
                still.append(i)
        alive = still
    for i in alive:
        st = stats[i]
        results[i] = FilterResult(st.text, None, st, len(texts[i]) - len(st.text))
    done = [r for r in results if r is not None]
    assert len(done) == len(texts)  # every document got its result above
    return done


@dataclass(frozen=True)
class _Group:
    name: str
    enabled: Callable[[CleaningConfig], bool]
    check: Callable[[TextStats, CleaningConfig], Rejection | None] | None = None
    edit: Callable[[str, CleaningConfig], tuple[str, Rejection | None]] | None = None


_GROUPS = (
    _Group("gopher_quality", lambda c: c.gopher_quality, check=check_quality),
    _Group(
        "gopher_repetition",
        lambda c: c.gopher_repetition.enabled,
        check=lambda s, c: check_repetition(s, c.gopher_repetition),
    ),
    _Group("c4", lambda c: c.c4.enabled, edit=lambda t, c: apply_c4(t, c.c4)),
    _Group("fineweb", lambda c: c.fineweb.enabled, check=lambda s, c: check_fineweb(s, c.fineweb)),
)


def check_document(text: str, cleaning: CleaningConfig, stats: TextStats | None = None) -> Rejection | None:
    """None means keep, else the first failing rule's rejection (C4's line edits are not returned here)."""
    return apply_filters(text, cleaning).rejection

"""Gopher repetition rules, in datatrove's order: duplicate paragraphs and lines, top n-grams, duplicated n-grams.

Duplicate line/paragraph fraction = elements equal to an earlier element, of all elements; their character
fraction = characters of those repeats, of all characters. Top n-gram (n = 2, 3, 4): characters of the most
frequent word n-gram (words joined by one space) times its count, of all characters, only when it occurs more
than once. Duplicate n-grams (n = 5..10): characters of the words covered by a *repeat* of an n-gram (any
occurrence after its first; overlapping repeats count each word once), of the characters of all words: the
paper's "fraction of characters contained within all duplicate n-grams" without counting a word twice.
datatrove also counts repeats only, but skips n words after each repeat it finds and divides by all characters
including whitespace, so its fractions are slightly lower on the same text.

Source: Rae et al. 2021 (Gopher), arXiv 2112.11446, Table A1; huggingface/datatrove 0.10.1
`pipeline/filters/gopher_repetition_filter.py`.
"""

from __future__ import annotations

from campaign.config import GopherRepetitionConfig
from campaign.data.filters.base import Rejection, TextStats, _duplicates
from campaign.data.filters.measures import ngram_tables

# Reason codes, datatrove's order and names
DUP_PARA_FRAC = "dup_para_frac"
DUP_PARA_CHAR_FRAC = "dup_para_char_frac"
DUP_LINE_FRAC = "dup_line_frac"
DUP_LINE_CHAR_FRAC = "dup_line_char_frac"
TOP_NGRAM = "top_{n}_gram"
DUPLICATED_NGRAMS = "duplicated_{n}_n_grams"


def _need_ngrams(stats: TextStats, cfg: GopherRepetitionConfig) -> None:
    if stats.top_ngrams is None or stats.dup_ngrams is None:
        ngram_tables(
            [stats],
            [n for n, _ in cfg.top_ngram_char_fractions],
            [n for n, _ in cfg.duplicate_ngram_char_fractions],
        )


def check_repetition(stats: TextStats, cfg: GopherRepetitionConfig) -> Rejection | None:
    """Gopher repetition rules in datatrove's order: paragraphs, lines, top n-grams, duplicated n-grams."""
    text = stats.text
    n_chars = len(text)
    if not n_chars:
        return None
    paragraphs = stats.paragraphs
    if len(paragraphs) > 1:
        n_dup, dup_chars = _duplicates(paragraphs)
        frac = n_dup / len(paragraphs)
        if frac > cfg.max_duplicate_paragraph_fraction:
            return Rejection(
                DUP_PARA_FRAC,
                f"duplicate paragraphs {frac:.3f} > "
                f"{cfg.max_duplicate_paragraph_fraction:g} ({n_dup} of {len(paragraphs)})",
            )
        frac = dup_chars / n_chars
        if frac > cfg.max_duplicate_paragraph_char_fraction:
            return Rejection(
                DUP_PARA_CHAR_FRAC,
                f"characters in duplicate paragraphs {frac:.3f} > "
                f"{cfg.max_duplicate_paragraph_char_fraction:g}",
            )
    lines = stats.lines
    if len(lines) > 1:
        n_dup, dup_chars = _duplicates(lines)
        frac = n_dup / len(lines)
        if frac > cfg.max_duplicate_line_fraction:
            return Rejection(
                DUP_LINE_FRAC,
                f"duplicate lines {frac:.3f} > {cfg.max_duplicate_line_fraction:g} ({n_dup} of {len(lines)})",
            )
        frac = dup_chars / n_chars
        if frac > cfg.max_duplicate_line_char_fraction:
            return Rejection(
                DUP_LINE_CHAR_FRAC,
                f"characters in duplicate lines {frac:.3f} > {cfg.max_duplicate_line_char_fraction:g}",
            )
    n_words = stats.n_words
    if (cfg.top_ngram_char_fractions and n_words >= min(n for n, _ in cfg.top_ngram_char_fractions)) or (
        cfg.duplicate_ngram_char_fractions and n_words > min(n for n, _ in cfg.duplicate_ngram_char_fractions)
    ):
        _need_ngrams(stats, cfg)
    for n, limit in cfg.top_ngram_char_fractions:
        if n_words < n:
            continue
        assert stats.top_ngrams is not None  # _need_ngrams above: n_words reaches the shortest n
        count, gram_chars, first = stats.top_ngrams.get(n, (1, 0, 0))
        if count > 1:
            frac = gram_chars * count / n_chars
            if frac > limit:
                gram = stats.words[first : first + n]
                return Rejection(
                    TOP_NGRAM.format(n=n),
                    f"top {n}-gram {' '.join(gram)[:60]!r} x{count} covers "
                    f"{frac:.3f} of characters > {limit:g}",
                )
    if cfg.duplicate_ngram_char_fractions:
        word_chars = stats.word_chars
        for n, limit in cfg.duplicate_ngram_char_fractions:
            if n_words <= n:
                continue
            assert stats.dup_ngrams is not None  # _need_ngrams above: n_words passes the shortest n
            repeats, dup_chars = stats.dup_ngrams[n]
            if not repeats:
                break  # no n-gram repeats, so no longer one does either
            frac = dup_chars / word_chars if word_chars else 0.0
            if frac > limit:
                return Rejection(
                    DUPLICATED_NGRAMS.format(n=n),
                    f"characters in duplicated {n}-grams {frac:.3f} > {limit:g}",
                )
    return None

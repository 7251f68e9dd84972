"""The Gopher/C4/FineWeb filters as they were before the batch rewrite (campaign.data.filters at e867836), frozen
as the oracle the fast implementation must agree with decision for decision. Do not edit: it is the reference."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from campaign.config import C4Config, CleaningConfig, FineWebConfig, GopherRepetitionConfig

TOO_LARGE = "too_large"
# Gopher repetition, datatrove's order and names
DUP_PARA_FRAC = "dup_para_frac"
DUP_PARA_CHAR_FRAC = "dup_para_char_frac"
DUP_LINE_FRAC = "dup_line_frac"
DUP_LINE_CHAR_FRAC = "dup_line_char_frac"
TOP_NGRAM = "top_{n}_gram"
DUPLICATED_NGRAMS = "duplicated_{n}_n_grams"
# Gopher quality
GOPHER_SHORT_DOC = "gopher_short_doc"
GOPHER_LONG_DOC = "gopher_long_doc"
GOPHER_BELOW_AVG_THRESHOLD = "gopher_below_avg_threshold"
GOPHER_ABOVE_AVG_THRESHOLD = "gopher_above_avg_threshold"
GOPHER_TOO_MANY_HASHES = "gopher_too_many_hashes"
GOPHER_TOO_MANY_ELLIPSIS = "gopher_too_many_ellipsis"
GOPHER_TOO_MANY_BULLETS = "gopher_too_many_bullets"
GOPHER_TOO_MANY_END_ELLIPSIS = "gopher_too_many_end_ellipsis"
GOPHER_BELOW_ALPHA_THRESHOLD = "gopher_below_alpha_threshold"
GOPHER_ENOUGH_STOP_WORDS = "gopher_enough_stop_words"
# C4 page rules
C4_LOREM_IPSUM = "c4_lorem_ipsum"
C4_CURLY_BRACKET = "c4_curly_bracket"
C4_TOO_FEW_SENTENCES = "c4_too_few_sentences"
# FineWeb
FINEWEB_LINE_PUNCT_RATIO = "fineweb_line_punct_ratio"
FINEWEB_SHORT_LINE_RATIO = "fineweb_short_line_ratio"
FINEWEB_CHAR_DUP_RATIO = "fineweb_char_dup_ratio"

# Gopher's required English words (Rae et al. 2021, App. A.1.1).
STOP_WORDS = frozenset(("the", "be", "to", "of", "and", "that", "have", "with"))
BULLETS = ("•", "‣", "◦", "⁃", "▪", "▫", "■", "□", "●", "○", "-", "*", "–", "—")
ELLIPSES = ("...", "…")
C4_END_PUNCTUATION = (".", "?", "!", '"', "'")
C4_POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)
_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")
# Terminal punctuation for FineWeb's line rule: Latin, CJK and other scripts' full stops, closing quotes.
TERMINAL_PUNCTUATION = tuple(".!?;:\"'”’»)]…。！？｡︒﹒．।॥։؟۔܀܁܂።፧፨᙮᠃᠉⁇⁈⁉‼‽")
_STOP_WORD = re.compile(r"(?<![\w])(?:" + "|".join(sorted(STOP_WORDS)) + r")(?![\w])", re.IGNORECASE)
_NO_LETTER_WORD = re.compile(r"(?<!\S)(?:[^\w\s]|[\d_])+(?!\S)")
_PARAGRAPHS = re.compile(r"\n{2,}")


class Rejection(NamedTuple):
    """Why a document was dropped: a reason code constant and the measured value against the threshold."""

    reason: str
    detail: str


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


@dataclass
class TextStats:
    """Measures of one normalised text, computed lazily so the first failing rule skips the rest."""

    text: str

    @cached_property
    def n_bytes(self) -> int:
        return len(self.text.encode("utf-8"))

    @cached_property
    def words(self) -> list[str]:
        return self.text.split()

    @cached_property
    def n_words(self) -> int:
        return len(self.words)

    @cached_property
    def mean_word_length(self) -> float:
        return sum(map(len, self.words)) / self.n_words if self.n_words else 0.0

    @cached_property
    def n_hashes(self) -> int:
        return self.text.count("#")

    @cached_property
    def n_ellipsis(self) -> int:
        return self.text.count("...") + self.text.count("\u2026")

    @cached_property
    def n_alpha_words(self) -> int:
        """Words with at least one letter (a character of Unicode category L*, as `str.isalpha`): all words
        minus the whitespace-delimited runs made only of digits, "_" and punctuation (one regex pass)."""
        return self.n_words - len(_NO_LETTER_WORD.findall(self.text))

    def stop_words_present(self, enough: int = 8) -> frozenset[str]:
        """The distinct Gopher stop words in the text, found up to `enough` of them: a stop word counts when
        it is bounded by whitespace, punctuation or the text's ends ("The", "(of)", "to." count; "other",
        "tothe" do not), case-insensitively."""
        found: set[str] = set()
        for match in _STOP_WORD.finditer(self.text):
            found.add(match.group(0).lower())
            if len(found) >= enough:
                break
        return frozenset(found)

    @cached_property
    def lines(self) -> list[str]:
        return [line for line in self.text.split("\n") if line]

    @cached_property
    def paragraphs(self) -> list[str]:
        return [p for p in _PARAGRAPHS.split(self.text) if p]

    @cached_property
    def line_counts(self) -> tuple[int, int]:
        """(non-empty lines, lines that repeat an earlier line)."""
        return len(self.lines), len(self.lines) - len(set(self.lines))

    @cached_property
    def n_bullet_lines(self) -> int:
        return sum(1 for line in self.lines if line.lstrip().startswith(BULLETS))

    @cached_property
    def n_end_ellipsis_lines(self) -> int:
        return sum(1 for line in self.lines if line.endswith(ELLIPSES))


def _duplicates(elements: list[str]) -> tuple[int, int]:
    """(elements equal to an earlier one, characters of those elements)."""
    seen: set[str] = set()
    n_dup = chars = 0
    for el in elements:
        if el in seen:
            n_dup += 1
            chars += len(el)
        else:
            seen.add(el)
    return n_dup, chars


def _ngrams(words: list[str], n: int):
    return zip(*(words[i:] for i in range(n)), strict=False)


# ------------------------------------------------------------------------------------------ rule groups


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
    words = stats.words
    for n, limit in cfg.top_ngram_char_fractions:
        if len(words) < n:
            continue
        ((gram, count),) = Counter(_ngrams(words, n)).most_common(1)
        if count > 1:
            frac = (sum(map(len, gram)) + n - 1) * count / n_chars
            if frac > limit:
                return Rejection(
                    TOP_NGRAM.format(n=n),
                    f"top {n}-gram {' '.join(gram)[:60]!r} x{count} covers "
                    f"{frac:.3f} of characters > {limit:g}",
                )
    if cfg.duplicate_ngram_char_fractions:
        word_chars = sum(map(len, words))
        for n, limit in cfg.duplicate_ngram_char_fractions:
            if len(words) <= n:
                continue
            grams = list(_ngrams(words, n))
            counts = Counter(grams)
            if len(counts) == len(grams):
                break  # no n-gram repeats, so no longer one does either
            covered = bytearray(len(words))
            seen: set[tuple[str, ...]] = set()
            for i, gram in enumerate(grams):
                if counts[gram] > 1:
                    if gram in seen:
                        covered[i : i + n] = b"\x01" * n
                    else:
                        seen.add(gram)
            dup_chars = sum(len(w) for w, c in zip(words, covered, strict=True) if c)
            frac = dup_chars / word_chars if word_chars else 0.0
            if frac > limit:
                return Rejection(
                    DUPLICATED_NGRAMS.format(n=n),
                    f"characters in duplicated {n}-grams {frac:.3f} > {limit:g}",
                )
    return None


def check_quality(stats: TextStats, cfg: CleaningConfig) -> Rejection | None:
    """Gopher quality rules in datatrove's order."""
    n_words = stats.n_words
    if n_words < cfg.min_words:
        return Rejection(GOPHER_SHORT_DOC, f"{n_words} words < min_words {cfg.min_words}")
    if n_words > cfg.max_words:
        return Rejection(GOPHER_LONG_DOC, f"{n_words:,} words > max_words {cfg.max_words:,}")
    if n_words:
        mean = stats.mean_word_length
        if mean < cfg.min_mean_word_length:
            return Rejection(
                GOPHER_BELOW_AVG_THRESHOLD, f"mean word length {mean:.2f} < {cfg.min_mean_word_length:g}"
            )
        if mean > cfg.max_mean_word_length:
            return Rejection(
                GOPHER_ABOVE_AVG_THRESHOLD, f"mean word length {mean:.2f} > {cfg.max_mean_word_length:g}"
            )
    ratio = stats.n_hashes / n_words if n_words else 0.0
    if ratio > cfg.max_symbol_word_ratio:
        return Rejection(
            GOPHER_TOO_MANY_HASHES,
            f"'#' per word {ratio:.3f} > {cfg.max_symbol_word_ratio:g} ({stats.n_hashes} in {n_words})",
        )
    ratio = stats.n_ellipsis / n_words if n_words else 0.0
    if ratio > cfg.max_symbol_word_ratio:
        return Rejection(
            GOPHER_TOO_MANY_ELLIPSIS,
            f"ellipses per word {ratio:.3f} > {cfg.max_symbol_word_ratio:g} "
            f"({stats.n_ellipsis} in {n_words})",
        )
    n_lines = len(stats.lines)
    if n_lines:
        frac = stats.n_bullet_lines / n_lines
        if frac > cfg.max_bullet_lines_fraction:
            return Rejection(
                GOPHER_TOO_MANY_BULLETS,
                f"bullet lines {frac:.3f} > {cfg.max_bullet_lines_fraction:g} "
                f"({stats.n_bullet_lines} of {n_lines})",
            )
        frac = stats.n_end_ellipsis_lines / n_lines
        if frac > cfg.max_ellipsis_lines_fraction:
            return Rejection(
                GOPHER_TOO_MANY_END_ELLIPSIS,
                f"lines ending in an ellipsis {frac:.3f} > {cfg.max_ellipsis_lines_fraction:g}",
            )
    fraction = stats.n_alpha_words / n_words if n_words else 0.0
    if fraction < cfg.min_alpha_word_fraction:
        return Rejection(
            GOPHER_BELOW_ALPHA_THRESHOLD,
            f"words with a letter {fraction:.3f} < {cfg.min_alpha_word_fraction:g}",
        )
    if cfg.min_stop_words:
        found = stats.stop_words_present(cfg.min_stop_words)
        if len(found) < cfg.min_stop_words:
            shown = ", ".join(sorted(found)) or "none"
            return Rejection(
                GOPHER_ENOUGH_STOP_WORDS,
                f"{len(found)} different stop words ({shown}) < min_stop_words {cfg.min_stop_words}",
            )
    return None


def apply_c4(text: str, cfg: C4Config) -> tuple[str, Rejection | None]:
    """C4's line edits and page rules: (kept text, None) or (text, rejection)."""
    kept: list[str] = []
    n_sentences = 0
    for raw in text.split("\n"):
        line = raw.strip()
        words = line.split()
        if any(len(w) > cfg.max_word_length for w in words):
            continue
        if "[" in line:
            line = _CITATION.sub("", line)
        if cfg.filter_no_terminal_punct and (not line.endswith(C4_END_PUNCTUATION) or line.endswith("...")):
            continue
        if len(words) < cfg.min_words_per_line:
            continue
        lower = line.lower()
        if cfg.filter_lorem_ipsum and "lorem ipsum" in lower:
            return text, Rejection(C4_LOREM_IPSUM, "a line contains 'lorem ipsum'")
        if cfg.filter_javascript and "javascript" in lower:
            continue
        if cfg.filter_curly_bracket and "{" in line:
            return text, Rejection(C4_CURLY_BRACKET, "a line contains '{'")
        if cfg.filter_policy and any(p in lower for p in C4_POLICY_SUBSTRINGS):
            continue
        n_sentences += len(_SENTENCE_END.findall(line))
        kept.append(line)
    if n_sentences < cfg.min_sentences:
        return text, Rejection(
            C4_TOO_FEW_SENTENCES, f"{n_sentences} sentences in kept lines < {cfg.min_sentences}"
        )
    return "\n".join(kept).strip(), None


def check_fineweb(stats: TextStats, cfg: FineWebConfig) -> Rejection | None:
    lines = stats.lines
    if not lines:
        return Rejection(FINEWEB_LINE_PUNCT_RATIO, "no non-empty lines")
    n = len(lines)
    frac = sum(1 for line in lines if line.endswith(TERMINAL_PUNCTUATION)) / n
    if frac <= cfg.min_line_punct_ratio:
        return Rejection(
            FINEWEB_LINE_PUNCT_RATIO,
            f"lines ending in punctuation {frac:.3f} <= {cfg.min_line_punct_ratio:g}",
        )
    frac = sum(1 for line in lines if len(line) <= cfg.short_line_chars) / n
    if frac >= cfg.max_short_line_fraction:
        return Rejection(
            FINEWEB_SHORT_LINE_RATIO,
            f"lines of <= {cfg.short_line_chars} chars {frac:.3f} >= {cfg.max_short_line_fraction:g}",
        )
    _, dup_chars = _duplicates(lines)
    denom = len(stats.text) - stats.text.count("\n")
    frac = dup_chars / denom if denom else 0.0
    if frac >= cfg.max_duplicate_line_char_fraction:
        return Rejection(
            FINEWEB_CHAR_DUP_RATIO,
            f"characters in repeated lines {frac:.3f} >= {cfg.max_duplicate_line_char_fraction:g}",
        )
    return None


class FilterResult(NamedTuple):
    """The text to keep (after C4's line edits), the rejection if any, and the stats of the final text."""

    text: str
    rejection: Rejection | None
    stats: TextStats
    chars_edited: int  # characters removed from a kept document by line edits


def apply_filters(text: str, cleaning: CleaningConfig) -> FilterResult:
    """Run the enabled rule groups in pipeline order on a normalised text."""
    stats = TextStats(text)
    if stats.n_bytes > cleaning.max_doc_bytes:
        return FilterResult(
            text,
            Rejection(TOO_LARGE, f"{stats.n_bytes:,} bytes > max_doc_bytes {cleaning.max_doc_bytes:,}"),
            stats,
            0,
        )
    for group in _GROUPS:
        if not group.enabled(cleaning):
            continue
        if group.edit is not None:
            new_text, rejection = group.edit(stats.text, cleaning)
            if rejection is not None:
                return FilterResult(text, rejection, stats, 0)
            if new_text != stats.text:
                stats = TextStats(new_text)
                # the kept text must still meet Gopher's length bounds (data_checks asserts them on clean data)
                if cleaning.gopher_quality and stats.n_words < cleaning.min_words:
                    return FilterResult(
                        text,
                        Rejection(
                            GOPHER_SHORT_DOC,
                            f"{stats.n_words} words after C4 line edits < min_words {cleaning.min_words}",
                        ),
                        stats,
                        0,
                    )
            continue
        rejection = group.check(stats, cleaning)
        if rejection is not None:
            return FilterResult(text, rejection, stats, 0)
    return FilterResult(stats.text, None, stats, len(text) - len(stats.text))


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

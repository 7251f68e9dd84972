"""What every rule group reads: a `Rejection` (a reason code and the measured value against its threshold) and
the `TextStats` of a normalised text, its measures computed lazily so the first failing rule skips the rest.

How things are counted (texts are already normalised: LF line ends, no control characters):
* words: `str.split()` pieces (whitespace-delimited, punctuation attached), as Dolma's Gopher tagger does.
  datatrove splits with spaCy (punctuation tokens become words), which runs at 0.25-0.33 MB/s per core;
  `str.split` is an order of magnitude faster, and the Gopher paper does not name a tokeniser.
* lines: the non-empty pieces of the text split on "\\n"; paragraphs: pieces split on two or more "\\n".

Source: Rae et al. 2021 (Gopher), arXiv 2112.11446, App. A; huggingface/datatrove 0.10.1 `pipeline/filters`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter, methodcaller
from typing import NamedTuple

TOO_LARGE = "too_large"

# Gopher's required English words (Rae et al. 2021, App. A.1.1).
STOP_WORDS = frozenset(("the", "be", "to", "of", "and", "that", "have", "with"))
BULLETS = ("•", "‣", "◦", "⁃", "▪", "▫", "■", "□", "●", "○", "-", "*", "–", "—")
ELLIPSES = ("...", "…")

_STOP_WORD = re.compile(r"(?<![\w])(?:" + "|".join(sorted(STOP_WORDS)) + r")(?![\w])", re.IGNORECASE)
_NO_LETTER_WORD = re.compile(r"(?<!\S)(?:[^\w\s]|[\d_])+(?!\S)")
_PARAGRAPHS = re.compile(r"\n{2,}")


class Rejection(NamedTuple):
    """Why a document was dropped: a reason code constant and the measured value against the threshold."""

    reason: str
    detail: str


@dataclass
class TextStats:
    """Measures of one normalised text, computed lazily so the first failing rule skips the rest.

    `filter_batch` fills the word measures (and the n-gram table) of a whole batch at once with NumPy;
    a text checked on its own computes the same values with the same code on a batch of one."""

    text: str

    @cached_property
    def n_bytes(self) -> int:
        return len(self.text) if self.text.isascii() else len(self.text.encode("utf-8"))

    @cached_property
    def words(self) -> list[str]:
        return self.text.split()

    @cached_property
    def n_words(self) -> int:
        return len(self.words)

    @cached_property
    def word_chars(self) -> int:
        return sum(map(len, self.words))

    @cached_property
    def mean_word_length(self) -> float:
        return self.word_chars / self.n_words if self.n_words else 0.0

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
        text = self.text
        if (
            not text.isascii()
        ):  # Unicode case folding and \\w: the regex (a lowercase copy may change lengths)
            found: set[str] = set()
            for match in _STOP_WORD.finditer(text):
                found.add(match.group(0).lower())
                if len(found) >= enough:
                    break
            return frozenset(found)
        return _ascii_stop_words(text.lower(), enough)

    @cached_property
    def lines(self) -> list[str]:
        lines = self.text.split("\n")
        return list(filter(None, lines)) if "" in lines else lines

    @cached_property
    def paragraphs(self) -> list[str]:
        text = self.text
        if "\n\n" not in text:
            return [text] if text else []
        if "\n\n\n" not in text:  # every break is exactly two newlines: str.split does what the regex does
            return list(filter(None, text.split("\n\n")))
        return [p for p in _PARAGRAPHS.split(text) if p]

    @cached_property
    def line_counts(self) -> tuple[int, int]:
        """(non-empty lines, lines that repeat an earlier line)."""
        return len(self.lines), len(self.lines) - len(set(self.lines))

    @cached_property
    def n_bullet_lines(self) -> int:
        """Non-empty lines whose first non-whitespace character is a bullet (C-level iterators, no Python loop)."""
        return sum(
            map(_BULLET_SET.__contains__, map(itemgetter(0), filter(None, map(str.lstrip, self.lines))))
        )

    @cached_property
    def n_bullet_chars(self) -> int:
        """Occurrences of bullet characters anywhere: at least the number of bullet lines."""
        return sum(map(self.text.count, BULLETS))

    @cached_property
    def n_end_ellipsis_lines(self) -> int:
        """Lines ending in "..." or "…"."""
        return sum(map(methodcaller("endswith", ELLIPSES), self.lines))

    # n-gram measures: {n: (count of the most frequent n-gram, its characters, index of its first word)}
    # and {n: (some n-gram repeats, characters of words covered by repeats)}; filled by `ngram_tables`.
    top_ngrams: dict[int, tuple[int, int, int]] | None = None
    dup_ngrams: dict[int, tuple[bool, int]] | None = None


_BULLET_SET = frozenset(BULLETS)  # every bullet is one character
_SORTED_STOP_WORDS = tuple(sorted(STOP_WORDS))


def _ascii_stop_words(lower: str, enough: int) -> frozenset[str]:
    """`TextStats.stop_words_present` for a lowercased ASCII text: each stop word found with `str.find` and its
    ends checked (in ASCII, \\w is [A-Za-z0-9_]), about twice as fast as the case-insensitive regex with
    look-arounds (measured on the benchmark corpus). Which words are found can differ from the regex's only once
    `enough` are found; a text with fewer is scanned whole either way, so it reports the same set."""
    found: set[str] = set()
    end = len(lower)
    for word in _SORTED_STOP_WORDS:
        size = len(word)
        i = lower.find(word)
        while i >= 0:
            j = i + size
            if (i == 0 or not _is_ascii_word_char(lower[i - 1])) and (
                j >= end or not _is_ascii_word_char(lower[j])
            ):
                found.add(word)
                break
            i = lower.find(word, i + 1)
        if len(found) >= enough:
            break
    return frozenset(found)


def _is_ascii_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


_NO_LETTER_WORD_FULL = re.compile(r"(?:[^\w\s]|[\d_])+")


def _duplicates(elements: list[str]) -> tuple[int, int]:
    """(elements equal to an earlier one, characters of those elements): repeats are equal to their first
    occurrence, so their characters are all characters minus those of the distinct elements."""
    distinct = set(elements)
    return len(elements) - len(distinct), sum(map(len, elements)) - sum(map(len, distinct))

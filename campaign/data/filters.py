"""Document quality rules: Gopher repetition, Gopher quality, C4 and FineWeb, each group switchable.

`apply_filters(text, cleaning)` runs the enabled groups in order (size cap, Gopher quality, Gopher
repetition, C4, FineWeb) and returns the first failing rule's
`Rejection`, or the text to keep (C4's line rules edit it). Quality before repetition is MassiveWeb's
order (Rae et al. 2021, App. A: quality filtering, then repetition removal); FineWeb's pipeline runs the
repetition filter first. The order decides only which reason a document failing both is counted under,
never whether it is kept. Reason codes are named like datatrove's `stats.json` counters (with a
"c4_"/"fineweb_" prefix) so counts can be compared rule by rule.

How things are counted (texts are already normalised: LF line ends, no control characters):
* words: `str.split()` pieces (whitespace-delimited, punctuation attached), as Dolma's Gopher tagger does.
  datatrove splits with spaCy (punctuation tokens become words), which runs at 0.25-0.33 MB/s per core;
  `str.split` is an order of magnitude faster, and the Gopher paper does not name a tokeniser.
* lines: the non-empty pieces of the text split on "\\n"; paragraphs: pieces split on two or more "\\n".
* Gopher quality: mean word length over words (punctuation attached, so slightly above datatrove's);
  "#" and ellipsis ("..." or "…") occurrences per word, tested separately; bullet lines = lines whose first
  non-space character is one of `BULLETS`, of all lines; end-ellipsis lines = lines ending in "..." or "…",
  of all lines; alpha words = words with at least one alphabetic character (`str.isalpha`).
  The stop-word rule is the paper's: the document must contain at least `min_stop_words` *different*
  words of {the, be, to, of, and, that, have, with} (Rae et al. 2021, App. A: "do not contain at least two
  of the following English words"), matched case-insensitively where not part of a longer word (so
  "The", "(of)" and "to." count, and so does "to" in "up-to-date").
  datatrove 0.10.1 counts occurrences instead, so "the the" passes there and fails here.
* Gopher repetition (Rae et al. 2021, Table A1): duplicate line/paragraph fraction = elements equal to an
  earlier element, of all elements; their character fraction = characters of those repeats, of all
  characters. Top n-gram (n = 2, 3, 4): characters of the most frequent word n-gram (words joined by one
  space) times its count, of all characters, only when it occurs more than once. Duplicate n-grams
  (n = 5..10): characters of the words covered by a *repeat* of an n-gram (any occurrence after its
  first; overlapping repeats count each word once), of the characters of all words: the paper's
  "fraction of characters contained within all duplicate n-grams" without counting a word twice.
  datatrove also counts repeats only, but skips n words after each repeat it finds and divides by all
  characters including whitespace, so its fractions are slightly lower on the same text.
* C4 (datatrove's C4QualityFilter, paper defaults): per line, in this order, drop a line with a word longer
  than `max_word_length`, remove citation marks, drop a line without terminal punctuation (only when
  `filter_no_terminal_punct`), drop a line with fewer than `min_words_per_line` words, remove the page if
  the line has "lorem ipsum", drop a line with "javascript", remove the page if the line has "{", drop a
  line with a policy phrase. Sentences = terminal marks (. ! ?) followed by a space or the line end, in
  the kept lines (datatrove uses a sentence splitter); fewer than `min_sentences` removes the page.
  Kept lines are joined with "\\n"; the characters dropped are reported as edits of kept documents. A
  document whose edited text falls below Gopher's `min_words` is removed as gopher_short_doc (the clean
  data must meet the length bounds the data-quality gate checks).
* FineWeb (Penedo et al. 2024, §3): over non-empty lines, remove if the fraction ending in terminal
  punctuation (`TERMINAL_PUNCTUATION`) is at most 0.12, if the fraction of lines of 30 characters or fewer
  is at least 0.67, or if characters in repeated lines are at least 0.1 of the characters (newlines not
  counted). datatrove's default for the last is 0.01, not the paper's 0.1, and it adds a fourth rule
  (newlines per word > 0.3, "list_ratio") the paper does not describe; campaign applies the paper's three.

How it runs (the decisions are those of checking one document at a time, rule by rule; a regression test
holds the batch code to the per-document code it replaced, `tests/unit/filters_reference.py`, on real text):
`filter_batch` takes the normalised texts of a shard's batch and runs each rule group over the texts still
in play, so a document stops at its first failing rule and later groups never measure it. Word measures
come from one compiled scan of the batch's UTF-8 bytes (`word_kernels.split_words_compiled`: word spans, their
characters, ASCII words without a letter; the regex only for words with a non-ASCII character), and the n-gram
measures from a compiled pass per document with cache-sized tables (`word_kernels.ngram_measures`); the NumPy
and Arrow versions they replaced (`word_tables_vocab`, `ngram_tables_numpy`) stay as the property-tested
reference. C4's phrase rules use substring tests, its sentence count stops at `min_sentences`, and ASCII texts
find stop words with `str.find`. Line counts use
C-level iterators (`map`, `filter`, `sorted`) instead of Python loops, and cheap upper bounds (bullet
characters, ellipses) decide the bullet and end-ellipsis rules before any line is examined.

Source: Rae et al. 2021 (Gopher), arXiv 2112.11446, App. A and Table A1; Raffel et al. 2020 (C4), JMLR 21
§2.2; Penedo et al. 2024 (FineWeb), arXiv 2406.17557 §3; huggingface/datatrove 0.10.1 `pipeline/filters`.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter, methodcaller
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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


def _ngrams(words: list[str], n: int):
    return zip(*(words[i:] for i in range(n)), strict=False)


# ------------------------------------------------------------------------------------------ batch measures


def _factorize(keys: np.ndarray) -> np.ndarray:
    """Dense codes 0..k-1 of int64 `keys` in order of first appearance (Arrow's hash dictionary encoding)."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    return pc.dictionary_encode(pa.array(keys, pa.int64())).indices.to_numpy().astype(np.int64)


def split_words(texts: list[str]) -> tuple[pa.Array, np.ndarray]:
    """The `str.split()` words of every text, all in one Arrow string array, and each text's word count.

    Arrow's `utf8_split_whitespace` splits on exactly the characters `str.isspace` calls whitespace (checked
    for every code point in tests/unit/test_data_filters.py) but returns empty pieces at a text's ends and for
    a text of only whitespace; dropping the empty pieces leaves `str.split()`'s words. No Python string is made
    per word. Raises `pa.ArrowException` for a text Arrow cannot hold (a lone surrogate).

    pyarrow 26's kernel misreads a multi-byte whitespace character (U+1680, U+3000...) that ends the array's
    data buffer, now and then returning it as a word (found by tests/unit/test_data_batch_equivalence.py);
    a one-letter text appended after the batch, and dropped, keeps every real text away from the buffer's end."""
    pieces = pc.utf8_split_whitespace(pa.array([*texts, "x"], pa.string())).slice(0, len(texts))
    flat = pc.list_flatten(pieces)
    parent = pc.list_parent_indices(pieces).to_numpy()
    nonempty = pc.binary_length(flat).to_numpy(zero_copy_only=False) > 0
    if not nonempty.all():
        flat = flat.filter(pa.array(nonempty))
        parent = parent[nonempty]
    counts = np.bincount(parent, minlength=len(texts)).astype(np.int64)
    return flat, counts


def word_tables(stats: list[TextStats]) -> None:
    """Fill n_words, word_chars, mean_word_length and n_alpha_words of every text in one compiled scan of the
    texts' UTF-8 bytes (`word_kernels.split_words_compiled`), and keep the words' byte spans for `ngram_tables`.
    Only words with a non-ASCII character take the regex for the has-a-letter test (once per distinct word)."""
    from campaign.data.word_kernels import split_words_compiled

    data, offsets = _utf8_buffer([st.text for st in stats])
    wstart, wend, wlen, non_ascii, counts, no_letter = split_words_compiled(data, offsets)
    doc = np.repeat(np.arange(len(stats)), counts)
    chars = np.bincount(doc, weights=wlen, minlength=len(stats)).astype(np.int64)
    odd = np.flatnonzero(non_ascii)
    if len(odd):
        fullmatch, seen = _NO_LETTER_WORD_FULL.fullmatch, {}
        raw = data.tobytes()
        for w, s0, e0 in zip(odd.tolist(), wstart[odd].tolist(), wend[odd].tolist(), strict=True):
            piece = raw[s0:e0]
            hit = seen.get(piece)
            if hit is None:
                hit = seen[piece] = fullmatch(piece.decode("utf-8", "surrogatepass")) is not None
            if hit:
                no_letter[doc[w]] += 1
    shared = (data, wstart, wend, wlen)  # one object for the whole batch, for ngram_tables
    starts = np.concatenate([[0], np.cumsum(counts)]).tolist()
    for i, (st, n, c, nl) in enumerate(
        zip(stats, counts.tolist(), chars.tolist(), no_letter.tolist(), strict=True)
    ):
        d = st.__dict__
        d["n_words"] = n
        d["word_chars"] = c
        d["mean_word_length"] = c / n if n else 0.0
        d["n_alpha_words"] = n - nl
        d["_words"] = shared
        d["_span"] = (starts[i], starts[i + 1])
        d.pop("words", None)  # split again only if a rule quotes them


def _utf8_buffer(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The texts' UTF-8 bytes one after another and each text's byte offsets (Arrow builds them in C; a lone
    surrogate, which Arrow refuses and only unnormalised text can hold, is encoded as Python's surrogatepass does)."""
    try:
        array = pa.array(texts, pa.large_string())
        offsets = np.frombuffer(array.buffers()[1], np.int64)[array.offset : array.offset + len(texts) + 1]
        data = (
            np.frombuffer(array.buffers()[2], np.uint8)
            if array.buffers()[2] is not None
            else np.zeros(0, np.uint8)
        )
        return data, offsets
    except (pa.ArrowException, UnicodeEncodeError):
        encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
        offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.int64)
        return np.frombuffer(b"".join(encoded), np.uint8), offsets


def word_tables_vocab(stats: list[TextStats]) -> None:
    """`word_tables` with batch-wide word ids from Arrow's dictionary encoding (what `ngram_tables_numpy`, the
    reference for the compiled n-gram kernel, reads): lengths and the has-a-letter test once per distinct word."""
    try:  # Arrow splits the texts and hash-encodes the words (equal strings <=> equal UTF-8 bytes)
        flat_arrow, counts = split_words([st.text for st in stats])
        encoded = pc.dictionary_encode(flat_arrow)
        del flat_arrow
        wid = encoded.indices.to_numpy().astype(np.int64)
        vocab: list[str] | None = None
        length_v = pc.utf8_length(encoded.dictionary).to_numpy(zero_copy_only=False).astype(np.int64)
        no_letter_v = _no_letter(None, encoded.dictionary)
    except (pa.ArrowException, UnicodeEncodeError):  # a lone surrogate (only from unnormalised text)
        counts = np.fromiter((len(st.words) for st in stats), dtype=np.int64, count=len(stats))
        ids: dict[str, int] = {}
        flat = itertools.chain.from_iterable(st.words for st in stats)
        wid = np.fromiter(
            (ids.setdefault(w, len(ids)) for w in flat), dtype=np.int64, count=int(counts.sum())
        )
        vocab = list(ids)
        length_v = np.fromiter(map(len, vocab), dtype=np.int64, count=len(vocab))
        no_letter_v = _no_letter(vocab, None)
    n_vocab = len(length_v)
    doc = np.repeat(np.arange(len(stats)), counts)
    chars = np.bincount(doc, weights=length_v[wid], minlength=len(stats)).astype(np.int64)
    no_letter = np.bincount(doc, weights=no_letter_v[wid], minlength=len(stats)).astype(np.int64)
    shared = (wid, n_vocab, length_v)  # one object for the whole batch, for ngram_tables
    for i, st in enumerate(stats):
        d = st.__dict__
        d["n_words"] = n = int(counts[i])
        d["word_chars"] = c = int(chars[i])
        d["mean_word_length"] = c / n if n else 0.0
        d["n_alpha_words"] = n - int(no_letter[i])
        d["_wid"] = shared
        d.pop(
            "words", None
        )  # the word strings are the batch's largest object: split again only if a rule quotes them
    starts = np.concatenate([[0], np.cumsum(counts)])
    for i, st in enumerate(stats):
        st.__dict__["_span"] = (int(starts[i]), int(starts[i + 1]))


def _no_letter(vocab: list[str] | None, arrow_vocab: pa.Array | None) -> np.ndarray:
    """Per distinct word: made only of punctuation, digits and "_" (no letter). For an ASCII word that is
    "no character in A-Z or a-z" (ASCII \\w is [A-Za-z0-9_]), tested by Arrow; other words by the regex."""
    fullmatch = _NO_LETTER_WORD_FULL.fullmatch
    if arrow_vocab is None:
        assert vocab is not None
        return np.fromiter((fullmatch(w) is not None for w in vocab), dtype=bool, count=len(vocab))
    ascii_ = pc.string_is_ascii(arrow_vocab).to_numpy(zero_copy_only=False)
    out = ~pc.match_substring_regex(arrow_vocab, "[A-Za-z]").to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(~ascii_).tolist():
        out[i] = fullmatch(vocab[i] if vocab is not None else arrow_vocab[i].as_py()) is not None
    return out


def ngram_tables(stats: list[TextStats], top_ns: list[int], dup_ns: list[int]) -> None:
    """Fill `top_ngrams` and `dup_ngrams` of every text for the given n, exactly as counting the n-grams
    of each text with a Counter would: document by document in a compiled kernel (`word_kernels`), the same
    values as `ngram_tables_numpy` (property-tested)."""
    if not stats or not (top_ns or dup_ns):
        for st in stats:
            st.top_ngrams, st.dup_ngrams = {}, {}
        return
    from campaign.data.word_kernels import ngram_measures

    data, wstart, wend, starts, wlen = _batch_words(stats)
    top_count, top_chars, top_first, dup_has, dup_chars = ngram_measures(
        data, wstart, wend, starts, wlen, top_ns, dup_ns
    )
    top_ns, dup_ns = sorted(set(top_ns)), sorted(set(dup_ns))
    counts = top_count[:, top_ns].tolist()
    chars = top_chars[:, top_ns].tolist()
    firsts = top_first[:, top_ns].tolist()
    has = dup_has[:, dup_ns].tolist()
    covered = dup_chars[:, dup_ns].tolist()
    for i, st in enumerate(stats):
        st.top_ngrams = {
            n: (c, ch, f) for n, c, ch, f in zip(top_ns, counts[i], chars[i], firsts[i], strict=True) if c > 1
        }
        st.dup_ngrams = dict(zip(dup_ns, zip(has[i], covered[i], strict=True), strict=True))


def _batch_words(stats: list[TextStats]) -> tuple[np.ndarray, ...]:
    """(UTF-8 bytes, word start and end bytes of the texts one after another, each text's first word (+ the
    end), each word's characters), from `word_tables` (run here if the texts do not share one)."""
    shared = stats[0].__dict__.get("_words")
    if shared is None or any(st.__dict__.get("_words") is not shared for st in stats):
        word_tables(stats)
        shared = stats[0].__dict__["_words"]
    data, wstart_all, wend_all, wlen_all = shared
    spans = [st.__dict__["_span"] for st in stats]
    counts = np.array([b - a for a, b in spans], dtype=np.int64)
    total = int(counts.sum())
    if (
        total == len(wstart_all)
        and spans
        and spans[0][0] == 0
        and all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))
    ):
        index = None  # every word of the batch, in order: no copy
    else:
        index = np.concatenate([np.arange(a, b) for a, b in spans]) if spans else np.zeros(0, np.int64)
    pick = (lambda x: x) if index is None else (lambda x: x[index])
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return data, pick(wstart_all), pick(wend_all), starts, pick(wlen_all)


def ngram_tables_numpy(stats: list[TextStats], top_ns: list[int], dup_ns: list[int]) -> None:
    """`ngram_tables` with batch-wide NumPy arrays (the reference the compiled kernel is tested against).

    Every n-gram of a text gets a dense id: level 1 is the (text, word) pair, level n the pair (id of the
    (n-1)-gram at i, word i+n-1), each level hash-encoded in order of first appearance. Only n-grams whose
    (n-1)-gram prefix repeats can repeat, so each level keeps only those positions (all occurrences of every
    repeated n-gram survive, so their counts and first occurrences are exact). With ids in order of first
    appearance, a position is a repeat exactly when its id is not above every earlier id. The most frequent
    n-gram of a text is the one whose first occurrence comes first among those with the top count (what
    Counter.most_common(1) returns)."""
    if not stats or not (top_ns or dup_ns):
        for st in stats:
            st.top_ngrams, st.dup_ngrams = {}, {}
        return
    if "_wid" not in stats[0].__dict__ or any(
        st.__dict__.get("_wid") is not stats[0].__dict__["_wid"] for st in stats
    ):
        word_tables_vocab(stats)
    wid_all, n_vocab, length_v = stats[0].__dict__["_wid"]
    spans = [st.__dict__["_span"] for st in stats]
    counts = np.array([b - a for a, b in spans], dtype=np.int64)
    wid = np.concatenate([wid_all[a:b] for a, b in spans]) if spans else np.zeros(0, np.int64)
    n_docs, n_pos = len(stats), len(wid)
    doc_of = np.repeat(np.arange(n_docs), counts)
    starts = np.concatenate([[0], np.cumsum(counts)])
    wlen = length_v[wid] if n_pos else np.zeros(0, np.int64)
    csum = np.concatenate([[0], np.cumsum(wlen)])
    left = starts[1:][doc_of] - np.arange(n_pos)  # words from a position to its text's end, itself included
    width = np.int64(max(n_vocab, 1))
    top: list[dict[int, tuple[int, int, int]]] = [{} for _ in stats]
    dup: list[dict[int, tuple[bool, int]]] = [{} for _ in stats]
    wanted_top, wanted_dup = set(top_ns), set(dup_ns)
    pos = np.arange(n_pos, dtype=np.int64)
    code = _factorize(doc_of * width + wid)
    count = np.bincount(code) if n_pos else np.zeros(0, np.int64)
    for n in range(1, max([*top_ns, *dup_ns]) + 1):
        if n > 1:
            keep = (left[pos] >= n) & (count[code] > 1)
            pos, code = pos[keep], code[keep]
            code = _factorize(code * width + wid[pos + n - 1])
            count = np.bincount(code) if len(code) else np.zeros(0, np.int64)
        if n in wanted_top:
            at = count[code] if len(code) else np.zeros(0, np.int64)
            sel = at > 1
            p, c = pos[sel], at[sel]
            d = doc_of[p]
            best = np.zeros(n_docs, dtype=np.int64)
            np.maximum.at(best, d, c)
            hit = c == best[d]
            docs, first = np.unique(d[hit], return_index=True)
            hp = p[hit][first]
            for doc_i, q in zip(docs.tolist(), hp.tolist(), strict=True):
                top[doc_i][n] = (int(best[doc_i]), int(csum[q + n] - csum[q]) + n - 1, q - int(starts[doc_i]))
        if n in wanted_dup:
            running = np.maximum.accumulate(code) if len(code) else code
            repeat = np.zeros(len(code), dtype=bool)
            if len(code):
                repeat[1:] = code[1:] <= running[:-1]
            rp = pos[repeat]
            has = np.zeros(n_docs, dtype=bool)
            has[doc_of[rp]] = True
            cover = np.cumsum(np.bincount(rp, minlength=n_pos + 1) - np.bincount(rp + n, minlength=n_pos + 1))
            covered = cover[:n_pos] > 0
            dup_chars = np.bincount(doc_of[covered], weights=wlen[covered], minlength=n_docs).astype(np.int64)
            for i in range(n_docs):
                dup[i][n] = (bool(has[i]), int(dup_chars[i]))
    for i, st in enumerate(stats):
        st.top_ngrams, st.dup_ngrams = top[i], dup[i]


def _need_ngrams(stats: TextStats, cfg: GopherRepetitionConfig) -> None:
    if stats.top_ngrams is None or stats.dup_ngrams is None:
        ngram_tables(
            [stats],
            [n for n, _ in cfg.top_ngram_char_fractions],
            [n for n, _ in cfg.duplicate_ngram_char_fractions],
        )


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
    n_words = stats.n_words
    if (cfg.top_ngram_char_fractions and n_words >= min(n for n, _ in cfg.top_ngram_char_fractions)) or (
        cfg.duplicate_ngram_char_fractions and n_words > min(n for n, _ in cfg.duplicate_ngram_char_fractions)
    ):
        _need_ngrams(stats, cfg)
    for n, limit in cfg.top_ngram_char_fractions:
        if n_words < n:
            continue
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
        # Upper bounds first (a bullet line holds a bullet character; a line ending in an ellipsis holds one
        # of the ellipses `n_ellipsis` counted): the exact line counts only when a bound could fail the rule.
        frac = stats.n_bullet_chars / n_lines
        if frac > cfg.max_bullet_lines_fraction:
            frac = stats.n_bullet_lines / n_lines
        if frac > cfg.max_bullet_lines_fraction:
            return Rejection(
                GOPHER_TOO_MANY_BULLETS,
                f"bullet lines {frac:.3f} > {cfg.max_bullet_lines_fraction:g} "
                f"({stats.n_bullet_lines} of {n_lines})",
            )
        frac = stats.n_ellipsis / n_lines
        if frac > cfg.max_ellipsis_lines_fraction:
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
    if not cfg.filter_no_terminal_punct and not _c4_page_words(text, cfg):
        return _c4_lines_only(text, cfg)
    kept: list[str] = []
    max_len = cfg.max_word_length
    skip_blank = cfg.min_words_per_line > 0  # a blank line has no words: dropped by the word-count rule
    for raw in text.split("\n"):
        line = raw.strip()
        if not line and skip_blank:
            continue
        words = line.split()
        if len(line) > max_len and max(map(len, words)) > max_len:  # no word is longer than its line
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
        if cfg.filter_policy and _has_policy_phrase(lower):
            continue
        kept.append(line)
    joined = "\n".join(kept)
    # Kept lines are stripped and hold no "\n", so a sentence end before the joining "\n" is one before the
    # line's end: counting over the joined lines counts what counting line by line would.
    n_sentences = _count_sentences(joined, cfg.min_sentences)
    if n_sentences < cfg.min_sentences:
        return text, Rejection(
            C4_TOO_FEW_SENTENCES, f"{n_sentences} sentences in kept lines < {cfg.min_sentences}"
        )
    return joined.strip(), None


def _c4_page_words(text: str, cfg: C4Config) -> bool:
    """Whether any line could meet a phrase rule (lorem ipsum, javascript, "{", a policy phrase). Checked on the
    whole text with citation marks removed first (as the line rules see it; no phrase or mark spans a line
    break), lowercased (per character, so a line's lowercase is a slice of the text's)."""
    if cfg.filter_curly_bracket and "{" in text:
        return True
    if not (cfg.filter_lorem_ipsum or cfg.filter_javascript or cfg.filter_policy):
        return False
    lower = (_CITATION.sub("", text) if "[" in text else text).lower()
    return (
        (cfg.filter_lorem_ipsum and "lorem ipsum" in lower)
        or (cfg.filter_javascript and "javascript" in lower)
        or (cfg.filter_policy and _has_policy_phrase(lower))
    )


def _has_policy_phrase(lower: str) -> bool:
    """Whether a lowercased text holds one of C4's policy phrases: one `in` test per phrase (C's fast substring
    search) instead of a regex alternation, which tries every phrase at every position."""
    return any(phrase in lower for phrase in C4_POLICY_SUBSTRINGS)


def _count_sentences(text: str, enough: int) -> int:
    """Sentence ends in `text`, counted up to `enough` (the page rule only asks whether there are that many;
    a page with fewer is counted whole, so a rejection's detail gives the exact count)."""
    return sum(1 for _ in itertools.islice(_SENTENCE_END.finditer(text), max(enough, 0)))


def _c4_lines_only(text: str, cfg: C4Config) -> tuple[str, Rejection | None]:
    """`apply_c4` for a text no phrase rule can touch and without the terminal-punctuation rule: keep the
    stripped lines with enough words and no over-long word, remove citation marks, count sentences. The
    per-line work runs in C (`map` over str methods); only lines longer than `max_word_length` are looked at
    word by word."""
    lines = list(map(str.strip, text.split("\n")))
    need = cfg.min_words_per_line
    # min(words, need) per line: a split that stops after need - 1 cuts makes at most `need` pieces, not one
    # string per word
    n_words = (
        list(map(len, map(methodcaller("split", None, need - 1), lines))) if need > 0 else [0] * len(lines)
    )
    keep = list(map(need.__le__, n_words))
    max_len = cfg.max_word_length
    if lines and max(map(len, lines)) > max_len:
        for i, line in enumerate(lines):
            if keep[i] and len(line) > max_len and max(map(len, line.split())) > max_len:
                keep[i] = False
    joined = "\n".join(itertools.compress(lines, keep))
    if "[" in joined:  # citation marks hold no line break: removing them from the joined lines is per line
        joined = _CITATION.sub("", joined)
    n_sentences = _count_sentences(joined, cfg.min_sentences)
    if n_sentences < cfg.min_sentences:
        return text, Rejection(
            C4_TOO_FEW_SENTENCES, f"{n_sentences} sentences in kept lines < {cfg.min_sentences}"
        )
    return joined.strip(), None


def check_fineweb(stats: TextStats, cfg: FineWebConfig) -> Rejection | None:
    lines = stats.lines
    if not lines:
        return Rejection(FINEWEB_LINE_PUNCT_RATIO, "no non-empty lines")
    n = len(lines)
    frac = sum(map(_TERMINAL_SET.__contains__, map(itemgetter(-1), lines))) / n  # lines are non-empty
    if frac <= cfg.min_line_punct_ratio:
        return Rejection(
            FINEWEB_LINE_PUNCT_RATIO,
            f"lines ending in punctuation {frac:.3f} <= {cfg.min_line_punct_ratio:g}",
        )
    frac = bisect.bisect_right(sorted(map(len, lines)), cfg.short_line_chars) / n
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


_TERMINAL_SET = frozenset(TERMINAL_PUNCTUATION)  # every mark is one character


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
                rejection = group.check(st, cleaning)
            if rejection is not None:
                results[i] = FilterResult(texts[i], rejection, st, 0)
            else:
                still.append(i)
        alive = still
    for i in alive:
        st = stats[i]
        results[i] = FilterResult(st.text, None, st, len(texts[i]) - len(st.text))
    return results  # type: ignore[return-value]


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

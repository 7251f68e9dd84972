"""C4's line edits and page rules (datatrove's C4QualityFilter, paper defaults).

Per line, in this order: drop a line with a word longer than `max_word_length`, remove citation marks, drop a
line without terminal punctuation (only when `filter_no_terminal_punct`), drop a line with fewer than
`min_words_per_line` words, remove the page if the line has "lorem ipsum", drop a line with "javascript",
remove the page if the line has "{", drop a line with a policy phrase. Sentences = terminal marks (. ! ?)
followed by a space or the line end, in the kept lines (datatrove uses a sentence splitter); fewer than
`min_sentences` removes the page. Kept lines are joined with "\\n"; the characters dropped are reported as
edits of kept documents. The phrase rules use substring tests and the sentence count stops at `min_sentences`.

Source: Raffel et al. 2020 (C4), JMLR 21 §2.2; huggingface/datatrove 0.10.1 `pipeline/filters/c4_filters.py`.
"""

from __future__ import annotations

import itertools
import re
from operator import methodcaller

from campaign.config import C4Config
from campaign.data.filters.base import Rejection

# Page rules' reason codes
C4_LOREM_IPSUM = "c4_lorem_ipsum"
C4_CURLY_BRACKET = "c4_curly_bracket"
C4_TOO_FEW_SENTENCES = "c4_too_few_sentences"

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

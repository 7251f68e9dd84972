"""Normalisation, the quality rules (Gopher boundaries from data-prep.md §2.1), tokens, dedup and mixture."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from campaign.config import CleaningConfig
from campaign.data import filters as F
from campaign.data.dedup import EXACT_DUPLICATE, ExactDeduplicator, text_sha256
from campaign.data.mixture import mixture_report
from campaign.data.normalise import normalise_text
from campaign.data.tokens import count_tokens, count_tokens_many

CFG = CleaningConfig()  # Gopher defaults: 50..100,000 words, mean length 3..10, ratios 0.1, alpha 0.8, 2 stop words

# ------------------------------------------------------------------------------------------ normalise


def test_normalise_nfc_whitespace_and_blank_runs() -> None:
    assert normalise_text("Cafe\u0301") == "Caf\u00e9"
    assert normalise_text("  a  \r\nb\t\n") == "a\nb"
    assert normalise_text("a\n\n\n\n\n\nb") == "a\n\n\nb"      # five blank lines -> two
    assert normalise_text("a\n\n\nb") == "a\n\n\nb"            # two blank lines stay
    assert normalise_text("a\n  \n \t\n   \n\nb") == "a\n\n\nb"  # whitespace-only lines are blank


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_normalise_is_idempotent(text: str) -> None:
    once = normalise_text(text)
    assert normalise_text(once) == once


# ------------------------------------------------------------------------------ Gopher quality rules


def _words(n: int, word: str = "the") -> str:
    """n words, each a stop word with letters, mean length len(word)."""
    return " ".join([word] * n)


def _reason(text: str, cfg: CleaningConfig = CFG) -> str | None:
    rejection = F.check_document(text, cfg)
    return rejection.reason if rejection else None


def test_word_count_boundaries() -> None:
    assert _reason(_words(49)) == F.GOPHER_SHORT_DOC      # "fewer than 50 words" removed
    assert _reason(_words(50)) is None                    # exactly 50 kept
    assert _reason(_words(100_000)) is None               # exactly 100,000 kept
    assert _reason(_words(100_001)) == F.GOPHER_LONG_DOC
    rejection = F.check_document(_words(49), CFG)
    assert rejection is not None and rejection.detail == "49 words < min_words 50"


def test_mean_word_length_boundaries() -> None:
    # 50 words of length 3 ("the") = mean 3.0 kept; one two-letter word among them drops it below 3
    assert _reason(_words(50)) is None
    assert _reason(_words(49) + " of") == F.GOPHER_BELOW_AVG_THRESHOLD
    exactly_ten = _words(25, "the") + " " + _words(25, "a" * 17)    # (25*3 + 25*17)/50 = 10.0: kept
    assert _reason(exactly_ten) is None
    above_ten = _words(25, "the") + " " + _words(24, "a" * 17) + " " + "a" * 18  # 501/50 = 10.02
    assert _reason(above_ten) == F.GOPHER_ABOVE_AVG_THRESHOLD


def test_hash_and_ellipsis_ratio_boundaries() -> None:
    base = _words(45)
    assert _reason(base + " #tag" * 5) is None                        # 5 '#' in 50 words = 0.1, kept
    assert _reason(base + " #tag" * 4 + " ##tag") == F.GOPHER_TOO_MANY_HASHES  # 6 / 50 = 0.12
    assert _reason(base + " and..." * 5) is None                      # 5 ellipses / 50 words
    assert _reason(base + " and..." * 4 + " and\u2026 and...") == F.GOPHER_TOO_MANY_ELLIPSIS  # "…" counts
    rejection = F.check_document(base + " #tag" * 4 + " ##tag", CFG)
    assert rejection is not None and "0.120 > 0.1" in rejection.detail


def test_alpha_fraction_boundary() -> None:
    assert _reason(_words(40) + " 1234" * 10) is None                 # 40/50 = 0.8 have a letter: kept
    assert _reason(_words(39) + " 1234" * 11) == F.GOPHER_BELOW_ALPHA_THRESHOLD  # 0.78
    assert _reason(_words(40) + " 12a4" * 10) is None                 # a word with any letter counts


def test_stop_words_boundary() -> None:
    filler = _words(48, "cats")
    assert _reason(filler + " the of") is None                        # two stop words kept
    assert _reason(filler + " the dogs") == F.GOPHER_ENOUGH_STOP_WORDS
    assert _reason(filler + " The, (of)") is None                     # case and punctuation ignored
    assert _reason(filler + " there other") == F.GOPHER_ENOUGH_STOP_WORDS  # not substrings


def test_duplicate_line_fraction_boundary() -> None:
    unique = [f"line number {i} of the text here" for i in range(7)]
    kept = "\n".join(unique + [unique[0]] * 3)         # 3 duplicates of 10 lines = 0.3: kept
    dropped = "\n".join(unique[:6] + [unique[0]] * 4)  # 4 of 10 = 0.4
    assert _reason(kept) is None
    assert _reason(dropped) == F.DUP_LINE_FRAC
    assert _reason("\n\n\n".join(unique + [unique[0]] * 3)) is None  # blank lines are not lines


def test_too_large_runs_first() -> None:
    cfg = CleaningConfig(max_doc_bytes=100)
    assert F.too_large(F.TextStats("é" * 50), cfg) is None  # 100 UTF-8 bytes is not above 100
    rejection = F.check_document("é" * 51, cfg)
    assert rejection is not None and rejection.reason == F.TOO_LARGE and "102 bytes > max_doc_bytes 100" in rejection.detail


def test_first_failing_rule_wins_and_rules_cover_reasons() -> None:
    assert _reason("# # #") == F.GOPHER_SHORT_DOC  # also too many hashes, but short comes first
    assert tuple(rule.__name__ for rule in F.RULES) == F.FILTER_REASONS
    assert F.check_document("", CFG).reason == F.GOPHER_SHORT_DOC


def test_thresholds_come_from_config() -> None:
    lenient = CleaningConfig(min_words=2, min_stop_words=0)
    assert _reason("hello world", lenient) is None
    assert _reason("hello world") == F.GOPHER_SHORT_DOC


# ------------------------------------------------------------------------------------ tokens, dedup, mix


def test_count_tokens() -> None:
    assert count_tokens("Hello world", "gpt2-pretokens") == 2
    assert count_tokens("I'm here, 2024!", "gpt2-pretokens") == 6   # I / 'm / ␣here / , / ␣2024 / !
    assert count_tokens("a  b", "gpt2-pretokens") == 3             # a / ␣ / ␣b
    assert count_tokens("é", "utf8-bytes") == 2
    texts = ["Hello world", "", "naïve café ünïcode"]
    for tokenizer in ("gpt2-pretokens", "utf8-bytes"):
        assert count_tokens_many(texts, tokenizer).tolist() == [count_tokens(t, tokenizer) for t in texts]
    with pytest.raises(ValueError, match="unknown tokenizer"):
        count_tokens("x", "bpe")


def test_exact_dedup_keeps_first() -> None:
    dedup = ExactDeduplicator()
    sha = text_sha256("same")
    assert dedup.check(sha, "a") is None
    rejection = dedup.check(sha, "b")
    assert rejection == (EXACT_DUPLICATE, "same text as kept doc a")
    assert dedup.check(text_sha256("other"), "c") is None


def test_mixture_report() -> None:
    rows = mixture_report({"web": 75.0, "docs": 25.0}, {"web": 1.0, "docs": 1.0})
    assert [r["source"] for r in rows] == ["web", "docs"]
    assert rows[0]["share"] == 0.75 and rows[0]["planned_share"] == 0.5 and rows[0]["relative_gap"] == 0.5
    assert rows[1]["relative_gap"] == -0.5
    empty = mixture_report({}, {"web": 2.0})
    assert empty == [{"source": "web", "tokens": 0.0, "share": 0.0, "planned_share": 1.0, "relative_gap": -1.0}]

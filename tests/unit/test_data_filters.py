"""Normalisation, the quality rules (Gopher boundaries from data-prep.md §2.1), tokens, dedup and mixture."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from campaign.config import C4Config, CleaningConfig, FineWebConfig, GopherRepetitionConfig
from campaign.data import filters as F
from campaign.data.dedup import EXACT_DUPLICATE, ExactDeduplicator, text_sha256
from campaign.data.filters.base import _STOP_WORD, _ascii_stop_words
from campaign.data.filters.c4 import _SENTENCE_END, _count_sentences, _has_policy_phrase
from campaign.data.mixture import mixture_report
from campaign.data.normalise import normalise_text
from campaign.data.tokens import count_tokens, count_tokens_many

# Gopher quality defaults (50..100,000 words, mean length 3..10, ratios 0.1, alpha 0.8, 2 stop words) alone:
# the repetition rules would reject the deliberately repetitive texts these boundary tests are built from.
NO_REP = GopherRepetitionConfig(enabled=False)
CFG = CleaningConfig(gopher_repetition=NO_REP)
ALL = CleaningConfig(c4=C4Config(enabled=True), fineweb=FineWebConfig(enabled=True))

# ------------------------------------------------------------------------------------------ normalise


def test_normalise_removes_control_characters_and_unifies_line_breaks() -> None:
    assert normalise_text("a\x00b\x07c\x1bd\x7fe\x9ff") == "abcdef"  # NUL, BEL, ESC, DEL, C1 removed
    assert (
        normalise_text("a\rb\x0bc\x0cd\x85e\u2028f\u2029g") == "a\nb\nc\nd\ne\nf\ng"
    )  # all line breaks -> LF
    assert normalise_text("tab\tstays") == "tab\tstays"
    assert normalise_text("lone \ud800 surrogate") == "lone  surrogate"


def test_normalise_nfc_whitespace_and_blank_runs() -> None:
    assert normalise_text("Cafe\u0301") == "Caf\u00e9"
    assert normalise_text("  a  \r\nb\t\n") == "a\nb"
    assert normalise_text("a\n\n\n\n\n\nb") == "a\n\n\nb"  # five blank lines -> two
    assert normalise_text("a\n\n\nb") == "a\n\n\nb"  # two blank lines stay
    assert normalise_text("a\n  \n \t\n   \n\nb") == "a\n\n\nb"  # whitespace-only lines are blank


@given(st.text(max_size=200))
def test_normalise_is_idempotent(text: str) -> None:
    once = normalise_text(text)
    assert normalise_text(once) == once


# ------------------------------------------------------------------------------ Gopher quality rules


def _words(n: int, word: str = "the") -> str:
    """n words of length len(word); "the" alternates with "and" so two different stop words are present."""
    if word == "the":
        return " ".join(("the", "and")[i % 2] for i in range(n))
    return " ".join([word] * n)


def _reason(text: str, cfg: CleaningConfig = CFG) -> str | None:
    rejection = F.check_document(text, cfg)
    return rejection.reason if rejection else None


def test_word_count_boundaries() -> None:
    assert _reason(_words(49)) == F.GOPHER_SHORT_DOC  # "fewer than 50 words" removed
    assert _reason(_words(50)) is None  # exactly 50 kept
    assert _reason(_words(100_000)) is None  # exactly 100,000 kept
    assert _reason(_words(100_001)) == F.GOPHER_LONG_DOC
    rejection = F.check_document(_words(49), CFG)
    assert rejection is not None and rejection.detail == "49 words < min_words 50"


def test_mean_word_length_boundaries() -> None:
    # 50 words of length 3 ("the") = mean 3.0 kept; one two-letter word among them drops it below 3
    assert _reason(_words(50)) is None
    assert _reason(_words(49) + " of") == F.GOPHER_BELOW_AVG_THRESHOLD
    exactly_ten = _words(25, "the") + " " + _words(25, "a" * 17)  # (25*3 + 25*17)/50 = 10.0: kept
    assert _reason(exactly_ten) is None
    above_ten = _words(25, "the") + " " + _words(24, "a" * 17) + " " + "a" * 18  # 501/50 = 10.02
    assert _reason(above_ten) == F.GOPHER_ABOVE_AVG_THRESHOLD


def test_hash_and_ellipsis_ratio_boundaries() -> None:
    base = _words(45)
    assert _reason(base + " #tag" * 5) is None  # 5 '#' in 50 words = 0.1, kept
    assert _reason(base + " #tag" * 4 + " ##tag") == F.GOPHER_TOO_MANY_HASHES  # 6 / 50 = 0.12
    one_line = CleaningConfig(
        gopher_repetition=NO_REP, max_ellipsis_lines_fraction=1
    )  # the one line ends in "..."
    assert _reason(base + " and..." * 5, one_line) is None  # 5 ellipses / 50 words
    assert (
        _reason(base + " and..." * 4 + " and\u2026 and...", one_line) == F.GOPHER_TOO_MANY_ELLIPSIS
    )  # "…" counts
    rejection = F.check_document(base + " #tag" * 4 + " ##tag", CFG)
    assert rejection is not None and "0.120 > 0.1" in rejection.detail


def test_alpha_fraction_boundary() -> None:
    assert _reason(_words(40) + " 1234" * 10) is None  # 40/50 = 0.8 have a letter: kept
    assert _reason(_words(39) + " 1234" * 11) == F.GOPHER_BELOW_ALPHA_THRESHOLD  # 0.78
    assert _reason(_words(40) + " 12a4" * 10) is None  # a word with any letter counts


def test_stop_words_boundary() -> None:
    filler = _words(48, "cats")
    assert _reason(filler + " the of") is None  # two stop words kept
    assert _reason(filler + " the dogs") == F.GOPHER_ENOUGH_STOP_WORDS
    assert _reason(filler + " The, (of)") is None  # case and punctuation ignored
    assert _reason(filler + " there other") == F.GOPHER_ENOUGH_STOP_WORDS  # not substrings


def test_stop_words_are_distinct_words_not_occurrences() -> None:
    filler = _words(48, "cats")
    assert _reason(filler + " the the") == F.GOPHER_ENOUGH_STOP_WORDS  # one word twice is one stop word
    rejection = F.check_document(filler + " the the", CFG)
    assert rejection is not None and "1 different stop words (the)" in rejection.detail
    assert _reason(filler + " with have") is None


def test_bullet_and_end_ellipsis_lines() -> None:
    line = "the brown cat and the black dog were sitting with that warm mat today"  # no repetition rules here
    bullets = "\n".join([f"- {line} {i}" for i in range(9)] + [f"{line} end"])  # 9 of 10 = 0.9: kept
    assert _reason(bullets) is None
    assert _reason("\n".join(f"• {line} {i}" for i in range(10))) == F.GOPHER_TOO_MANY_BULLETS
    ellipsis = "\n".join(
        [f"{line} {i}..." for i in range(3)] + [f"{line} {i}." for i in range(7)]
    )  # 0.3 kept
    assert _reason(ellipsis) is None
    more = "\n".join([f"{line} {i}\u2026" for i in range(4)] + [f"{line} {i}." for i in range(6)])
    assert (
        _reason(more, CleaningConfig(gopher_repetition=NO_REP, max_symbol_word_ratio=1))
        == F.GOPHER_TOO_MANY_END_ELLIPSIS
    )


PARA = (
    "Rain fell on the old harbour town through the night, and by morning the streets had turned to shallow "
    "rivers that carried leaves, paper and the smell of the sea into every doorway along the quay. The "
    "fishermen waited in the tavern, talking about prices, boats and the weather that would not change."
)


def test_repetition_line_and_paragraph_fractions() -> None:
    unique = [f"line number {i} of the text here with some words" for i in range(7)]
    kept = "\n".join(unique + [unique[0]] * 3)  # 3 duplicates of 10 lines = 0.3: kept by dup_line_frac
    dropped = "\n".join(unique[:6] + [unique[0]] * 4)  # 4 of 10 = 0.4
    only_lines = CleaningConfig(
        gopher_quality=False,
        gopher_repetition=GopherRepetitionConfig(
            max_duplicate_line_char_fraction=1, top_ngram_char_fractions=(), duplicate_ngram_char_fractions=()
        ),
    )
    assert _reason(kept, only_lines) is None
    assert _reason(dropped, only_lines) == F.DUP_LINE_FRAC
    no_paras = only_lines.gopher_repetition.model_copy(
        update={"max_duplicate_paragraph_fraction": 1, "max_duplicate_paragraph_char_fraction": 1}
    )
    assert (
        _reason(
            "\n\n\n".join(unique + [unique[0]] * 3),
            only_lines.model_copy(update={"gopher_repetition": no_paras}),
        )
        is None
    )  # blank lines are not lines
    paras = "\n\n".join([PARA, PARA + " Another ending.", PARA])  # 1 of 3 paragraphs repeats: 0.33 > 0.3
    assert _reason(paras, CleaningConfig()) == F.DUP_PARA_FRAC
    assert _reason(PARA, CleaningConfig()) is None


def test_top_and_duplicated_ngrams() -> None:
    rep = CleaningConfig(gopher_quality=False)
    spam = PARA + " " + " ".join(["buy now"] * 40)  # the 2-gram "buy now" covers far more than 20 %
    assert _reason(spam, rep) == "top_2_gram"
    echoed = PARA + " " + PARA.replace("Rain", "Snow")  # the second half repeats 5-grams of the first
    assert _reason(echoed, rep) == "duplicated_5_n_grams"
    assert _reason(PARA, rep) is None
    # each repeated word counts once however many overlapping n-grams cover it: 6 of 12 words
    stats = F.TextStats("a b c d e f a b c d e f")
    assert (
        F.check_repetition(
            stats,
            GopherRepetitionConfig(top_ngram_char_fractions=(), duplicate_ngram_char_fractions=((5, 0.49),)),
        ).reason
        == "duplicated_5_n_grams"
    )
    assert (
        F.check_repetition(
            stats,
            GopherRepetitionConfig(top_ngram_char_fractions=(), duplicate_ngram_char_fractions=((5, 0.5),)),
        )
        is None
    )


def test_c4_edits_lines_and_removes_pages() -> None:
    c4 = CleaningConfig(
        gopher_quality=False, gopher_repetition=NO_REP, c4=C4Config(enabled=True, min_sentences=2)
    )
    text = (
        "This is the first sentence of the page. It has two.\nshort line\n"
        "Please enable javascript to see this page now.\nRead our privacy policy for more details here.\n"
        "The last line ends the page [1] well."
    )
    result = F.apply_filters(text, c4)
    assert result.rejection is None
    assert (
        result.text
        == "This is the first sentence of the page. It has two.\nThe last line ends the page  well."
    )
    assert result.chars_edited == len(text) - len(result.text)
    assert F.apply_filters(text + "\nlorem ipsum dolor sit amet", c4).rejection.reason == F.C4_LOREM_IPSUM
    assert F.apply_filters(text + "\nfunction f() { return 1 }", c4).rejection.reason == F.C4_CURLY_BRACKET
    assert F.apply_filters("One sentence only here.", c4).rejection.reason == F.C4_TOO_FEW_SENTENCES
    punct = c4.model_copy(
        update={"c4": C4Config(enabled=True, min_sentences=1, filter_no_terminal_punct=True)}
    )
    assert (
        F.apply_filters("A line without an end mark\nA line with one at the end.", punct).text
        == "A line with one at the end."
    )


def test_fineweb_rules() -> None:
    fw = CleaningConfig(gopher_quality=False, gopher_repetition=NO_REP, fineweb=FineWebConfig(enabled=True))
    prose = "\n".join(f"This is line number {i} of a document, and it ends properly." for i in range(10))
    assert F.check_document(prose, fw) is None
    no_punct = "\n".join(f"This is line number {i} of a document without an end" for i in range(10))
    assert F.check_document(no_punct, fw).reason == F.FINEWEB_LINE_PUNCT_RATIO
    short = "\n".join(
        ["Short one."] * 7
        + [f"A long line number {i} that is well over thirty characters." for i in range(3)]
    )
    assert F.check_document(short, fw).reason == F.FINEWEB_SHORT_LINE_RATIO
    dup = prose + "\n" + "\n".join(["This exact line is repeated many times in the document."] * 3)
    assert F.check_document(dup, fw).reason == F.FINEWEB_CHAR_DUP_RATIO  # paper: 0.1, not datatrove's 0.01


def test_each_group_can_be_switched_off() -> None:
    spam = PARA + " " + " ".join(["buy now"] * 40)
    assert _reason(spam, CleaningConfig(gopher_repetition=NO_REP)) is None
    assert _reason("too short", CleaningConfig(gopher_quality=False)) is None
    assert F.filter_reasons(CleaningConfig())[:2] == (F.TOO_LARGE, F.GOPHER_SHORT_DOC)
    assert F.C4_LOREM_IPSUM not in F.filter_reasons(
        CleaningConfig()
    ) and F.C4_LOREM_IPSUM in F.filter_reasons(ALL)


def test_too_large_runs_first() -> None:
    cfg = CleaningConfig(max_doc_bytes=100)
    assert F.check_document("é" * 50, cfg).reason != F.TOO_LARGE  # 100 UTF-8 bytes is not above 100
    rejection = F.check_document("é" * 51, cfg)
    assert (
        rejection is not None
        and rejection.reason == F.TOO_LARGE
        and "102 bytes > max_doc_bytes 100" in rejection.detail
    )


def test_first_failing_rule_wins() -> None:
    assert _reason("# # #") == F.GOPHER_SHORT_DOC  # also too many hashes, but short comes first
    assert F.check_document("", CFG).reason == F.GOPHER_SHORT_DOC
    assert set(F.filter_reasons()) >= {
        F.GOPHER_TOO_MANY_BULLETS,
        "duplicated_10_n_grams",
        F.FINEWEB_CHAR_DUP_RATIO,
    }


def test_thresholds_come_from_config() -> None:
    lenient = CleaningConfig(min_words=2, min_stop_words=0)
    assert _reason("hello world", lenient) is None
    assert _reason("hello world") == F.GOPHER_SHORT_DOC


# ------------------------------------------------------------------------------------ tokens, dedup, mix


def test_count_tokens() -> None:
    assert count_tokens("Hello world", "gpt2-pretokens") == 2
    assert count_tokens("I'm here, 2024!", "gpt2-pretokens") == 6  # I / 'm / ␣here / , / ␣2024 / !
    assert count_tokens("a  b", "gpt2-pretokens") == 3  # a / ␣ / ␣b
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
    assert empty == [
        {"source": "web", "tokens": 0.0, "share": 0.0, "planned_share": 1.0, "relative_gap": -1.0}
    ]


def test_c4_edits_that_leave_too_few_words_remove_the_document() -> None:
    c4 = CleaningConfig(min_words=13, gopher_repetition=NO_REP, c4=C4Config(enabled=True, min_sentences=1))
    text = (
        "The cat and the dog sat on the mat all day long.\n"
        "Please enable javascript to see the rest of this page and that is all."
    )
    assert F.check_document(text, c4.model_copy(update={"c4": C4Config(enabled=False)})) is None  # 26 words
    rejection = F.check_document(text, c4)
    assert rejection.reason == F.GOPHER_SHORT_DOC and "after C4 line edits" in rejection.detail


_STOPWORDY = st.text(alphabet=st.sampled_from(list("theboftandwivaxTHE_1 .-(\n'")), max_size=80)


@given(_STOPWORDY, st.integers(min_value=1, max_value=8))
def test_ascii_stop_word_search_is_the_regex(text: str, enough: int) -> None:
    """The ASCII fast path finds stop words exactly where the case-insensitive regex with look-arounds does:
    the same set when fewer than `enough` are present, at least `enough` otherwise."""
    by_regex = {m.group(0).lower() for m in _STOP_WORD.finditer(text)}
    fast = _ascii_stop_words(text.lower(), enough)
    if len(by_regex) < enough:
        assert fast == by_regex
    else:
        assert len(fast) >= enough and fast <= by_regex


@given(
    st.text(alphabet=st.sampled_from(list("a.!? \n\t")), max_size=60), st.integers(min_value=0, max_value=6)
)
def test_sentence_count_stops_at_enough_and_is_exact_below(text: str, enough: int) -> None:
    full = len(_SENTENCE_END.findall(text))
    assert _count_sentences(text, enough) == min(full, enough)


@given(st.text(alphabet=st.sampled_from(list("termsofuseprivacylicookiepbt \n")), max_size=80))
def test_policy_phrase_test_is_any_phrase(text: str) -> None:
    import re

    alternation = re.compile("|".join(map(re.escape, F.C4_POLICY_SUBSTRINGS)))
    assert _has_policy_phrase(text) == (alternation.search(text) is not None)

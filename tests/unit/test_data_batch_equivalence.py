"""The batch code of prepare equals the document-by-document definitions it replaced: Arrow's word split is
`str.split()`, batch normalisation is `normalise_text`, batch MinHash signatures are per-document ones."""

from __future__ import annotations

import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from campaign.data.filters import split_words
from campaign.data.minhash import _signatures_per_document, signatures
from campaign.data.normalise import normalise_text, normalise_texts
from tests.helpers.examples import examples

# Characters that decide splitting and normalisation, mixed with ordinary ones.
TRICKY = [
    "a",
    "b",
    "é",
    "e\u0301",
    " ",
    "\t",
    "\n",
    "\n\n\n\n",
    "\r\n",
    "\r",
    "\x00",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1f",
    "\x7f",
    "\x85",
    "\x9f",
    "\xa0",
    "\u1680",
    "\u2000",
    "\u200b",
    "\u2028",
    "\u2029",
    "\u202f",
    "\u3000",
    "\ufeff",
    "  \n",
    "the",
    "İ",
    "K",
]
texts = st.lists(st.lists(st.sampled_from(TRICKY), max_size=30).map("".join), max_size=8)


def test_arrow_split_is_str_split_for_every_code_point() -> None:
    code_points = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    samples = [f"a{chr(c)}b" for c in code_points]
    words, counts = split_words(samples)
    assert counts.tolist() == [len(s.split()) for s in samples]
    assert int(counts.sum()) == len(words)


@given(texts)
def test_split_words_equals_str_split(batch: list[str]) -> None:
    words, counts = split_words(batch)
    assert words.to_pylist() == [w for t in batch for w in t.split()]
    assert counts.tolist() == [len(t.split()) for t in batch]


@given(texts)
def test_normalise_texts_equals_normalise_text(batch: list[str]) -> None:
    assert normalise_texts(batch) == [normalise_text(t) for t in batch]


def test_normalise_texts_with_a_lone_surrogate_falls_back() -> None:
    assert normalise_texts(["a\ud800b", "x\x00y"]) == ["ab", "xy"]


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["a", "b", "c", "d", " ", "\n", "É", "x y"]), max_size=60).map("".join),
        max_size=12,
    ),
    st.integers(min_value=1, max_value=6),
)
def test_batch_signatures_equal_per_document_signatures(batch: list[str], ngram: int) -> None:
    sig, has = signatures(batch, ngram=ngram, num_perm=16, seed=3)
    ref_sig, ref_has = _signatures_per_document(batch, ngram=ngram, num_perm=16, seed=3)
    assert np.array_equal(has, ref_has)
    assert np.array_equal(sig[has], ref_sig[has])


_repetitive = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "dd", "eee", "a b", "b a"]), max_size=40).map(" ".join),
    min_size=1,
    max_size=6,
)
_ns = st.lists(st.integers(min_value=1, max_value=12), max_size=4, unique=True)


@given(_repetitive, _ns, _ns)
@settings(
    max_examples=examples(200), deadline=None
)  # the first example compiles the kernel (or loads its cache)
def test_compiled_ngram_tables_equal_the_numpy_tables(
    batch: list[str], top_ns: list[int], dup_ns: list[int]
) -> None:
    """The compiled per-document kernel gives every text the same top and duplicated n-gram measures as the
    batch-wide NumPy tables, for any n from 1 (short texts, texts without repeats, long runs of one word)."""
    from campaign.data.filters import TextStats, ngram_tables, ngram_tables_numpy

    compiled, reference = [TextStats(t) for t in batch], [TextStats(t) for t in batch]
    ngram_tables(compiled, top_ns, dup_ns)
    ngram_tables_numpy(reference, top_ns, dup_ns)
    for got, want in zip(compiled, reference, strict=True):
        assert got.top_ngrams == want.top_ngrams
        assert got.dup_ngrams == want.dup_ngrams


def test_compiled_split_is_str_split_for_every_code_point() -> None:
    """The compiled scan's whitespace is `str.isspace`'s, character for character (lone surrogates included,
    as unnormalised text may hold them)."""
    from campaign.data.filters.kernels import split_words_compiled
    from campaign.data.filters.measures import _utf8_buffer

    samples = [f"a{chr(c)}b" for c in range(sys.maxunicode + 1)]
    data, offsets = _utf8_buffer(samples)
    wstart, wend, wlen, _, counts, _ = split_words_compiled(data, offsets)
    assert counts.tolist() == [len(s.split()) for s in samples]
    raw = data.tobytes()
    words = [
        raw[s:e].decode("utf-8", "surrogatepass") for s, e in zip(wstart.tolist(), wend.tolist(), strict=True)
    ]
    assert words == [w for s in samples for w in s.split()]
    assert wlen.tolist() == [len(w) for w in words]


_SURROGATE_OR_TRICKY = st.lists(
    st.lists(st.sampled_from([*TRICKY, "\ud800", "1", "_", "#", "..", "٣", "ǅ"]), max_size=30).map("".join),
    max_size=8,
)


@given(_SURROGATE_OR_TRICKY)
@settings(deadline=None)
def test_compiled_word_tables_equal_the_vocabulary_tables(batch: list[str]) -> None:
    """Word counts, characters, mean word length and words with a letter from the compiled scan equal the
    per-distinct-word Arrow tables (and `str.split`), for any characters, lone surrogates included."""
    from campaign.data.filters import TextStats, word_tables, word_tables_vocab

    compiled, reference = [TextStats(t) for t in batch], [TextStats(t) for t in batch]
    word_tables(compiled)
    word_tables_vocab(reference)
    for got, want, text in zip(compiled, reference, batch, strict=True):
        assert got.n_words == want.n_words == len(text.split())
        assert got.word_chars == want.word_chars
        assert got.n_alpha_words == want.n_alpha_words
        assert got.mean_word_length == want.mean_word_length

"""The rehearsal sample: chosen by document hash, tokenized, checked, packed with end-of-document tokens, split."""

import numpy as np
import pytest

from campaign.data.tokenizer import load_tokenizer
from campaign.rehearsal.sample import build_sample, is_heldout, pack, select_documents
from tests.helpers.rehearsal_docs import DOCS


class FakeTokenizer:
    """A byte tokenizer that can be told to misbehave."""

    name = "fake-bytes"
    eot_id = 256

    def __init__(self, n_vocab=257, lossless=True, drop_char=None, empty_for=None):
        self.n_vocab, self.is_lossless, self.drop_char, self.empty_for = (
            n_vocab,
            lossless,
            drop_char,
            empty_for,
        )

    def encode(self, text):
        if self.empty_for and self.empty_for in text:
            return []
        if self.drop_char:
            text = text.replace(self.drop_char, "")
        return list(text.encode())

    def encode_many(self, texts):
        return [self.encode(t) for t in texts]

    def count_many(self, texts):
        return [len(self.encode(t)) for t in texts]

    def decode(self, ids):
        return bytes(ids).decode(errors="replace")


def sample(tokenizer=None, docs=DOCS, **kw):
    args = {"sample_tokens": 5_000, "seq_len": 32, "heldout_fraction": 0.1, "vocab": "sample", **kw}
    return build_sample(docs, tokenizer or load_tokenizer("utf8-bytes"), **args)


def test_selection_is_by_hash_whatever_the_order():
    a = select_documents(DOCS, 3_000)
    b = select_documents(list(reversed(DOCS)), 3_000)
    assert [d.doc_id for d in a] == [d.doc_id for d in b]
    assert [d.text_sha256 for d in a] == sorted(d.text_sha256 for d in a)
    assert sum(d.n_tokens for d in a[:-1]) < 3_000 <= sum(d.n_tokens for d in a)


def test_packing_puts_an_end_of_document_token_after_each_document():
    rows = pack([[1, 2, 3], [4, 5], [6]], eot_id=0, seq_len=3)
    assert rows.tolist() == [[1, 2, 3, 0], [4, 5, 0, 6]]  # the final EOT does not fill a row and is dropped


def test_held_out_documents_are_spread_and_never_in_both_splits():
    marks = is_heldout(20, 0.1)
    assert sum(marks) == 2 and marks != sorted(marks, reverse=True)
    assert sum(is_heldout(3, 0.01)) == 1 and not any(is_heldout(1, 0.5))


def test_a_real_tokenizer_gives_a_deterministic_checked_sample():
    s1, s2 = sample(), sample(docs=list(reversed(DOCS)))
    assert not s1.problems
    assert np.array_equal(s1.train, s2.train) and np.array_equal(s1.heldout, s2.heldout)
    assert s1.train.dtype == np.uint32 and s1.train.shape[1] == 33
    assert s1.train.max() < s1.vocab and s1.heldout.max() < s1.vocab
    assert s1.checks.round_trip == "passed" and s1.checks.n_empty_documents == 0
    assert s1.n_documents["heldout"] >= 1 and s1.n_documents["train"] > s1.n_documents["heldout"]
    # the dense "sample" vocabulary maps back to the tokenizer's ids, the end-of-document id included
    assert s1.vocab_map[s1.eot_id] == 256
    # rows are consecutive cuts of one stream: mapped back and split at the end-of-document id, it is the
    # training documents' text in hash order
    stream = bytes(int(t) if t != 256 else 0 for t in s1.vocab_map[s1.train].ravel()).split(b"\0")
    chosen = select_documents(DOCS, 5_000)
    held = is_heldout(len(chosen), 0.1)
    train_texts = [d.text.encode() for d, h in zip(chosen, held, strict=True) if not h]
    assert stream[:-1] == train_texts[: len(stream) - 1]


def test_tokenizer_vocabulary_mode_keeps_the_tokenizers_ids():
    s = sample(vocab="tokenizer")
    assert s.vocab == 257 and s.eot_id == 256 and s.vocab_map is None


def test_cl100k_sample_round_trips():
    s = sample(load_tokenizer("cl100k_base"))
    assert not s.problems and s.checks.max_token_id < s.checks.n_vocab == 100277


def test_a_counting_only_tokenizer_is_refused_with_the_fix():
    s = sample(load_tokenizer("gpt2-pretokens"))
    assert s.problems and "cannot encode" in s.problems[0]
    assert "cl100k_base" in s.fixes[0]


def test_a_tokenizer_that_loses_text_fails_the_round_trip_naming_the_document():
    s = sample(FakeTokenizer(drop_char="q"))
    assert any("does not round-trip" in p and "first difference at character" in p for p in s.problems)


def test_a_lossy_tokenizer_is_not_round_trip_checked():
    s = sample(FakeTokenizer(drop_char="q", lossless=False))
    assert not s.problems and s.checks.round_trip.startswith("not applicable")


def test_ids_outside_the_vocabulary_fail():
    s = sample(FakeTokenizer(n_vocab=100))
    assert any("outside the vocabulary of 100" in p for p in s.problems)


def test_an_empty_document_fails_naming_it():
    victim = select_documents(DOCS, 5_000)[3]
    s = sample(FakeTokenizer(empty_for=victim.text[-14:]))
    assert any("encode to no tokens" in p and victim.doc_id in p for p in s.problems)


def test_a_sample_too_small_for_one_sequence_fails():
    s = sample(sample_tokens=1_000, seq_len=4000)
    assert any("too small for one train sequence" in p for p in s.problems)
    assert any("rehearsal.sample_tokens" in f for f in s.fixes)


def test_no_documents_at_all_fails():
    assert sample(docs=[]).problems == ["no clean documents to sample"]


@pytest.mark.parametrize("fraction", [0.01, 0.5])
def test_both_splits_have_sequences(fraction):
    s = sample(heldout_fraction=fraction)
    assert s.train.shape[0] >= 1 and s.heldout.shape[0] >= 1


def test_the_clean_tables_give_what_select_documents_chooses():
    import pyarrow as pa

    from campaign.rehearsal.sample import documents_from_tables

    tables = [
        pa.table(
            {
                "doc_id": [d.doc_id for d in chunk],
                "text": [d.text for d in chunk],
                "text_sha256": [d.text_sha256 for d in chunk],
                "n_tokens": [d.n_tokens for d in chunk],
            }
        )
        for chunk in (DOCS[:25], DOCS[25:])
    ]
    assert documents_from_tables(tables, 3_000) == select_documents(DOCS, 3_000)
    assert documents_from_tables(tables[::-1], 10**9) == select_documents(DOCS, 10**9)

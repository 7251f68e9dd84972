"""campaign.data.tokenizer: real offline BPE vocabularies, a user's tokenizer.json, and the explicit estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.data.tokenizer import Tokenizer, load_tokenizer, split_for_encoding
from campaign.errors import ConfigError

TRICKY = [
    "",
    "Hello, world.",
    "  leading and trailing  \t\r\n",
    "é ñ ü 中文 😀 \u00a0 \u200b",
    "a document that mentions <|endoftext|> literally",
    "x" * 3000,
    "line one\nLine two\n\n\n  indented\tTabbed",
]


@pytest.mark.parametrize("spec", ["cl100k_base", "o200k_base"])
def test_openai_vocabularies_round_trip_and_name_their_version(spec):
    tok = load_tokenizer(spec)
    assert isinstance(tok, Tokenizer)
    assert spec in tok.name and "bpe-openai 0." in tok.name
    assert tok.is_lossless
    for text in TRICKY:
        assert tok.decode(tok.encode(text)) == text
    assert tok.count_many(TRICKY) == [len(ids) for ids in tok.encode_many(TRICKY)]


def test_cl100k_known_ids_and_special_text_is_ordinary():
    tok = load_tokenizer("cl100k_base")
    assert tok.n_vocab == 100277 and tok.eot_id == 100257
    # Pinned by tiktoken's own test suite: "hello world" -> [15339, 1917] in cl100k_base.
    assert tok.encode("hello world") == [15339, 1917]
    # A document's own "<|endoftext|>" never becomes the end-of-document id.
    assert tok.eot_id not in tok.encode("before <|endoftext|> after")


def test_o200k_known_ids():
    tok = load_tokenizer("o200k_base")
    assert tok.eot_id == 199999
    assert tok.encode("hello world") == [24912, 2375]


def test_long_text_is_encoded_in_token_exact_pieces():
    para = "The quick brown fox jumps over the lazy dog, again and again.\nAnother line follows here.\n"
    text = para * 10_000  # ~880 k characters: under bpe-openai's 1,000,000 limit, over our 500 k pieces
    pieces = split_for_encoding(text, limit=100_000)
    assert "".join(pieces) == text and all(len(p) <= 100_000 for p in pieces) and len(pieces) > 1
    tok = load_tokenizer("cl100k_base")
    unsplit = len(tok._encoding.encode_ordinary(text))  # the library on the whole text, no pieces
    # Pieces cut after a newline before a letter are exactly the tokens of the whole text.
    assert tok.count_many([text])[0] == unsplit
    assert sum(len(tok.encode(p)) for p in pieces) == unsplit
    longer = text * 2  # 1.76 M characters: the library alone refuses this; pieces make it work
    assert tok.count_many([longer])[0] == 2 * unsplit
    assert tok.decode(tok.encode(longer)) == longer


def test_split_falls_back_to_whitespace_then_hard_cut():
    one_line = "word " * 50
    assert "".join(split_for_encoding(one_line, limit=40)) == one_line
    assert all(len(p) <= 40 for p in split_for_encoding(one_line, limit=40))
    blob = "x" * 95
    assert split_for_encoding(blob, limit=40) == ["x" * 40, "x" * 40, "x" * 15]


def _train_tokenizer_json(path: Path, *, eot: str | None = "<|endoftext|>") -> Path:
    from tokenizers import Tokenizer as HF
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = HF(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=[eot] if eot else [],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(
        ["the quick brown fox jumps over the lazy dog " * 50, "hello world " * 30], trainer
    )
    tok.save(str(path))
    return path


def test_users_tokenizer_json(tmp_path):
    path = _train_tokenizer_json(tmp_path / "tokenizer.json")
    tok = load_tokenizer(str(path))
    assert "tokenizer.json sha256:" in tok.name and "(tokenizers " in tok.name
    assert tok.eot_id == 0 and tok.n_vocab >= 256
    assert tok.is_lossless
    for text in TRICKY:
        assert tok.decode(tok.encode(text)) == text
    assert tok.eot_id not in tok.encode("x <|endoftext|> y")
    assert tok.count_many(["hello world", ""]) == [len(tok.encode("hello world")), 0]


def test_tokenizer_json_without_end_token_is_a_config_error(tmp_path):
    path = _train_tokenizer_json(tmp_path / "noeot.json", eot=None)
    with pytest.raises(ConfigError, match="no end-of-document token"):
        load_tokenizer(str(path))


def test_bad_specs_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown tokenizer"):
        load_tokenizer("gpt5-magic")
    with pytest.raises(ConfigError, match="not found"):
        load_tokenizer(str(tmp_path / "missing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ConfigError, match=r"not a usable tokenizer\.json") as info:
        load_tokenizer(str(broken))
    assert str(broken) in str(info.value)


def test_pretoken_estimate_counts_but_refuses_to_encode():
    est = load_tokenizer("gpt2-pretokens")
    assert "estimate" in est.name and not est.is_lossless
    assert est.count_many(["Hello world!", ""]) == [3, 0]
    for call in (lambda: est.encode("x"), lambda: est.encode_many(["x"]), lambda: est.decode([1])):
        with pytest.raises(ConfigError, match="pick a real tokenizer"):
            call()


def test_utf8_bytes():
    tok = load_tokenizer("utf8-bytes")
    assert tok.encode("é") == [0xC3, 0xA9] and tok.count_many(["é", "ab"]) == [2, 2]
    assert tok.decode(tok.encode("😀 x")) == "😀 x"


@pytest.mark.parametrize("spec", ["cl100k_base", "o200k_base"])
def test_backend_encoding_and_known_sizes_match_the_packages_encoding(spec):
    """Workers encode with the compiled backend and take the sizes from a table: both equal bpe-openai's Encoding."""
    tok = load_tokenizer(spec)
    encoding = tok._encoding  # the package's full Encoding
    assert (tok.n_vocab, tok.eot_id) == (encoding.n_vocab, encoding.eot_token)
    for text in TRICKY:
        assert tok.encode(text) == encoding.encode_ordinary(text)

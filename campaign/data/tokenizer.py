"""Tokenizers that work offline: real BPE vocabularies for encoding and counting, and one fast estimate.

`load_tokenizer(spec)` returns a `Tokenizer`:
- "cl100k_base", "o200k_base": OpenAI's byte-level BPE vocabularies through PyPI `bpe-openai` (a Rust
  implementation with a tiktoken-compatible API whose wheel ships both vocabularies, so nothing is downloaded).
  Chosen over `tiktoken`, which downloads its vocabulary files on first use. Text is encoded as ordinary
  text: a document containing "<|endoftext|>" gets the tokens of those characters, never the special id.
- a path to a `tokenizer.json` (a user's own vocabulary) through HuggingFace `tokenizers`, with special-token
  text in documents likewise encoded as plain text (`encode_special_tokens = True`).
- "utf8-bytes": one token per UTF-8 byte (ids 0-255, end of document 256), what a byte-level model sees.
- "gpt2-pretokens": counting only, an explicit fast *estimate*: the number of GPT-2 pre-tokenizer pieces,
  a lower bound on GPT-2 BPE tokens (see `campaign.data.tokens`). `encode`/`decode` raise `ConfigError`.

`name` always carries the library version (and for a tokenizer.json the file's sha256 prefix), so a
manifest that records it says exactly which vocabulary produced its counts.

Long texts: bpe-openai refuses inputs of 1,000,000 characters or more, so longer texts are encoded in
pieces cut right after a line break that is followed by a letter. Both OpenAI pre-tokenizer patterns always
start a new piece at such a letter, so the pieces' tokens are exactly the whole text's tokens. A text with
no such place in a window (one enormous line) is cut at a whitespace character instead, which can change
the count by at most one or two tokens per cut.

Lossless: `decode(encode(t)) == t` holds for every `str` that can be encoded as UTF-8. A `str` holding a
lone surrogate (only possible from `surrogateescape`/`surrogatepass` decoding, never from strict UTF-8)
comes back with U+FFFD in its place; campaign's normalisation removes such characters before tokenizing.

Source: OpenAI tiktoken `tiktoken_ext/openai_public.py` (the cl100k_base/o200k_base patterns and special
tokens); PyPI `bpe-openai` 0.1.x (github.com/github/rust-gems, crate `bpe-openai`); HuggingFace
`tokenizers` (`Tokenizer.from_file`, `encode_batch`, `encode_special_tokens`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import re
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from campaign.data.tokens import TOKENIZER_BACKEND, count_tokens_many
from campaign.errors import ConfigError
from campaign.files import read_bounded

MAX_TOKENIZER_BYTES = 256 << 20  # the largest published tokenizer.json files are tens of MB

OPENAI_ENCODINGS = ("cl100k_base", "o200k_base")
ESTIMATES = ("gpt2-pretokens",)
BUILTIN_SPECS = (*OPENAI_ENCODINGS, "utf8-bytes", *ESTIMATES)

# bpe-openai raises "Input too long to encode safely" at 1,000,000 characters; stay well below.
MAX_PIECE_CHARS = 500_000
# A line break followed by a letter: both OpenAI patterns start a new pre-token at the letter.
_SAFE_CUT = re.compile(r"[\r\n](?=[^\W\d_])")
_ANY_SPACE = re.compile(r"\s")


@runtime_checkable
class Tokenizer(Protocol):
    """What campaign needs from a tokenizer: ids for training data, counts for accounting."""

    name: str  # e.g. "cl100k_base (bpe-openai 0.1.4)", with the library version
    is_lossless: bool  # decode(encode(t)) == t for every str

    @property
    def n_vocab(self) -> int: ...
    @property
    def eot_id(self) -> int: ...  # end-of-document token id
    def encode(self, text: str) -> list[int]: ...
    def encode_many(self, texts: Sequence[str]) -> list[list[int]]: ...
    def count_many(self, texts: Sequence[str]) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - depends on the environment
        return "unknown version"


def split_for_encoding(text: str, limit: int = MAX_PIECE_CHARS) -> list[str]:
    """Cut `text` into pieces of at most `limit` characters at places where BPE starts a new token anyway.

    Prefers a line break followed by a letter (token-exact for the OpenAI patterns); falls back to the
    last whitespace character in the window, then to a hard cut (one enormous word).
    """
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    start = 0
    while len(text) - start > limit:
        window_end = start + limit
        cut = -1
        for match in _SAFE_CUT.finditer(text, start + limit // 2, window_end):
            cut = match.end()
        if cut <= start:
            for match in _ANY_SPACE.finditer(text, start + limit // 2, window_end):
                cut = match.start()
        if cut <= start:
            cut = window_end
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


class OpenAIBpeTokenizer:
    """cl100k_base / o200k_base from the vocabulary shipped in the `bpe-openai` wheel."""

    is_lossless = True

    def __init__(self, encoding_name: str) -> None:
        self._encoding_name = encoding_name
        # Counting needs only the Rust backend. Importing the `bpe_openai` package builds Python dicts of
        # all its vocabularies (cl100k, o200k, voyage3: about 0.6 s and 75 MB per process), so a counting
        # worker loads the compiled backend alone; the full Encoding is built on first encode/decode.
        backend = _bpe_backend(encoding_name)
        self._count_piece = getattr(backend, "count", None) or (
            lambda s: len(self._encoding.encode_ordinary(s))
        )
        # Encoding too (the training shards' ids) needs only the backend: its `encode` is `encode_ordinary`.
        self._encode_piece = getattr(backend, "encode", None) or self._encoding.encode_ordinary
        self.name = f"{encoding_name} (bpe-openai {_version('bpe-openai')})"

    @functools.cached_property
    def _encoding(self):
        import warnings

        import bpe_openai

        with (
            warnings.catch_warnings()
        ):  # bpe-openai 0.1.4 reads its vocabulary with a deprecated importlib API
            warnings.simplefilter("ignore", DeprecationWarning)
            return bpe_openai.get_encoding(self._encoding_name)

    # (n_vocab, end-of-text id) of tiktoken's openai_public.py, so a worker that only encodes never builds the
    # Python vocabulary for them; a test holds them to the package's Encoding.
    KNOWN_SIZES: ClassVar[dict[str, tuple[int, int]]] = {
        "cl100k_base": (100277, 100257),
        "o200k_base": (200019, 199999),
    }

    @property
    def n_vocab(self) -> int:
        known = self.KNOWN_SIZES.get(self._encoding_name)
        return known[0] if known else int(self._encoding.n_vocab)

    @property
    def eot_id(self) -> int:
        known = self.KNOWN_SIZES.get(self._encoding_name)
        return known[1] if known else int(self._encoding.eot_token)

    @staticmethod
    def _clean(text: str) -> str:
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:  # lone surrogates: what bpe-openai itself does, U+FFFD in their place
            return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        encode_piece = self._encode_piece
        for piece in split_for_encoding(self._clean(text)):
            ids.extend(encode_piece(piece))
        return ids

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def count(self, text: str) -> int:
        count_piece = self._count_piece
        return sum(count_piece(piece) for piece in split_for_encoding(self._clean(text)) if piece)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        count = self.count
        return [count(t) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        return self._encoding.decode(list(ids))


class HuggingFaceTokenizer:
    """A user's `tokenizer.json` through HuggingFace `tokenizers`."""

    # Names of end-of-document tokens, most specific first.
    EOT_NAMES = (
        "<|endoftext|>",
        "<|end_of_text|>",
        "</s>",
        "<eos>",
        "<|eos|>",
        "[EOS]",
        "<|im_end|>",
        "[SEP]",
    )
    _PROBES = (
        "Hello, world.",
        "  two  spaces\tand\ttabs\r\n",
        "é ñ ü 中文 😀",
        "x<|endoftext|>y",
        "a\u00a0b",
    )

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        try:
            raw = read_bounded(path, MAX_TOKENIZER_BYTES)
        except OSError as exc:  # not a regular file, too large, unreadable
            raise ConfigError(
                f"cannot read the tokenizer file: {exc.strerror or exc}",
                where=str(path),
                fix="point data.tokenizer at a tokenizer.json saved by HuggingFace tokenizers, "
                "or use cl100k_base / o200k_base",
            ) from None
        try:
            tok = HFTokenizer.from_str(raw.decode("utf-8", "replace"))
        except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
            raise ConfigError(
                f"not a usable tokenizer.json: {exc}",
                where=str(path),
                fix="point data.tokenizer at a file saved by HuggingFace tokenizers (Tokenizer.save), "
                "or use cl100k_base / o200k_base",
            ) from None
        tok.no_padding()
        tok.no_truncation()
        tok.encode_special_tokens = True  # special-token text inside a document is ordinary text
        self._tok = tok
        self.name = (
            f"{path.name} sha256:{hashlib.sha256(raw).hexdigest()[:16]} (tokenizers {_version('tokenizers')})"
        )
        self.n_vocab = int(tok.get_vocab_size(with_added_tokens=True))
        eot = next((tok.token_to_id(n) for n in self.EOT_NAMES if tok.token_to_id(n) is not None), None)
        if eot is None:
            raise ConfigError(
                "the tokenizer has no end-of-document token (looked for " + ", ".join(self.EOT_NAMES) + ")",
                where=str(path),
                fix="add an end-of-text special token to the tokenizer (tokenizer.add_special_tokens) and save it",
            )
        self.eot_id = int(eot)
        self.is_lossless = self._probe_lossless()

    def _probe_lossless(self) -> bool:
        """True when the vocabulary is byte-level (every str is representable) and the probes round-trip."""
        import json

        spec = json.loads(self._tok.to_str())
        model = spec.get("model") or {}
        byte_level = "ByteLevel" in json.dumps(spec.get("pre_tokenizer")) or bool(model.get("byte_fallback"))
        if spec.get("normalizer") is not None or not byte_level:
            return False
        return all(self.decode(self.encode(p)) == p for p in self._PROBES)

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        return [list(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)


class Utf8BytesTokenizer:
    """One token per UTF-8 byte: ids 0-255, end of document 256."""

    name = "utf8-bytes"
    n_vocab = 257
    eot_id = 256
    is_lossless = True

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8", "surrogatepass"))

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(t.encode("utf-8", "surrogatepass")) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        if any(i == self.eot_id for i in ids):
            raise ValueError("utf8-bytes: the end-of-document id 256 is not text")
        return bytes(ids).decode("utf-8", "surrogatepass")


class Gpt2PretokenEstimate:
    """GPT-2 pre-tokenizer pieces: a fast lower-bound estimate of GPT-2 BPE tokens, for counting only."""

    n_vocab = 50257  # GPT-2's vocabulary, for sizing only: this estimate produces no ids
    eot_id = 50256
    is_lossless = False

    def __init__(self) -> None:
        self.name = f"gpt2-pretokens (estimate: GPT-2 pre-tokenizer pieces, {TOKENIZER_BACKEND} backend)"

    def _refuse(self) -> ConfigError:
        return ConfigError(
            "gpt2-pretokens is a fast token-count estimate and has no vocabulary to encode or decode with",
            where="data.tokenizer",
            fix="pick a real tokenizer: cl100k_base, o200k_base, or the path of a tokenizer.json",
        )

    def encode(self, text: str) -> list[int]:
        raise self._refuse()

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        raise self._refuse()

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [int(n) for n in count_tokens_many(texts, "gpt2-pretokens")]

    def decode(self, ids: Sequence[int]) -> str:
        raise self._refuse()


def _bpe_backend(encoding_name: str):
    """bpe-openai's compiled tokenizer for `encoding_name` (its `count` is len(encode) without the list),
    loaded from the wheel's extension module without running the package's `__init__`, which would build
    every vocabulary as a Python dict. Falls back to the public package when the module cannot be found."""
    import importlib.machinery
    import importlib.util
    import sys

    name = "bpe_openai._bindings"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.find_spec("bpe_openai")
        folder = Path(spec.origin).parent if spec and spec.origin else None
        paths = sorted(folder.glob("_bindings*.so")) + sorted(folder.glob("_bindings*.pyd")) if folder else []
        if not paths:
            import bpe_openai  # noqa: F401 - the package's own import path

            module = sys.modules[name]
        else:
            loader = importlib.machinery.ExtensionFileLoader(name, str(paths[0]))
            spec = importlib.util.spec_from_loader(name, loader)
            assert spec is not None  # a loader given: always a spec
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            sys.modules[name] = module
    return module.tokenizer_for_encoding(encoding_name)


def check_spec(spec: str) -> None:
    """Raise the ConfigError `load_tokenizer` would for a bad spec, without building a BPE vocabulary
    (a tokenizer.json is loaded: that is quick and the only way to know it is usable)."""
    if spec in BUILTIN_SPECS:
        return
    load_tokenizer(spec)


def is_estimate(spec: str) -> bool:
    """True when `spec` names a counting estimate rather than a real vocabulary."""
    return spec in ESTIMATES


@functools.lru_cache(maxsize=8)
def load_tokenizer(spec: str) -> Tokenizer:
    """The tokenizer named by `spec`: "cl100k_base", "o200k_base", "utf8-bytes", "gpt2-pretokens" or a
    tokenizer.json path. Loaded once per process (cl100k takes a few seconds to build its tables)."""
    if spec in OPENAI_ENCODINGS:
        return OpenAIBpeTokenizer(spec)
    if spec == "utf8-bytes":
        return Utf8BytesTokenizer()
    if spec == "gpt2-pretokens":
        return Gpt2PretokenEstimate()
    path = Path(spec).expanduser()
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise ConfigError(
                "tokenizer file not found" if not path.exists() else "the tokenizer is not a regular file",
                where=str(path),
                fix="give the path of an existing tokenizer.json, or one of " + ", ".join(BUILTIN_SPECS),
            )
        return HuggingFaceTokenizer(path)
    raise ConfigError(
        f"unknown tokenizer {spec!r}",
        where="data.tokenizer",
        fix="use one of " + ", ".join(BUILTIN_SPECS) + ", or the path of a tokenizer.json",
    )

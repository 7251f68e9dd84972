"""Token counting without downloading a vocabulary.

"gpt2-pretokens" counts the pieces of the GPT-2 pre-tokenizer regex (the split BPE runs on before merging).
BPE never merges across pieces, so this is a lower bound on GPT-2 BPE tokens (typically 80-95 % of them
on English prose). "utf8-bytes" counts UTF-8 bytes, the token count of a byte-level model.
The exact pattern needs the third-party `regex` module (`\\p{L}`, `\\p{N}`); without it a stdlib `re`
equivalent is used, which differs only on rare characters (letters vs. numbers outside the ASCII range and
"_"), so counts can differ slightly between backends: the manifest records `TOKENIZER_BACKEND`.
Source: openai/gpt-2 `src/encoder.py` (the `pat` regex), also tiktoken's r50k_base.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TOKENIZERS = ("gpt2-pretokens", "utf8-bytes")

_GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# stdlib approximation: letters = word chars minus digits and "_"; numbers = \d; other = the rest, "_" included.
_RE_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""

try:
    import regex as _regex

    _PRETOKEN = _regex.compile(_GPT2_PATTERN)
    TOKENIZER_BACKEND = "regex"
except ImportError:  # pragma: no cover - depends on the environment
    import re as _re

    _PRETOKEN = _re.compile(_RE_PATTERN)
    TOKENIZER_BACKEND = "re"


def count_tokens(text: str, tokenizer: str) -> int:
    """Tokens in one text under `tokenizer` ("gpt2-pretokens" or "utf8-bytes")."""
    if tokenizer == "gpt2-pretokens":
        return len(_PRETOKEN.findall(text))
    if tokenizer == "utf8-bytes":
        return len(text.encode("utf-8"))
    raise ValueError(f"unknown tokenizer {tokenizer!r}; use one of {', '.join(TOKENIZERS)}")


def count_tokens_many(texts: Sequence[str], tokenizer: str) -> np.ndarray:
    """Token counts of many texts as an int64 array (one compiled pattern, no per-call dispatch)."""
    if tokenizer == "gpt2-pretokens":
        findall = _PRETOKEN.findall
        return np.fromiter((len(findall(t)) for t in texts), dtype=np.int64, count=len(texts))
    if tokenizer == "utf8-bytes":
        return np.fromiter((len(t.encode("utf-8")) for t in texts), dtype=np.int64, count=len(texts))
    raise ValueError(f"unknown tokenizer {tokenizer!r}; use one of {', '.join(TOKENIZERS)}")

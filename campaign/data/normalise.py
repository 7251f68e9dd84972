"""Text normalisation applied before filtering, hashing and counting.

`normalise_text` is idempotent (normalising twice changes nothing), so exact dedup on its output treats
texts that differ only in Unicode composition, control characters, trailing spaces, line endings or
blank-line runs as equal.
"""

from __future__ import annotations

import re
import unicodedata

_BLANK_RUN = re.compile(r"\n{4,}")  # four newlines = three or more blank lines in a row
# Line breaks other than LF: CRLF, lone CR, vertical tab, form feed, NEL, line/paragraph separators.
_LINE_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x85\u2028\u2029]")
# C0 controls except tab and LF, DEL, C1 controls, and lone surrogates (never valid in UTF-8).
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff]")
_MAYBE_DIRTY = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# Whitespace other than LF just before a line break: the only lines `str.rstrip` would change (`\s` in a str
# pattern is what `str.isspace` calls whitespace). The text's last line is left to the final `strip`. In ASCII
# text, after steps 1 and 2, that whitespace can only be a space or a tab (substring tests, faster than the regex).
_TRAILING_SPACE = re.compile(r"[^\S\n]\n")


def normalise_texts(texts: list[str]) -> list[str]:
    """`normalise_text` of every text; Arrow's RE2 finds the texts that need steps 1-2 in one pass over the
    batch (the rest skip the per-text search). Falls back to text by text when Arrow cannot hold a text."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc

        dirty = pc.match_substring_regex(pa.array(texts, pa.string()), _DIRTY_RE2).to_numpy(
            zero_copy_only=False
        )
    except Exception:  # a lone surrogate (Arrow holds UTF-8 only): the text-by-text path finds it
        return [normalise_text(t) for t in texts]
    return [normalise_text(t, maybe_dirty=bool(d)) for t, d in zip(texts, dirty.tolist(), strict=True)]


# The characters of `_MAYBE_DIRTY` for RE2 (which sees UTF-8 text, so no surrogate can occur there).
_DIRTY_RE2 = "[\\x{00}-\\x{08}\\x{0b}-\\x{1f}\\x{7f}-\\x{9f}\\x{2028}\\x{2029}]"


def normalise_text(text: str, *, maybe_dirty: bool = True) -> str:
    """Normalise one document's text.

    1. Line breaks unified to LF: CRLF, a lone CR, vertical tab, form feed, NEL, U+2028 and U+2029 (what
       `str.splitlines` treats as line ends) each become one "\\n".
    2. Control characters removed: NUL and the other C0 controls except tab and LF, DEL, the C1 controls
       (U+0080-U+009F) and lone surrogates. They carry no text and break tools downstream.
    3. Unicode NFC (composed form), so "e" + U+0301 and "é" hash alike.
    4. Trailing whitespace removed from every line.
    5. Runs of more than two blank lines collapsed to two (paragraph breaks survive, padding does not).
    6. Leading and trailing whitespace of the whole document stripped.
    """
    if maybe_dirty and _MAYBE_DIRTY.search(text):
        text = _LINE_BREAKS.sub("\n", text)
        text = _CONTROL.sub("", text)
    if not text.isascii() and not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if (" \n" in text or "\t\n" in text) if text.isascii() else _TRAILING_SPACE.search(text):
        text = "\n".join(map(str.rstrip, text.split("\n")))
    if "\n\n\n\n" in text:
        text = _BLANK_RUN.sub("\n\n\n", text)
    return text.strip()

"""Text normalisation applied before filtering, hashing and counting.

`normalise_text` is idempotent (normalising twice changes nothing), so exact dedup on its output treats
texts that differ only in Unicode composition, trailing spaces, line endings or blank-line runs as equal.
"""

from __future__ import annotations

import re
import unicodedata

_BLANK_RUN = re.compile(r"\n{4,}")  # four newlines = three or more blank lines in a row
# C0 control characters (NUL included) except tab, line feed and carriage return, DEL, and C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def normalise_text(text: str) -> str:
    """Normalise one document's text.

    0. Control characters (NUL and the rest of C0 but tab and line breaks, DEL, C1) removed: they carry no text.
    1. Unicode NFC (composed form), so "e" + U+0301 and "é" hash alike.
    2. Trailing whitespace removed from every line; this also turns CRLF line endings into LF.
    3. Runs of more than two blank lines collapsed to two (paragraph breaks survive, padding does not).
    4. Leading and trailing whitespace of the whole document stripped.
    """
    text = _CONTROL.sub("", text)
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = _BLANK_RUN.sub("\n\n\n", text)
    return text.strip()

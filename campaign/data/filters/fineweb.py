"""FineWeb's three line rules over non-empty lines.

Remove if the fraction ending in terminal punctuation (`TERMINAL_PUNCTUATION`) is at most 0.12, if the fraction
of lines of 30 characters or fewer is at least 0.67, or if characters in repeated lines are at least 0.1 of the
characters (newlines not counted). datatrove's default for the last is 0.01, not the paper's 0.1, and it adds a
fourth rule (newlines per word > 0.3, "list_ratio") the paper does not describe; campaign applies the paper's
three.

Source: Penedo et al. 2024 (FineWeb), arXiv 2406.17557 §3; huggingface/datatrove 0.10.1
`pipeline/filters/fineweb_quality_filter.py`.
"""

from __future__ import annotations

import bisect
from operator import itemgetter

from campaign.config import FineWebConfig
from campaign.data.filters.base import Rejection, TextStats, _duplicates

# Reason codes
FINEWEB_LINE_PUNCT_RATIO = "fineweb_line_punct_ratio"
FINEWEB_SHORT_LINE_RATIO = "fineweb_short_line_ratio"
FINEWEB_CHAR_DUP_RATIO = "fineweb_char_dup_ratio"

# Terminal punctuation for FineWeb's line rule: Latin, CJK and other scripts' full stops, closing quotes.
TERMINAL_PUNCTUATION = tuple(".!?;:\"'”’»)]…。！？｡︒﹒．।॥։؟۔܀܁܂።፧፨᙮᠃᠉⁇⁈⁉‼‽")


def check_fineweb(stats: TextStats, cfg: FineWebConfig) -> Rejection | None:
    lines = stats.lines
    if not lines:
        return Rejection(FINEWEB_LINE_PUNCT_RATIO, "no non-empty lines")
    n = len(lines)
    frac = sum(map(_TERMINAL_SET.__contains__, map(itemgetter(-1), lines))) / n  # lines are non-empty
    if frac <= cfg.min_line_punct_ratio:
        return Rejection(
            FINEWEB_LINE_PUNCT_RATIO,
            f"lines ending in punctuation {frac:.3f} <= {cfg.min_line_punct_ratio:g}",
        )
    frac = bisect.bisect_right(sorted(map(len, lines)), cfg.short_line_chars) / n
    if frac >= cfg.max_short_line_fraction:
        return Rejection(
            FINEWEB_SHORT_LINE_RATIO,
            f"lines of <= {cfg.short_line_chars} chars {frac:.3f} >= {cfg.max_short_line_fraction:g}",
        )
    _, dup_chars = _duplicates(lines)
    denom = len(stats.text) - stats.text.count("\n")
    frac = dup_chars / denom if denom else 0.0
    if frac >= cfg.max_duplicate_line_char_fraction:
        return Rejection(
            FINEWEB_CHAR_DUP_RATIO,
            f"characters in repeated lines {frac:.3f} >= {cfg.max_duplicate_line_char_fraction:g}",
        )
    return None


_TERMINAL_SET = frozenset(TERMINAL_PUNCTUATION)  # every mark is one character

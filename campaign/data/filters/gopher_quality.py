"""Gopher quality rules (MassiveWeb's quality filter), in datatrove's order: document length, mean word length,
symbols per word, bullet and ellipsis lines, words with a letter, stop words.

Mean word length over words (punctuation attached, so slightly above datatrove's); "#" and ellipsis ("..." or
"…") occurrences per word, tested separately; bullet lines = lines whose first non-space character is one of
`BULLETS`, of all lines; end-ellipsis lines = lines ending in "..." or "…", of all lines; alpha words = words
with at least one alphabetic character (`str.isalpha`). The stop-word rule is the paper's: the document must
contain at least `min_stop_words` *different* words of {the, be, to, of, and, that, have, with} (Rae et al.
2021, App. A: "do not contain at least two of the following English words"), matched case-insensitively where
not part of a longer word (so "The", "(of)" and "to." count, and so does "to" in "up-to-date"). datatrove
0.10.1 counts occurrences instead, so "the the" passes there and fails here.

Source: Rae et al. 2021 (Gopher), arXiv 2112.11446, App. A; huggingface/datatrove 0.10.1
`pipeline/filters/gopher_quality_filter.py`.
"""

from __future__ import annotations

from campaign.config import CleaningConfig
from campaign.data.filters.base import Rejection, TextStats

# Reason codes, datatrove's names
GOPHER_SHORT_DOC = "gopher_short_doc"
GOPHER_LONG_DOC = "gopher_long_doc"
GOPHER_BELOW_AVG_THRESHOLD = "gopher_below_avg_threshold"
GOPHER_ABOVE_AVG_THRESHOLD = "gopher_above_avg_threshold"
GOPHER_TOO_MANY_HASHES = "gopher_too_many_hashes"
GOPHER_TOO_MANY_ELLIPSIS = "gopher_too_many_ellipsis"
GOPHER_TOO_MANY_BULLETS = "gopher_too_many_bullets"
GOPHER_TOO_MANY_END_ELLIPSIS = "gopher_too_many_end_ellipsis"
GOPHER_BELOW_ALPHA_THRESHOLD = "gopher_below_alpha_threshold"
GOPHER_ENOUGH_STOP_WORDS = "gopher_enough_stop_words"


def check_quality(stats: TextStats, cfg: CleaningConfig) -> Rejection | None:
    """Gopher quality rules in datatrove's order."""
    n_words = stats.n_words
    if n_words < cfg.min_words:
        return Rejection(GOPHER_SHORT_DOC, f"{n_words} words < min_words {cfg.min_words}")
    if n_words > cfg.max_words:
        return Rejection(GOPHER_LONG_DOC, f"{n_words:,} words > max_words {cfg.max_words:,}")
    if n_words:
        mean = stats.mean_word_length
        if mean < cfg.min_mean_word_length:
            return Rejection(
                GOPHER_BELOW_AVG_THRESHOLD, f"mean word length {mean:.2f} < {cfg.min_mean_word_length:g}"
            )
        if mean > cfg.max_mean_word_length:
            return Rejection(
                GOPHER_ABOVE_AVG_THRESHOLD, f"mean word length {mean:.2f} > {cfg.max_mean_word_length:g}"
            )
    ratio = stats.n_hashes / n_words if n_words else 0.0
    if ratio > cfg.max_symbol_word_ratio:
        return Rejection(
            GOPHER_TOO_MANY_HASHES,
            f"'#' per word {ratio:.3f} > {cfg.max_symbol_word_ratio:g} ({stats.n_hashes} in {n_words})",
        )
    ratio = stats.n_ellipsis / n_words if n_words else 0.0
    if ratio > cfg.max_symbol_word_ratio:
        return Rejection(
            GOPHER_TOO_MANY_ELLIPSIS,
            f"ellipses per word {ratio:.3f} > {cfg.max_symbol_word_ratio:g} "
            f"({stats.n_ellipsis} in {n_words})",
        )
    n_lines = len(stats.lines)
    if n_lines:
        # Upper bounds first (a bullet line holds a bullet character; a line ending in an ellipsis holds one
        # of the ellipses `n_ellipsis` counted): the exact line counts only when a bound could fail the rule.
        frac = stats.n_bullet_chars / n_lines
        if frac > cfg.max_bullet_lines_fraction:
            frac = stats.n_bullet_lines / n_lines
        if frac > cfg.max_bullet_lines_fraction:
            return Rejection(
                GOPHER_TOO_MANY_BULLETS,
                f"bullet lines {frac:.3f} > {cfg.max_bullet_lines_fraction:g} "
                f"({stats.n_bullet_lines} of {n_lines})",
            )
        frac = stats.n_ellipsis / n_lines
        if frac > cfg.max_ellipsis_lines_fraction:
            frac = stats.n_end_ellipsis_lines / n_lines
        if frac > cfg.max_ellipsis_lines_fraction:
            return Rejection(
                GOPHER_TOO_MANY_END_ELLIPSIS,
                f"lines ending in an ellipsis {frac:.3f} > {cfg.max_ellipsis_lines_fraction:g}",
            )
    fraction = stats.n_alpha_words / n_words if n_words else 0.0
    if fraction < cfg.min_alpha_word_fraction:
        return Rejection(
            GOPHER_BELOW_ALPHA_THRESHOLD,
            f"words with a letter {fraction:.3f} < {cfg.min_alpha_word_fraction:g}",
        )
    if cfg.min_stop_words:
        found = stats.stop_words_present(cfg.min_stop_words)
        if len(found) < cfg.min_stop_words:
            shown = ", ".join(sorted(found)) or "none"
            return Rejection(
                GOPHER_ENOUGH_STOP_WORDS,
                f"{len(found)} different stop words ({shown}) < min_stop_words {cfg.min_stop_words}",
            )
    return None

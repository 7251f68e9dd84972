"""Document quality rules: Gopher quality, Gopher repetition, C4 and FineWeb, each group switchable.

One module per rule group (`gopher_quality`, `gopher_repetition`, `c4`, `fineweb`), in the manner of datatrove's
one-filter-per-file layout; `base` holds what they all read (`Rejection`, the lazily measured `TextStats`),
`measures` the word and n-gram measures of a whole batch, `kernels` their compiled (Numba) passes, and `engine`
the pipeline order and the batch runner (`filter_batch`, `apply_filters`). Reason codes are named like
datatrove's `stats.json` counters (with a "c4_"/"fineweb_" prefix) so counts can be compared rule by rule.
The steps around the rule groups have a module each too, run by the shard worker (`campaign.data.shards`):
`url_filter` (block lists), `language` (language identification), `decontaminate` (benchmark n-grams) and `pii`
(redaction of kept text); their order and settings: docs/prepare.md.

Source: Rae et al. 2021 (Gopher), arXiv 2112.11446, App. A and Table A1; Raffel et al. 2020 (C4), JMLR 21
§2.2; Penedo et al. 2024 (FineWeb), arXiv 2406.17557 §3; huggingface/datatrove 0.10.1 `pipeline/filters`.
"""

from campaign.data.filters.base import (
    BULLETS,
    ELLIPSES,
    STOP_WORDS,
    TOO_LARGE,
    Rejection,
    TextStats,
)
from campaign.data.filters.c4 import (
    C4_CURLY_BRACKET,
    C4_END_PUNCTUATION,
    C4_LOREM_IPSUM,
    C4_POLICY_SUBSTRINGS,
    C4_TOO_FEW_SENTENCES,
    apply_c4,
)
from campaign.data.filters.engine import (
    CHUNK_CHARS,
    FILTER_REASONS,
    FilterResult,
    apply_filters,
    check_document,
    filter_batch,
    filter_reasons,
)
from campaign.data.filters.fineweb import (
    FINEWEB_CHAR_DUP_RATIO,
    FINEWEB_LINE_PUNCT_RATIO,
    FINEWEB_SHORT_LINE_RATIO,
    TERMINAL_PUNCTUATION,
    check_fineweb,
)
from campaign.data.filters.gopher_quality import (
    GOPHER_ABOVE_AVG_THRESHOLD,
    GOPHER_BELOW_ALPHA_THRESHOLD,
    GOPHER_BELOW_AVG_THRESHOLD,
    GOPHER_ENOUGH_STOP_WORDS,
    GOPHER_LONG_DOC,
    GOPHER_SHORT_DOC,
    GOPHER_TOO_MANY_BULLETS,
    GOPHER_TOO_MANY_ELLIPSIS,
    GOPHER_TOO_MANY_END_ELLIPSIS,
    GOPHER_TOO_MANY_HASHES,
    check_quality,
)
from campaign.data.filters.gopher_repetition import (
    DUP_LINE_CHAR_FRAC,
    DUP_LINE_FRAC,
    DUP_PARA_CHAR_FRAC,
    DUP_PARA_FRAC,
    DUPLICATED_NGRAMS,
    TOP_NGRAM,
    check_repetition,
)
from campaign.data.filters.measures import (
    ngram_tables,
    ngram_tables_numpy,
    split_words,
    word_tables,
    word_tables_vocab,
)

__all__ = [
    "BULLETS",
    "C4_CURLY_BRACKET",
    "C4_END_PUNCTUATION",
    "C4_LOREM_IPSUM",
    "C4_POLICY_SUBSTRINGS",
    "C4_TOO_FEW_SENTENCES",
    "CHUNK_CHARS",
    "DUPLICATED_NGRAMS",
    "DUP_LINE_CHAR_FRAC",
    "DUP_LINE_FRAC",
    "DUP_PARA_CHAR_FRAC",
    "DUP_PARA_FRAC",
    "ELLIPSES",
    "FILTER_REASONS",
    "FINEWEB_CHAR_DUP_RATIO",
    "FINEWEB_LINE_PUNCT_RATIO",
    "FINEWEB_SHORT_LINE_RATIO",
    "GOPHER_ABOVE_AVG_THRESHOLD",
    "GOPHER_BELOW_ALPHA_THRESHOLD",
    "GOPHER_BELOW_AVG_THRESHOLD",
    "GOPHER_ENOUGH_STOP_WORDS",
    "GOPHER_LONG_DOC",
    "GOPHER_SHORT_DOC",
    "GOPHER_TOO_MANY_BULLETS",
    "GOPHER_TOO_MANY_ELLIPSIS",
    "GOPHER_TOO_MANY_END_ELLIPSIS",
    "GOPHER_TOO_MANY_HASHES",
    "STOP_WORDS",
    "TERMINAL_PUNCTUATION",
    "TOO_LARGE",
    "TOP_NGRAM",
    "FilterResult",
    "Rejection",
    "TextStats",
    "apply_c4",
    "apply_filters",
    "check_document",
    "check_fineweb",
    "check_quality",
    "check_repetition",
    "filter_batch",
    "filter_reasons",
    "ngram_tables",
    "ngram_tables_numpy",
    "split_words",
    "word_tables",
    "word_tables_vocab",
]

"""The `data:` section: sources, cleaning rules, deduplication, tokenizer; its production digest."""

from __future__ import annotations

import glob
import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from campaign.config.schema.base import WORKSPACE_PLACEHOLDER, Frozen, Source


class SourceConfig(Frozen):
    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Source name (lowercase, digits, - and _)."
    )
    path: str = Field(description="Glob of input files, relative to the config file or absolute.")
    format: Literal["jsonl", "parquet", "warc"] = Field(
        description="File format: JSONL (optionally .gz), Parquet, or WARC web archives (.warc, .warc.gz; the main "
        "text of each HTML response is extracted, its URL kept)."
    )
    text_field: str = Field("text", description="Field that holds the document text.")
    id_field: str | None = Field(None, description="Field that holds a document id (else file:line).")
    url_field: str | None = Field(
        None, description="Field that holds the document's URL, read for cleaning.url_filter (else no URL)."
    )
    weight: float = Field(ge=1e-6, le=1e6, description="Planned share of training tokens from this source.")


class GopherRepetitionConfig(Frozen):
    """Gopher repetition filter (Rae et al. 2021, Table A1): remove a document when a fraction is above its limit."""

    enabled: bool = Field(True, description="Apply the Gopher repetition rules.")
    max_duplicate_line_fraction: float = Field(
        0.3, ge=0, le=1, description="Lines that repeat an earlier line, of all lines."
    )
    max_duplicate_paragraph_fraction: float = Field(
        0.3, ge=0, le=1, description="Paragraphs that repeat an earlier paragraph, of all paragraphs."
    )
    max_duplicate_line_char_fraction: float = Field(
        0.2, ge=0, le=1, description="Characters in repeated lines, of all characters."
    )
    max_duplicate_paragraph_char_fraction: float = Field(
        0.2, ge=0, le=1, description="Characters in repeated paragraphs, of all characters."
    )
    top_ngram_char_fractions: tuple[tuple[int, float], ...] = Field(
        ((2, 0.20), (3, 0.18), (4, 0.16)),
        description="(n, limit): characters of the most frequent word n-gram (times its count), of all characters.",
    )
    duplicate_ngram_char_fractions: tuple[tuple[int, float], ...] = Field(
        ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)),
        description="(n, limit): characters covered by word n-grams that occur more than once, of all characters.",
    )
    source: Source = Field(
        "Gopher (Rae et al. 2021, arXiv 2112.11446, Table A1)", description="Thresholds' origin."
    )

    @field_validator("top_ngram_char_fractions", "duplicate_ngram_char_fractions")
    @classmethod
    def _ngram_limits(cls, value: tuple[tuple[int, float], ...]) -> tuple[tuple[int, float], ...]:
        for n, limit in value:
            if not 1 <= n <= 20 or not 0 <= limit <= 1:
                raise ValueError(f"({n}, {limit}): n must be 1..20 and the limit 0..1")
        return value


class C4Config(Frozen):
    """C4's page rules (Raffel et al. 2020, JMLR 21, sec. 2.2) as datatrove's C4QualityFilter applies them.

    Line rules edit the kept text (drop lines); page rules remove the document."""

    enabled: bool = Field(False, description="Apply the C4 rules.")
    filter_no_terminal_punct: bool = Field(
        False, description="Drop lines not ending in terminal punctuation (FineWeb ran C4 with this off)."
    )
    min_words_per_line: int = Field(3, ge=0, le=1000, description="Drop lines with fewer words (paper: 3).")
    max_word_length: int = Field(
        1000, ge=1, le=1_000_000, description="Drop lines with a longer word (chars)."
    )
    min_sentences: int = Field(5, ge=0, le=1000, description="Remove pages with fewer sentences (paper: 5).")
    filter_javascript: bool = Field(True, description="Drop lines that contain 'javascript'.")
    filter_lorem_ipsum: bool = Field(True, description="Remove pages that contain 'lorem ipsum'.")
    filter_curly_bracket: bool = Field(True, description="Remove pages that contain '{'.")
    filter_policy: bool = Field(
        True, description="Drop lines with a policy phrase (terms of use, cookies...)."
    )
    source: Source = Field(
        "C4 (Raffel et al. 2020, JMLR 21, sec. 2.2); datatrove C4QualityFilter",
        description="Thresholds' origin.",
    )


class FineWebConfig(Frozen):
    """FineWeb's three custom rules (Penedo et al. 2024, arXiv 2406.17557, sec. 3)."""

    enabled: bool = Field(False, description="Apply the FineWeb rules.")
    min_line_punct_ratio: float = Field(
        0.12, ge=0, le=1, description="Remove if at most this fraction of lines end in terminal punctuation."
    )
    max_short_line_fraction: float = Field(
        0.67,
        ge=0,
        le=1,
        description="Remove if at least this fraction of lines are 30 characters or shorter.",
    )
    short_line_chars: int = Field(30, ge=1, le=10_000, description="A line this long or shorter is short.")
    max_duplicate_line_char_fraction: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Remove if at least this fraction of characters are in repeated lines (paper 0.1; datatrove "
        "0.10.1 defaults to 0.01).",
    )
    source: Source = Field(
        "FineWeb (Penedo et al. 2024, arXiv 2406.17557, sec. 3)", description="Thresholds' origin."
    )


class NearDedupConfig(Frozen):
    """MinHash near-duplicate removal over word n-grams with LSH banding, clusters joined transitively."""

    enabled: bool = Field(True, description="Remove near-duplicates (one kept per cluster).")
    ngram: int = Field(5, ge=1, le=50, description="Words per shingle (FineWeb: 5).")
    bands: int = Field(14, ge=1, le=1000, description="LSH bands (FineWeb: 14).")
    rows: int = Field(8, ge=1, le=100, description="Hashes per band (FineWeb: 8).")
    seed: int = Field(1, ge=0, le=2**31 - 1, description="Seed of the hash permutations.")
    source: Source = Field(
        "FineWeb (Penedo et al. 2024, sec. 3): 5-grams, 14 bands x 8 hashes",
        description="Parameters' origin.",
    )


class LanguagesConfig(Frozen):
    """Language identification with py3langid's shipped model (offline): keep documents whose most likely language
    is one of `keep` with a probability of at least `min_score`."""

    enabled: bool = Field(False, description="Identify each document's language and apply the rule below.")
    keep: tuple[str, ...] = Field(
        ("en",), description="ISO 639-1 codes of the languages to keep (py3langid's 97 languages)."
    )
    min_score: float = Field(
        0.65, ge=0, le=1, description="Remove a document whose language's probability is below this."
    )
    prefix_chars: int = Field(
        2000,
        ge=0,
        le=10**9,
        description="Identify the language from the document's first this many characters, cut back to a "
        "whitespace (0: the whole text); docs/prepare.md#language says what the cut costs in agreement.",
    )
    source: Source = Field(
        "FineWeb (Penedo et al. 2024, sec. 3): keep English at score >= 0.65; model: langid.py (Lui and Baldwin "
        "2012) as py3langid ships it",
        description="Thresholds' origin.",
    )


class PiiConfig(Frozen):
    """PII redaction in kept text, as datatrove's PIIFormatter: each match replaced by a placeholder."""

    enabled: bool = Field(False, description="Replace emails, IP addresses and phone numbers in kept text.")
    emails: bool = Field(True, description="Replace email addresses with `email_placeholder`.")
    ip_addresses: bool = Field(True, description="Replace public IPv4 and IPv6 addresses.")
    phone_numbers: bool = Field(
        True, description="Replace phone numbers (7 to 15 digits, separators allowed)."
    )
    email_placeholder: str = Field("email@example.com", description="Replaces an email address.")
    ip_placeholder: str = Field("0.0.0.0", description="Replaces an IP address (datatrove draws one of 6).")
    phone_placeholder: str = Field("<PHONE_NUMBER>", description="Replaces a phone number.")
    source: Source = Field(
        "huggingface/datatrove 0.10.1 pipeline/formatters/pii.py (PIIFormatter)", description="Rules' origin."
    )


class UrlFilterConfig(Frozen):
    """Remove documents whose URL (a source's `url_field`) matches a block list; each list is a file, one rule a
    line, '#' starts a comment."""

    domains_file: str | None = Field(
        None, description="Blocked domains, one a line: a domain also blocks its subdomains."
    )
    substrings_file: str | None = Field(
        None, description="Blocked URL substrings, one a line (case-insensitive)."
    )
    regexes_file: str | None = Field(
        None,
        description="Blocked URL regexes (RE2: Python syntax without backreferences or look-around), one a line.",
    )
    source: Source = Field(
        "FineWeb (Penedo et al. 2024, sec. 3): UT1 block list; datatrove URLFilter",
        description="Rules' origin.",
    )

    @property
    def enabled(self) -> bool:
        return bool(self.domains_file or self.substrings_file or self.regexes_file)


class BenchmarkFileConfig(Frozen):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Benchmark name, used in reasons.")
    path: str = Field(
        description="JSONL or Parquet file of evaluation texts, relative to the config or absolute."
    )
    text_fields: tuple[str, ...] = Field(
        ("text",), min_length=1, description="Fields whose texts are matched (e.g. question, passage)."
    )


class DecontaminateConfig(Frozen):
    """Remove training documents that share a word n-gram with an evaluation text."""

    benchmarks: tuple[BenchmarkFileConfig, ...] = Field((), description="Evaluation files; none: off.")
    ngram: int = Field(13, ge=5, le=50, description="Words per n-gram (GPT-3: 13).")
    source: Source = Field(
        "GPT-3 (Brown et al. 2020, arXiv 2005.14165, App. C): 13-gram overlap", description="Rule's origin."
    )


class CleaningConfig(Frozen):
    max_record_bytes: int = Field(
        64 * 2**20,
        ge=1024,
        le=2**31 - 1,
        description="Reject a JSONL line longer than this (bytes) without holding it in memory.",
    )
    max_doc_bytes: int = Field(
        1_000_000, gt=0, le=2**31 - 1, description="Reject documents larger than this, UTF-8 bytes."
    )
    gopher_quality: bool = Field(True, description="Apply the Gopher quality rules below.")
    min_words: int = Field(50, ge=0, le=10**9, description="Reject documents with fewer words (Gopher: 50).")
    max_words: int = Field(
        100_000, gt=0, le=10**9, description="Reject documents with more words (Gopher: 100,000)."
    )
    min_mean_word_length: float = Field(
        3.0, ge=0, le=1000, description="Gopher: mean word length at least 3."
    )
    max_mean_word_length: float = Field(
        10.0, gt=0, le=1000, description="Gopher: mean word length at most 10."
    )
    max_symbol_word_ratio: float = Field(
        0.1, ge=0, le=1000, description="Gopher: '#' or ellipsis per word at most 0.1."
    )
    max_bullet_lines_fraction: float = Field(
        0.9, ge=0, le=1, description="Gopher: at most 90% of lines start with a bullet point."
    )
    max_ellipsis_lines_fraction: float = Field(
        0.3, ge=0, le=1, description="Gopher: at most 30% of lines end with an ellipsis."
    )
    min_alpha_word_fraction: float = Field(0.8, ge=0, le=1, description="Gopher: 80% of words have a letter.")
    min_stop_words: int = Field(
        2,
        ge=0,
        le=8,
        description="Gopher: at least 2 of the, be, to, of, and, that, have, with (distinct words).",
    )
    gopher_repetition: GopherRepetitionConfig = GopherRepetitionConfig()
    c4: C4Config = C4Config()
    fineweb: FineWebConfig = FineWebConfig()
    languages: LanguagesConfig = LanguagesConfig()
    pii: PiiConfig = PiiConfig()
    url_filter: UrlFilterConfig = UrlFilterConfig()
    exact_dedup: bool = Field(
        True, description="Drop exact duplicates (after normalisation), keeping the first."
    )
    near_dedup: NearDedupConfig = NearDedupConfig()
    source: Source = Field(
        "Gopher (Rae et al. 2021, arXiv 2112.11446, App. A)", description="Thresholds' origin."
    )


TOKENIZER_SPECS = ("cl100k_base", "o200k_base", "utf8-bytes", "gpt2-pretokens")


class DataConfig(Frozen):
    sources: tuple[SourceConfig, ...] = Field(min_length=1, description="Input sources.")
    demo_corpus_dir: str | None = Field(
        None,
        description="Demo only: prepare first writes the synthetic demo corpus here (relative to the config).",
    )
    cleaning: CleaningConfig = CleaningConfig()
    decontaminate: DecontaminateConfig = DecontaminateConfig()
    tokenizer: str = Field(
        "gpt2-pretokens",
        description="Token counter: cl100k_base or o200k_base (bpe-openai, offline), a tokenizer.json path, "
        "utf8-bytes, or gpt2-pretokens (a fast estimate: GPT-2 pre-tokenizer pieces).",
    )
    shard_bytes: int = Field(
        64 * 2**20, ge=2**16, le=2**40, description="Split input files into shards of about this many bytes."
    )
    batch_docs: int = Field(
        2048, ge=1, le=1_000_000, description="Documents per Arrow batch inside a shard (bounds memory)."
    )
    training_shards: bool = Field(
        False,
        description="Also write each source's clean documents as tokenized training shards (Megatron's indexed "
        "dataset, .bin + .idx, under data/tokenized/) and a blend file of the source weights; needs a real "
        "tokenizer (not gpt2-pretokens).",
    )

    @model_validator(mode="after")
    def _shards_need_ids(self) -> DataConfig:
        if self.training_shards and self.tokenizer == "gpt2-pretokens":
            raise ValueError(
                "training_shards needs token ids and gpt2-pretokens only counts: set data.tokenizer to "
                "cl100k_base, o200k_base, utf8-bytes or a tokenizer.json, or training_shards: false"
            )
        return self

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        if value in TOKENIZER_SPECS or value.endswith(".json"):
            return value
        raise ValueError(
            f"unknown tokenizer {value!r}; use one of {', '.join(TOKENIZER_SPECS)} "
            "or the path of a tokenizer.json"
        )

    def in_workspace(self, root: Path) -> DataConfig:
        """This section with `{workspace}` at the start of a path replaced by the workspace folder."""

        def place(path: str, pattern: bool) -> str:
            if path.startswith(WORKSPACE_PLACEHOLDER):
                # A source path is a glob: the workspace part is escaped so that '[', '*' or '?' in a folder
                # name match only that folder (a workspace `ws[1]` must never read `ws1`'s files).
                base = glob.escape(str(root)) if pattern else str(root)
                return str(Path(base) / path[len(WORKSPACE_PLACEHOLDER) :].lstrip("/\\"))
            return path

        sources = tuple(s.model_copy(update={"path": place(s.path, True)}) for s in self.sources)
        demo = place(self.demo_corpus_dir, False) if self.demo_corpus_dir else None
        return self.model_copy(update={"sources": sources, "demo_corpus_dir": demo})

    def production_digest(self) -> str:
        """sha256 of what decides the prepared data: every key of this section except the mixture weights
        (the mixture gate judges those against the current config, so they may change without a new prepare)."""
        dumped = self.model_dump(mode="json", by_alias=True)
        for source in dumped["sources"]:
            source.pop("weight", None)
        canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @field_validator("sources")
    @classmethod
    def _unique_sources(cls, value: tuple[SourceConfig, ...]) -> tuple[SourceConfig, ...]:
        names = [s.name for s in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {', '.join(dupes)}")
        return value

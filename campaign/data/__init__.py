"""Data preparation: read sources, normalise, filter (Gopher subset), exact-dedup, count tokens, write a manifest."""

from campaign.data.dedup import EXACT_DUPLICATE, ExactDeduplicator, text_sha256
from campaign.data.demo_corpus import write_demo_corpus
from campaign.data.filters import FILTER_REASONS, RULES, Rejection, TextStats, check_document
from campaign.data.manifest import (
    Manifest,
    clean_file_hashes,
    data_digest,
    digest_of_hashes,
    read_manifest,
    verify_clean_files,
)
from campaign.data.mixture import mixture_report
from campaign.data.normalise import normalise_text
from campaign.data.pipeline import (
    CLEAN_SCHEMA,
    REASONS,
    REJECTED_SCHEMA,
    PreparedData,
    prepare_source,
    prepare_sources,
    write_prepared,
)
from campaign.data.readers import READER_REASONS, RawDocument, read_source, source_files
from campaign.data.tokens import TOKENIZER_BACKEND, count_tokens, count_tokens_many

__all__ = [
    "CLEAN_SCHEMA", "EXACT_DUPLICATE", "FILTER_REASONS", "READER_REASONS", "REASONS", "REJECTED_SCHEMA", "RULES",
    "TOKENIZER_BACKEND", "ExactDeduplicator", "Manifest", "PreparedData", "RawDocument", "Rejection", "TextStats",
    "check_document", "clean_file_hashes", "count_tokens", "count_tokens_many", "data_digest",
    "digest_of_hashes", "mixture_report", "normalise_text",
    "prepare_source", "prepare_sources", "read_manifest", "read_source", "source_files", "text_sha256",
    "verify_clean_files", "write_demo_corpus", "write_prepared",
]

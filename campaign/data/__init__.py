"""Data preparation: shard the inputs, normalise, filter, dedup (exact and near), count tokens, write a manifest."""

from campaign.data.dedup import EXACT_DUPLICATE, ExactDeduplicator, text_sha256
from campaign.data.demo_corpus import write_demo_corpus
from campaign.data.filters import FILTER_REASONS, Rejection, TextStats, apply_filters, check_document
from campaign.data.inputs import Shard, expand_glob, plan_shards
from campaign.data.manifest import (
    Manifest,
    read_manifest,
)
from campaign.data.mixture import mixture_report
from campaign.data.normalise import normalise_text
from campaign.data.pipeline import (
    NEAR_DUPLICATE,
    REASONS,
    dedup_pass,
    finalise_source,
    plan_run,
    prepare_data,
    write_run_manifest,
)
from campaign.data.readers import READER_REASONS, RawDocument, read_source, source_files
from campaign.data.shards import CLEAN_SCHEMA, REJECTED_SCHEMA, ShardSummary, run_shard
from campaign.data.tokens import TOKENIZER_BACKEND, count_tokens, count_tokens_many

__all__ = [
    "CLEAN_SCHEMA",
    "EXACT_DUPLICATE",
    "FILTER_REASONS",
    "NEAR_DUPLICATE",
    "READER_REASONS",
    "REASONS",
    "REJECTED_SCHEMA",
    "TOKENIZER_BACKEND",
    "ExactDeduplicator",
    "Manifest",
    "RawDocument",
    "Rejection",
    "Shard",
    "ShardSummary",
    "TextStats",
    "apply_filters",
    "check_document",
    "count_tokens",
    "count_tokens_many",
    "dedup_pass",
    "expand_glob",
    "finalise_source",
    "mixture_report",
    "normalise_text",
    "plan_run",
    "plan_shards",
    "prepare_data",
    "read_manifest",
    "read_source",
    "run_shard",
    "source_files",
    "text_sha256",
    "write_demo_corpus",
    "write_run_manifest",
]

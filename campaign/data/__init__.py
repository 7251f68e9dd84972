"""Data preparation: shard the inputs, normalise, filter, dedup (exact and near), count tokens, write a manifest.

The names below are imported from their module on first use (PEP 562): a command that only reads a manifest
(every stage checks one before its flow starts) does not import the filters, the dedup pass and the tokenizer."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_MODULE_OF = {
    "CLEAN_SCHEMA": "shards",
    "EXACT_DUPLICATE": "dedup",
    "ExactDeduplicator": "dedup",
    "FILTER_REASONS": "filters",
    "Manifest": "manifest",
    "NEAR_DUPLICATE": "pipeline",
    "READER_REASONS": "readers",
    "REASONS": "pipeline",
    "REJECTED_SCHEMA": "shards",
    "RawDocument": "readers",
    "Rejection": "filters",
    "Shard": "inputs",
    "ShardSummary": "shards",
    "TOKENIZER_BACKEND": "tokens",
    "TextStats": "filters",
    "apply_filters": "filters",
    "check_document": "filters",
    "count_tokens": "tokens",
    "count_tokens_many": "tokens",
    "dedup_pass": "pipeline",
    "expand_glob": "inputs",
    "finalise_source": "pipeline",
    "mixture_report": "mixture",
    "normalise_text": "normalise",
    "plan_run": "pipeline",
    "plan_shards": "inputs",
    "prepare_data": "pipeline",
    "read_manifest": "manifest",
    "read_source": "readers",
    "run_shard": "shards",
    "source_files": "readers",
    "text_sha256": "dedup",
    "write_demo_corpus": "demo_corpus",
    "write_run_manifest": "pipeline",
}

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


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once imported, an ordinary attribute
    return value

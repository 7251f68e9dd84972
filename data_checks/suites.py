"""The expectations that clean training data must meet, as plain specs built from the campaign config.

Kept free of Great Expectations so the specs are testable and readable; `runner.py` turns them into a GX suite.
"""

from __future__ import annotations

from typing import Any

from campaign.config import CampaignConfig

Spec = dict[str, Any]  # {"type": "expect_...", "kwargs": {...}}


def clean_data_suite(config: CampaignConfig) -> list[Spec | None]:  # None: a check this config leaves out
    cleaning = config.data.cleaning
    sources = [s.name for s in config.data.sources]
    return [
        {
            "type": "expect_table_row_count_to_be_between",
            "kwargs": {"min_value": config.gates.data.min_documents},
        },
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "doc_id"}},
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "doc_id"}},
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "text"}},
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "text_sha256"}}
        if cleaning.exact_dedup
        else None,
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "source", "value_set": sources}},
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "n_words", "min_value": cleaning.min_words, "max_value": cleaning.max_words},
        },
        {
            "type": "expect_column_values_to_be_between",
            "kwargs": {"column": "n_bytes", "min_value": 1, "max_value": cleaning.max_doc_bytes},
        },
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "n_tokens", "min_value": 1}},
    ]


def suite_specs(config: CampaignConfig) -> list[Spec]:
    return [s for s in clean_data_suite(config) if s is not None]

"""The Great Expectations suite built from the config, run on good and bad clean data."""

import pandas as pd

from campaign.config import load_config
from data_checks.runner import summarise, validate_frame
from data_checks.suites import suite_specs
from tests.helpers.paths import DEMO


def _frame(n: int = 60) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "doc_id": [f"web/a.jsonl:{i}" for i in range(n)],
            "source": ["web"] * n,
            "text": ["x " * 60] * n,
            "n_words": [60] * n,
            "n_tokens": [70] * n,
            "n_bytes": [120] * n,
            "text_sha256": [f"{i:064x}" for i in range(n)],
        }
    )


def test_suite_passes_on_clean_data():
    result = validate_frame(_frame(), suite_specs(load_config(DEMO).config))
    assert result["success"] and summarise(result).endswith("all passed")


def test_suite_names_each_failed_expectation():
    bad = _frame()
    bad.loc[3, "doc_id"] = bad.loc[2, "doc_id"]  # duplicate id
    bad.loc[5, "source"] = "unplanned"  # unknown source
    bad.loc[7, "n_words"] = 3  # shorter than the cleaning rule allows
    result = validate_frame(bad, suite_specs(load_config(DEMO).config))
    assert not result["success"]
    text = summarise(result)
    assert "expect_column_values_to_be_unique(doc_id)" in text
    assert "expect_column_values_to_be_in_set(source): 1 unexpected, e.g. ['unplanned']" in text
    assert "expect_column_values_to_be_between(n_words)" in text
    assert "row_count" not in text  # 60 rows, the demo needs 50


def test_too_few_documents_says_how_many_were_seen():
    config = load_config(DEMO, ["gates.data.min_documents=100"]).config
    text = summarise(validate_frame(_frame(), suite_specs(config)))
    assert text == "failed: expect_table_row_count_to_be_between: observed 60"

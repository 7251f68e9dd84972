"""Each gate's figure and threshold, as the validate artifacts and per-gate runs show them."""

import re

from campaign.config import load_config
from campaign.gate_report import gate_rows, gates_markdown
from campaign.gates import GateResult, SourceFigures, data_gates, plan_gates
from campaign.plan import make_plan
from data_checks.runner import bounds_text, observed_text
from tests.helpers.paths import DEMO


def _rows(overrides=("gates.data.min_documents=1000000",)):
    cfg = load_config(DEMO, list(overrides)).config
    plan = make_plan(cfg)
    figures = {
        "web": SourceFigures(
            n_kept=300, n_rejected=100, n_tokens=120_000, n_tokens_column=0, n_token_mismatches=0
        ),
        "docs": SourceFigures(
            n_kept=131, n_rejected=24, n_tokens=42_659, n_tokens_column=0, n_token_mismatches=0
        ),
    }
    results = [
        GateResult(
            "data_quality",
            False,
            "failed: expect_table_row_count_to_be_between: observed 431",
            {"n_rows": 431, "n_expectations": 9, "n_passed": 8},
        ),
        *data_gates(
            figures,
            {"web": 0.7, "docs": 0.3},
            cfg.gates.data.min_documents,
            cfg.gates.data.min_tokens,
            cfg.gates.data.max_rejected_fraction,
            cfg.gates.data.mixture_tolerance,
        ),
        *plan_gates(plan, [(v.rule, v.message) for v in plan.violations]),
    ]
    return cfg, gate_rows(results, cfg, plan)


def test_a_failed_gate_reads_its_figure_against_its_threshold_on_one_line():
    _, rows = _rows()
    volume = next(r for r in rows if r.gate == "data_volume")
    assert not volume.passed
    assert volume.figure.startswith("431 documents, 162,659 tokens, 22.3 % rejected")
    assert ">= 1,000,000 documents" in volume.threshold
    message = volume.message()
    assert message.startswith("data_volume FAIL: 431 documents") and "\n" not in message
    assert "gates.data.min_documents" in message  # the reason, with the config key to change


def test_memory_threshold_is_the_usable_share_of_hbm():
    _, rows = _rows(["gates.data.min_documents=1000000", "cluster.accelerator.hbm_gib=4"])
    memory = next(r for r in rows if r.gate == "memory")
    assert not memory.passed
    assert re.fullmatch(r"[\d.,]+ GiB per GPU", memory.figure)
    assert memory.threshold.startswith("<= 3.8 GiB (95 % of 4 GiB HBM)")


def test_gates_detail_is_a_markdown_table_with_rounded_numbers_not_a_dump():
    cfg, rows = _rows()
    md = gates_markdown(
        rows,
        "a" * 64,
        "b" * 64,
        cfg.name,
        {"Data Docs": "/ws/checks/data_docs/index.html", "docs": "https://example.org/d"},
    )
    lines = md.splitlines()
    assert lines[0] == "# Gates of `demo`: FAILED: data_quality, data_volume"
    assert "| gate | passed | figure | threshold |" in lines and "| --- | --- | --- | --- |" in lines
    assert sum(
        1 for line in lines if line.startswith(("| data_", "| layout", "| memory", "| schedule"))
    ) == len(rows)
    assert "('" not in md and "{'" not in md  # no tuples, no dicts
    assert not re.search(r"\d\.\d{5,}", md)  # no 16-digit floats
    assert "* Data Docs: `/ws/checks/data_docs/index.html`" in md and "file://" not in md  # a file: its path
    assert "[docs](https://example.org/d)" in md


def test_expectation_bounds_and_observed_values_are_readable():
    assert bounds_text({"column": "n_words", "min_value": 5, "max_value": 5000}) == "5 .. 5,000"
    assert bounds_text({"min_value": 30}) == ">= 30"
    assert bounds_text({"column": "source", "value_set": ["web", "docs"]}) == "in {web, docs}"
    assert bounds_text({"column": "doc_id"}) == ""
    row = {"unexpected_count": 2, "partial_unexpected": [3, 50], "observed_value": None}
    assert observed_text(row) == "2 unexpected, e.g. 3, 50"
    assert observed_text({"unexpected_count": 0, "partial_unexpected": [], "observed_value": 4310}) == "4,310"

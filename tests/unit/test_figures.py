"""Figures as a person reads them, the same in the terminal, the artifacts and the report."""

import math

from campaign.figures import num, pct, tokens, tokens_b
from campaign_cli.terminal import stage_summary


def test_token_counts_read_in_billions_with_n_a_for_missing():
    assert tokens_b(550e9) == "550.0 B"
    assert tokens_b(10_000e9) == "10,000.0 B"
    assert tokens_b(162_659) == "0.00016 B"  # not zero, so never shown as zero
    assert tokens_b(None) == "n/a" and tokens_b(math.nan) == "n/a"
    assert num(12345.678, 1) == "12,345.7" and pct(0.9613) == "96.1%"


def test_a_figure_that_is_not_zero_is_never_shown_as_zero():
    """A small real run's lost dollars, hours and MTBF: two significant digits where the usual digits round to 0."""
    assert num(0.0111, 0) == "0.011" and num(0.00424, 2) == "0.0042" and num(-0.004, 1) == "-0.004"
    assert num(0.0, 2) == "0.00" and num(0, 0) == "0"  # zero is zero
    assert num(0.6, 0) == "1" and num(0.05, 1) == "0.1"  # what rounds away from zero keeps the usual form
    assert num(1234.5, 0) == "1,234"


def test_a_small_token_count_is_shown_in_a_unit_that_shows_it():
    """A small real run's 81,920 tokens read "81.9 K", not "0.0 B"."""
    assert tokens(550e9) == "550.0 B" and tokens(2.5e6) == "2.5 M" and tokens(81_920) == "81.9 K"
    assert tokens(512) == "512 tokens" and tokens(0.0) == "0 tokens"
    assert tokens(None) == "n/a" and tokens(math.nan) == "n/a"


def test_the_run_line_says_billions_of_tokens_and_points_at_the_html_report():
    """Not "5.5e+11 of 5.5e+11 tokens trained", and the page a person opens, not the Markdown summary."""
    result = {
        "ettr": 0.9634,
        "tokens_trained": 550e9,
        "tokens_target": 550e9,
        "interruptions": {"unexpected": 5},
        "report": "workspace/demo/report/report.md",
        "report_html": "workspace/demo/report/report.html",
    }
    text = stage_summary("run", result)
    assert "550.0 B of 550.0 B tokens trained" in text and "e+" not in text
    assert text.splitlines()[-1] == "report: workspace/demo/report/report.html"


def test_a_private_servers_view_at_links_are_left_off_the_terminal():
    """A command's private Prefect server stops with it: its "View at" addresses would be dead links."""
    import logging

    from campaign_cli.terminal import _no_dead_links

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("prefect.flow_runs", logging.INFO, __file__, 1, msg, None, None)

    assert not _no_dead_links(record("View at http://127.0.0.1:41234/runs/flow-run/0b1c"))
    assert _no_dead_links(record("Beginning flow run 'commit-demo' for flow 'commit'"))
    assert _no_dead_links(record("report: workspace/demo/report/report.html"))


def test_execute_says_when_the_window_was_cancelled():
    """A later `campaign execute` of a cancelled real run reuses its record and says so."""
    from types import SimpleNamespace

    record = SimpleNamespace(
        commitment_id="c-1", reused=True, ettr=0.5, tokens_trained=2560.0, completed=False, end=""
    )
    assert "cancelled" not in stage_summary("execute", record)
    record.end = "cancelled: SIGTERM received"
    assert stage_summary("execute", record).endswith("; the window was cancelled: SIGTERM received")

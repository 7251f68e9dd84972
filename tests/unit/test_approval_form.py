"""The approval request laid out for the resume form's narrow modal: tables as lists, long digests in groups."""

from campaign.approval import ApprovalRequest, GateLine
from campaign.approval_form import tables_as_lists, wrappable

REQUEST = ApprovalRequest(
    campaign="demo",
    window_start="2027-01-03T00:00:00+00:00",
    window_end="2027-01-05T00:00:00+00:00",
    window_days=2.0,
    gpus=16,
    booked_gpus=24,
    expected_days=1.31,
    p90_days=1.62,
    cost_usd=2304.0,
    gpu_hour_usd=2.0,
    gates=(
        GateLine("schedule", True, "p90 1.62 days | within"),
        GateLine("memory", False, "62 GiB > 60 GiB"),
    ),
    config_digest="0123456789abcdef" * 4,
    data_digest="fedcba9876543210" * 4,
)


def test_every_table_row_becomes_a_list_item_with_every_figure() -> None:
    text = tables_as_lists(REQUEST.markdown())
    assert "|" not in text.replace("\\|", "")  # no table left
    assert "- **Window**: 2027-01-03T00:00:00+00:00 .. 2027-01-05T00:00:00+00:00 (2 days)" in text
    assert "- **schedule**: passed \u2014 p90 1.62 days \\| within" in text  # a pipe inside a cell stays one
    assert "- **memory**: **FAILED** \u2014 62 GiB &gt; 60 GiB" in text
    # Everything outside the tables is unchanged.
    for line in REQUEST.markdown().splitlines():
        if not line.startswith("|"):
            assert line in text.splitlines()


def test_a_long_digest_is_shown_in_groups_of_16_and_short_code_is_left_alone() -> None:
    text = wrappable(REQUEST.markdown())
    assert "`0123456789abcdef 0123456789abcdef 0123456789abcdef 0123456789abcdef`" in text
    assert wrappable("`abc123` and `0123456789abcdef0`") == "`abc123` and `0123456789abcdef0`"  # fits
    assert wrappable("`" + "a" * 40 + "`") == "`" + "a" * 16 + " " + "a" * 16 + " " + "a" * 8 + "`"

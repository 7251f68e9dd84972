"""The cluster calendar without Prefect: capacity over time, gaps and their cost, booking, refusals, the race."""

import itertools
import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaign import calendar as cal
from campaign.calendar.horizon import horizon, parse_moment
from campaign.config import load_config
from campaign.errors import CampaignError, ConfigError, Refused
from tests.helpers.examples import examples
from tests.helpers.paths import DEMO

T0 = datetime(2027, 1, 4, tzinfo=UTC)
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)
PRICING = cal.Pricing(8, 2.5, 75.0, cal.idle_node_w(8, 90, 2800, 1.2))


def _b(cid, nodes, start, end, **kw):
    return cal.Booking(
        f"b-{cid}", cid, kw.pop("kind", cal.CAMPAIGN), kw.pop("campaign", cid), nodes, start, end, **kw
    )


def _identity(total=32, **sets):
    overrides = [f"cluster.total_nodes={total}", *(f"{k}={v}" for k, v in sets.items())]
    return cal.cluster_identity(load_config(DEMO, overrides).config.cluster)


def _request(cid, nodes=19, start=T0, days=2.0, workspace=None):
    return cal.BookingRequest(
        commitment_id=cid,
        campaign="demo",
        nodes=nodes,
        duration=timedelta(days=days),
        start=start,
        workspace=workspace,
        config_digest="c" if workspace else None,
        data_digest="d" if workspace else None,
    )


# ------------------------------------------------------------------------------------------ pure timeline


def test_overlapping_bookings_share_capacity_and_a_third_is_blocked_by_both():
    a = _b("a", 19, T0, T0 + 2 * DAY)
    b = _b("b", 11, T0 + DAY, T0 + 3 * DAY)
    assert cal.blocking([a, b], T0, T0 + 2 * DAY, 2, 32) == []
    holders = cal.blocking([a, b], T0, T0 + 2 * DAY, 3, 32)
    assert {h.commitment_id for h in holders} == {"a", "b"}
    assert cal.earliest_fit([a, b], 19, DAY, 32, T0) == T0 + 2 * DAY  # 11 + 19 fits once a ends
    assert cal.earliest_fit([a, b], 22, DAY, 32, T0) == T0 + 3 * DAY


def test_cancelled_bookings_hold_nothing_and_an_early_finish_releases_the_rest():
    a = _b("a", 32, T0, T0 + 2 * DAY, status="cancelled")
    b = _b("b", 32, T0 + 2 * DAY, T0 + 4 * DAY, status="executed", actual_end=T0 + 3 * DAY)
    assert cal.earliest_fit([a, b], 32, DAY, 32, T0) == T0
    assert cal.earliest_fit([a, b], 32, 2 * DAY, 32, T0 + DAY) == T0 + 3 * DAY
    report = cal.calendar_report("x", 32, PRICING, [a, b], T0, T0 + 4 * DAY)
    early = [g for g in report.gaps if g.kind == "early_finish"]
    assert early == [
        replace(
            early[0],
            start="2027-01-07T00:00:00Z",
            end="2027-01-08T00:00:00Z",
            idle_nodes=32,
            released_by="b",
        )
    ]
    assert report.totals.early_finish_node_hours == 32 * 24


def test_each_gap_is_priced_to_the_cent():
    report = cal.calendar_report("x", 32, PRICING, [_b("a", 19, T0, T0 + DAY)], T0, T0 + 2 * DAY)
    first, second = report.gaps
    assert (first.idle_nodes, first.idle_node_hours) == (13, 13 * 24)
    idle_w = (8 * 90 + 2800) * 1.2
    for gap in report.gaps:
        expected = gap.idle_node_hours * 8 * 2.5 + gap.idle_node_hours * idle_w / 1e6 * 75
        assert abs(gap.cost_usd - expected) < 0.005
        assert (
            gap.cost_usd == round(gap.gpu_usd + gap.energy_usd, 2)
            or abs(gap.cost_usd - gap.gpu_usd - gap.energy_usd) <= 0.01
        )
    assert second.idle_nodes == 32 and second.cost_usd == round(32 * 24 * (20 + idle_w / 1e6 * 75), 2)


_moments = st.integers(0, 30 * 24 * 3600).map(lambda s: T0 + timedelta(seconds=s))


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 32),
            _moments,
            st.integers(1, 10 * 24 * 3600),
            st.sampled_from(["booked", "executed", "cancelled"]),
            st.integers(0, 10 * 24 * 3600),
        ),
        max_size=8,
    ),
    _moments,
    st.integers(1, 40 * 24 * 3600),
)
def test_busy_plus_idle_is_capacity_times_horizon_exactly(raw, h0, length):
    bookings = [
        _b(
            f"c{i}",
            n,
            s,
            s + timedelta(seconds=d),
            status=status,
            actual_end=(s + timedelta(seconds=min(a, d))) if status == "executed" else None,
        )
        for i, (n, s, d, status, a) in enumerate(raw)
    ]
    h1 = h0 + timedelta(seconds=length)
    report = cal.calendar_report("x", 400, PRICING, bookings, h0, h1)
    t = report.totals
    assert round((t.busy_node_hours + t.idle_node_hours) * 3600) == 400 * length
    assert abs(t.busy_node_hours + t.idle_node_hours - 400 * report.horizon.hours) < 1e-6
    assert abs(sum(g.idle_node_hours for g in report.gaps) - t.idle_node_hours) < 1e-6
    segs = cal.segments(bookings, h0, h1)
    assert segs[0].start == h0 and segs[-1].end == h1
    assert all(a.end == b.start for a, b in itertools.pairwise(segs))


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 32), _moments, st.integers(3600, 5 * 24 * 3600)), max_size=6),
    st.integers(1, 32),
    st.integers(3600, 5 * 24 * 3600),
)
def test_proposals_fit_and_nothing_earlier_does(raw, nodes, seconds):
    bookings = [_b(f"c{i}", n, s, s + timedelta(seconds=d)) for i, (n, s, d) in enumerate(raw)]
    duration = timedelta(seconds=seconds)
    first = cal.earliest_fit(bookings, nodes, duration, 32, T0)
    assert not cal.blocking(bookings, first, first + duration, nodes, 32)
    for t in sorted({T0} | {b.end for b in bookings} | {b.start for b in bookings}):
        if T0 <= t < first:
            assert cal.blocking(bookings, t, t + duration, nodes, 32), t
    tight = cal.least_idle_fit(bookings, nodes, duration, 32, T0)
    assert tight.start >= T0 and not cal.blocking(bookings, tight.start, tight.end, nodes, 32)


def test_least_idle_start_touches_its_neighbours():
    a = _b("a", 32, T0 + 5 * DAY, T0 + 6 * DAY)
    b = _b("b", 32, T0 + 8 * DAY, T0 + 9 * DAY)
    state = cal.CalendarState(Path("x"), "x", "d", 32, PRICING, (a, b))
    out = cal.propose(state, 32, 2 * DAY, T0, None)
    assert out.earliest.start == "2027-01-04T00:00:00Z"
    assert out.earliest.idle_after_h == 72.0
    assert out.earliest.gap_cost_usd == PRICING.cost(72 * 32).cost_usd
    assert out.least_idle.start == "2027-01-10T00:00:00Z"  # fills the hole between `a` and `b` exactly
    assert out.least_idle.gap_idle_node_hours == 0 and out.least_idle.gap_cost_usd == 0


# ------------------------------------------------------------------------------------------------ config


def test_total_nodes_defaults_to_nodes_plus_spares_and_cannot_be_smaller():
    cluster = load_config(DEMO).config.cluster
    assert cluster.capacity_nodes == 19 and cluster.booked_nodes == 19
    with pytest.raises(
        ConfigError, match=r"cluster.total_nodes: .*less than nodes \+ spare_nodes = 16 \+ 3 = 19"
    ):
        load_config(DEMO, ["cluster.total_nodes=10"])


def test_window_start_auto_is_accepted_and_simulated_from_midnight():
    from campaign.window import window_inputs

    config = load_config(DEMO, ["window.start=auto"]).config
    assert config.window.is_auto
    assert window_inputs(config).window_s == 2 * 86_400


# ------------------------------------------------------------------------------------------- the file


def test_booking_is_idempotent_and_a_conflict_names_the_holder_and_the_earliest_free_start(tmp_path):
    path = tmp_path / "calendars" / "demo-h100-16.duckdb"
    ident = _identity()
    first = cal.book(path, ident, _request("c-1", workspace="/w1"), NOW)
    assert (
        cal.book(path, ident, _request("c-other-id", workspace="/w1"), NOW) == first
    )  # a rerun books nothing
    with pytest.raises(Refused) as err:
        cal.book(path, ident, _request("c-2", start=T0 + DAY), NOW)
    text = err.value.render()
    assert "commitment c-1 of campaign demo" in text and "Earliest free start" in text
    assert "2027-01-06T00:00:00Z" in text and err.value.exit_code == 3
    cal.book(path, ident, _request("c-3", nodes=13, start=T0 + DAY), NOW)  # shrunk to fit
    state = cal.read_calendar(path)
    assert [b.commitment_id for b in state.bookings] == ["c-1", "c-3"]


def test_auto_books_the_earliest_fitting_start(tmp_path):
    path = tmp_path / "cal.duckdb"
    ident = _identity()
    cal.book(path, ident, _request("c-1", start=NOW + timedelta(hours=1, seconds=30)), NOW)
    auto = cal.book(path, ident, _request("c-2", nodes=13, start=None, days=0.5), NOW)
    assert auto.start == NOW  # now (a whole minute already), beside c-1
    later = cal.book(path, ident, _request("c-3", start=None, days=1), NOW)
    # c-1 ends at 13:00:30 two days on; an auto start is a whole minute (window.align: minute, the default).
    assert later.start == NOW + timedelta(hours=1, minutes=1) + 2 * DAY


def test_auto_aligned_to_the_day_books_the_first_free_midnight(tmp_path):
    path = tmp_path / "cal.duckdb"
    ident = _identity()
    midnight = datetime(2026, 12, 2, tzinfo=UTC)
    cal.book(path, ident, _request("c-1", start=midnight + timedelta(hours=3), days=1), NOW)  # 03:00 .. 03:00
    aligned = replace(_request("c-2", start=None, days=2), align="day")
    # Tomorrow's midnight would overlap c-1 (19 + 19 > 32); the next midnight after c-1 ends is the 4th.
    assert cal.book(path, ident, aligned, NOW).start == midnight + 2 * DAY
    assert cal.earliest_fit([], 1, DAY, 32, NOW, "hour") == NOW
    assert cal.earliest_fit([], 1, DAY, 32, NOW + timedelta(seconds=1), "hour") == NOW + timedelta(hours=1)


@pytest.mark.parametrize("case", ["past", "other_cluster", "too_large", "not_a_calendar"])
def test_bad_bookings_exit_2_name_the_value_and_leave_the_calendar_unchanged(tmp_path, case):
    path = tmp_path / "cal.duckdb"
    ident = _identity()
    cal.book(path, ident, _request("c-1"), NOW)
    before = path.read_bytes()
    with pytest.raises(CampaignError) as err:
        if case == "past":
            cal.book(path, ident, _request("c-2", start=NOW - DAY), NOW)
        elif case == "other_cluster":
            cal.book(path, _identity(total=64), _request("c-2", start=T0 + 10 * DAY), NOW)
        elif case == "too_large":
            cal.book(path, ident, _request("m-1", nodes=33, start=T0 + 10 * DAY), NOW)
        else:
            other = tmp_path / "campaign.duckdb"
            with duckdb.connect(str(other)) as con:
                con.execute("CREATE TABLE runs (x INT)")
            before = other.read_bytes()
            path = other
            cal.book(other, ident, _request("c-2", start=T0 + 10 * DAY), NOW)
    text = err.value.render()
    assert err.value.exit_code == 2 and "fix:" in text
    expected = {
        "past": "2026-11-30T12:00:00+00:00, which is in the past",
        "other_cluster": "total_nodes: calendar 32, config 64",
        "too_large": "33 nodes is larger than the cluster",
        "not_a_calendar": "not a cluster calendar",
    }[case]
    assert expected in text
    assert path.read_bytes() == before


def test_cancel_is_recorded_never_deleted_and_unknown_ids_are_bad_input(tmp_path):
    path = tmp_path / "cal.duckdb"
    cal.book(path, _identity(), _request("c-1"), NOW)
    with pytest.raises(ConfigError, match=r"unknown commitment 'c-nope'.*known: c-1"):
        cal.cancel(path, "c-nope", "typo", NOW)
    with pytest.raises(ConfigError, match="needs a reason"):
        cal.cancel(path, "c-1", "  ", NOW)
    gone = cal.cancel(path, "c-1", "data redo", NOW)
    assert gone.status == "cancelled"
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT status, note FROM bookings").fetchall() == [
            ("cancelled", "cancelled: data redo")
        ]
        assert [
            r[0] for r in con.execute("SELECT event FROM booking_events ORDER BY event_at").fetchall()
        ] == ["booked", "cancelled"]
    cal.book(path, _identity(), _request("c-2"), NOW)  # the capacity is free again


def test_a_hold_takes_the_capacity_until_a_yes_books_exactly_it_or_a_no_releases_it(tmp_path):
    path = tmp_path / "cal.duckdb"
    ident = _identity()
    hold = cal.book(path, ident, _request("c-1", start=None, workspace="/w1"), NOW, hold=True)
    assert hold.status == cal.HELD and hold.start == NOW  # an auto start resolved before anyone is asked
    assert cal.book(path, ident, _request("c-1", start=None, workspace="/w1"), NOW, hold=True) == hold
    with pytest.raises(Refused, match="held while its approval is pending"):  # nobody else takes it meanwhile
        cal.book(path, ident, _request("c-2", start=NOW), NOW)
    report = cal.calendar_report("x", 32, PRICING, cal.read_calendar(path).bookings, NOW, NOW + 2 * DAY)
    assert [b.status for b in report.bookings] == ["held"]  # shown as held by `calendar show`
    booked = cal.confirm_hold(path, hold.booking_id, NOW)
    assert (booked.booking_id, booked.start, booked.end, booked.nodes, booked.status) == (
        hold.booking_id,
        hold.start,
        hold.end,
        hold.nodes,
        "booked",
    )
    assert cal.release_hold(path, "c-1", "too late to say no", NOW).status == "booked"  # a booking stays
    assert cal.confirm_hold(path, hold.booking_id, NOW) == booked  # idempotent

    other = cal.book(path, ident, _request("c-3", start=T0, workspace="/w3"), NOW, hold=True)
    released = cal.release_hold(path, "c-3", "rejected by alice: wait for Q3", NOW)
    assert released.status == "cancelled" and released.note == "hold released: rejected by alice: wait for Q3"
    with pytest.raises(
        Refused, match=r"was released .*nothing booked"
    ):  # a yes after the release books nothing
        cal.confirm_hold(path, other.booking_id, NOW)
    cal.book(path, ident, _request("c-4", start=T0), NOW)  # the capacity is free again
    late = cal.book(path, ident, _request("c-5", start=T0 + 10 * DAY, workspace="/w5"), NOW, hold=True)
    with pytest.raises(Refused, match="before the approval came"):  # its start passed while it waited
        cal.confirm_hold(path, late.booking_id, T0 + 10 * DAY + timedelta(minutes=1))
    with duckdb.connect(str(path), read_only=True) as con:
        events = con.execute(
            "SELECT booking_id, event FROM booking_events ORDER BY event_at, rowid"
        ).fetchall()
    assert [e for b, e in events if b == hold.booking_id] == ["held", "booked"]
    assert [e for b, e in events if b == other.booking_id] == ["held", "hold released"]
    assert [e for b, e in events if b == late.booking_id] == ["held"]  # the commit flow releases it


def test_the_actual_end_releases_the_rest_of_the_window(tmp_path):
    path = tmp_path / "cal.duckdb"
    ident = _identity()
    cal.book(path, ident, _request("c-1"), NOW)
    done = cal.record_actual_end(path, ident, "c-1", T0 + DAY + timedelta(hours=6), NOW)
    assert done.status == "executed" and done.held_until == T0 + DAY + timedelta(hours=6)
    state = cal.read_calendar(path)
    report = cal.calendar_report(
        state.cluster, state.total_nodes, state.pricing, state.bookings, T0, T0 + 2 * DAY
    )
    assert report.gaps[-1].kind == "early_finish" and report.gaps[-1].hours == 18.0
    with pytest.raises(Refused, match="already executed"):
        cal.cancel(path, "c-1", "too late", NOW)


def test_a_gap_is_priced_at_the_price_in_force_over_it_not_the_newest(tmp_path):
    path = tmp_path / "cal.duckdb"
    cal.book(path, _identity(), _request("c-1", start=T0, days=1), NOW)  # recorded at $2.50 per GPU-hour
    later = NOW + 40 * DAY  # T0 + 5 days: a new contract at $3.00
    dearer = _identity(**{"cluster.cost.gpu_hour_usd": 3.0})
    cal.book(path, dearer, _request("c-2", start=later + DAY, days=1), later)
    state = cal.read_calendar(path)
    assert [p.gpu_hour_usd for _, p in state.price_history] == [
        2.5,
        3.0,
    ] and state.pricing.gpu_hour_usd == 3.0
    report = cal.calendar_report(
        state.cluster,
        state.total_nodes,
        state.pricing,
        state.bookings,
        T0,
        later + 2 * DAY,
        state.price_history,
    )
    # The stretch between the bookings is cut where the price changed: the past at $2.50, the rest at $3.00.
    old, new = (g for g in report.gaps if g.idle_nodes == 32)
    assert (old.end, new.start) == ("2027-01-10T12:00:00Z", "2027-01-10T12:00:00Z")
    assert (old.gpu_hour_usd, new.gpu_hour_usd) == (2.5, 3.0)
    old_price, new_price = (p for _, p in state.price_history)
    assert old.cost_usd == old_price.cost(old.idle_node_hours).cost_usd
    assert new.cost_usd == new_price.cost(new.idle_node_hours).cost_usd
    assert report.gaps[0].gpu_hour_usd == 2.5  # beside c-1, before any change: the first price
    assert abs(report.totals.idle_cost_usd - sum(g.cost_usd for g in report.gaps)) < 0.01 * len(report.gaps)
    assert report.totals.busy_node_hours + report.totals.idle_node_hours == 32 * report.horizon.hours
    # Without a history (one price), every gap is at that price, as before.
    flat = cal.calendar_report(state.cluster, 32, PRICING, state.bookings, T0, later + 2 * DAY)
    assert {g.gpu_hour_usd for g in flat.gaps} == {2.5}


def test_the_calendar_markdown_embeds_the_chart():
    import base64

    from campaign.calendar.gantt import gantt_png
    from campaign.calendar.summary import calendar_markdown

    report = cal.calendar_report("x", 32, PRICING, [_b("a", 19, T0, T0 + DAY)], T0, T0 + 2 * DAY)
    png = gantt_png(report)
    text = calendar_markdown(report, png, "/tmp/x-gantt.png")
    uri = text.split("![Gantt chart of cluster x", 1)[1].split("](", 1)[1].split(")", 1)[0]
    assert uri.startswith("data:image/png;base64,") and base64.b64decode(uri.split(",", 1)[1]) == png
    assert "| a | a |" in text and f"| {report.gaps[0].cost_usd:,.2f} |" in text


def test_the_gantt_chart_ticks_whole_nodes_on_a_small_cluster():
    import matplotlib.pyplot as plt

    from campaign.calendar.gantt import gantt_figure

    report = cal.calendar_report("x", 3, PRICING, [_b("a", 2, T0, T0 + DAY)], T0, T0 + 2 * DAY)
    fig = gantt_figure(report)
    ticks = fig.axes[0].get_yticks()
    plt.close(fig)
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


def test_the_gantt_chart_marks_a_hold_as_held_for_approval():
    import matplotlib.pyplot as plt

    from campaign.calendar.gantt import gantt_figure

    bookings = [_b("a", 2, T0, T0 + DAY), _b("h", 1, T0, T0 + DAY, status=cal.HELD)]
    fig = gantt_figure(cal.calendar_report("x", 3, PRICING, bookings, T0, T0 + 2 * DAY))
    labels = fig.axes[0].get_legend_handles_labels()[1]
    plt.close(fig)
    assert "h (h, 1 nodes, held for approval)" in labels and "a (a, 2 nodes)" in labels


def test_horizon_end_before_start_is_bad_input_naming_both():
    state = cal.CalendarState(Path("x"), "x", "d", 32, PRICING, ())
    with pytest.raises(ConfigError) as err:
        horizon(state, NOW, "2027-02-01", "2027-01-01")
    assert (
        "2027-01-01" in err.value.render()
        and "2027-02-01" in err.value.render()
        and "--to" in err.value.render()
    )
    with pytest.raises(ConfigError, match="not a date"):
        parse_moment("next tuesday", "--from")


def test_the_default_calendar_sits_beside_the_workspaces(tmp_path, monkeypatch):
    monkeypatch.delenv(cal.CALENDAR_ENV, raising=False)
    assert cal.calendar_path("demo-h100-16", tmp_path / "w") == (
        tmp_path / "calendars" / "demo-h100-16.duckdb"
    )
    monkeypatch.setenv(cal.CALENDAR_ENV, str(tmp_path / "team") + "/")
    assert cal.calendar_path("demo-h100-16", tmp_path / "w") == tmp_path / "team" / "demo-h100-16.duckdb"
    with pytest.raises(ConfigError, match="cannot name a calendar file"):
        monkeypatch.delenv(cal.CALENDAR_ENV)
        cal.calendar_path("../etc", tmp_path / "w")


def test_two_processes_racing_for_the_same_capacity_book_exactly_once(tmp_path):
    """Two real processes book at the same moment: one wins, the other is refused naming the winner."""
    path = tmp_path / "cal.duckdb"
    go = tmp_path / "go"
    script = textwrap.dedent(f"""
        import sys, time, json
        from datetime import datetime, timedelta, UTC
        from pathlib import Path
        from campaign import calendar as cal
        from campaign.config import load_config
        from campaign.errors import CampaignError
        ident = cal.cluster_identity(load_config({str(DEMO)!r}, ["cluster.total_nodes=32"]).config.cluster)
        while not Path({str(go)!r}).exists():
            time.sleep(0.001)
        req = cal.BookingRequest(commitment_id=sys.argv[1], campaign="demo", nodes=19, duration=timedelta(days=2),
                                 start=datetime(2027, 1, 4, tzinfo=UTC))
        try:
            cal.book(Path({str(path)!r}), ident, req, datetime(2026, 12, 1, tzinfo=UTC))
        except CampaignError as err:
            print(err.render()); sys.exit(err.exit_code)
    """)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, cid],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(DEMO).parents[2],
        )
        for cid in ("c-left", "c-right")
    ]
    import time

    time.sleep(3)  # both processes are up and polling
    go.touch()
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    codes = sorted(r[0] for r in results)
    assert codes == [0, 3], results
    loser = next(r for r in results if r[0] == 3)
    winner = "c-left" if "c-left" in loser[1] else "c-right"
    assert f"commitment {winner}" in loser[1] and "Earliest free start" in loser[1]
    state = cal.read_calendar(path)
    assert [b.commitment_id for b in state.bookings] == [winner]
    json.dumps(
        cal.calendar_report(state.cluster, 32, state.pricing, state.bookings, T0, T0 + 3 * DAY).to_json()
    )


# ------------------------------------------------------------------------------------------ window length


def test_window_length_between_p90_and_p99_passes_and_either_side_fails_saying_which_and_the_cost():
    from campaign.calendar.window_length import assess_window_length
    from campaign.window_verdict import empirical_quantile

    assert empirical_quantile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9) == 9
    day = 86_400.0
    finishes = [1.5 * day + i * 0.01 * day for i in range(10)]  # 1.50 .. 1.59 days
    ok = assess_window_length(finishes, 1.585 * day, 19, PRICING)  # p90 1.58; 1.59 is past the window
    assert ok.verdict == "ok" and ok.p_target_in_window == 0.9 and ok.p99_completion_days is None
    long = assess_window_length(finishes, 2 * day, 19, PRICING)
    tail_h = sum(2 * day - t for t in finishes) / 10 / 3600
    assert (
        long.verdict == "too_long"
        and "longer than the campaign's p99 completion time (1.59 days)" in long.message
    )
    assert abs(long.expected_idle_tail_h - tail_h) < 1e-9
    assert long.expected_idle_tail_cost_usd == PRICING.cost(tail_h * 19).cost_usd
    assert f"${long.expected_idle_tail_cost_usd:,.2f} of released capacity" in long.message
    assert "between 1.58 and 1.59" in long.message
    short = assess_window_length([*finishes[:8], None, None], 1.58 * day, 19, PRICING)
    assert short.verdict == "too_short" and short.p90_completion_days is None
    assert (
        "shorter than the campaign's p90" in short.message
        and "20% of 10 replicas do not finish" in short.message
    )
    booking = PRICING.cost(1.58 * 24 * 19).cost_usd
    assert f"costs its whole booking ({1.58 * 24 * 19:,.0f} node-hours, ${booking:,.2f})" in short.message
    # Replicas run past the window price what lengthening it costs: here to the p90 of 1.68 days (+2.4 h x 19).
    priced = assess_window_length(
        [*finishes[:8], None, None],
        1.58 * day,
        19,
        PRICING,
        longer_completions_s=[t + 0.1 * day for t in finishes],
    )
    assert priced.verdict == "too_short" and abs(priced.shortfall_node_hours - 0.1 * 24 * 19) < 1e-6
    assert (
        f"${PRICING.cost(0.1 * 24 * 19).cost_usd:,.2f}" in priced.message
        and "at least 1.68" in priced.message
    )
    # A snapshot job trains through the window: no idle tail, so only the p90 side applies.
    snapshot = assess_window_length(finishes, 2 * day, 19, PRICING, trains_through=True)
    assert snapshot.verdict == "ok" and snapshot.expected_idle_tail_cost_usd == 0
    assert "p99 side does not apply" in snapshot.message


def _schedule_gate(*sets: str):
    from campaign.gates import plan_gates, schedule_with_window_length
    from campaign.plan import make_plan
    from campaign.window_judge import judge_window

    config = load_config(DEMO, list(sets)).config
    plan = make_plan(config)
    schedule = next(g for g in plan_gates(plan, []) if g.gate == "schedule")
    return schedule_with_window_length(schedule, judge_window(config, plan))


def test_the_shipped_demo_window_passes_the_window_length_rule_by_default():
    # The default replica count is on; the demo is sized to the middle of the band (configs/campaigns/demo.yaml).
    assert load_config(DEMO).config.gates.config.window_replicas == 100
    judged = _schedule_gate()
    length = judged.details["window_length"]
    assert judged.passed, judged.summary
    assert (
        length["verdict"] == "ok" and length["replicas"] == 100 and 0.9 <= length["p_target_in_window"] < 0.99
    )


def test_the_schedule_gate_fails_a_too_short_and_a_too_long_window_saying_which_and_what_it_costs():
    short = _schedule_gate("window.days=1.7")  # the demo needs about 1.9 days
    assert not short.passed and "shorter than the campaign's p90 completion time" in short.summary
    assert short.details["window_length"]["verdict"] == "too_short"
    assert short.details["window_length"]["shortfall_cost_usd"] > 0
    assert f"${short.details['window_length']['shortfall_cost_usd']:,.2f}" in short.summary
    assert "set window.days to at least" in short.summary
    long = _schedule_gate("window.days=3")
    assert not long.passed and "longer than the campaign's p99 completion time" in long.summary
    tail = long.details["window_length"]["expected_idle_tail_cost_usd"]
    assert tail > 0 and f"${tail:,.2f} of released capacity" in long.summary
    assert long.details["violations"][-1] == long.details["window_length"]["message"]


def test_the_llama3_snapshot_window_is_judged_on_its_target_only():
    from campaign.plan import make_plan
    from campaign.window_judge import judge_window
    from tests.helpers.paths import LLAMA

    config = load_config(LLAMA).config
    judged = judge_window(config, make_plan(config))
    assert judged.replicas == 20 and judged.trains_through and judged.verdict == "ok", judged.message
    assert judged.p90_completion_days < 54


def test_a_config_without_total_nodes_takes_the_calendars_size(tmp_path):
    path = tmp_path / "cal.duckdb"
    cal.book(path, _identity(total=32), _request("c-1"), NOW)
    unsized = cal.cluster_identity(load_config(DEMO, ["cluster.nodes=8", "plan.layout.dp=32"]).config.cluster)
    assert not unsized.total_given and unsized.total_nodes == 11
    shrunk = cal.book(path, unsized, _request("c-2", nodes=11), NOW)  # 19 + 11 fit the calendar's 32 nodes
    assert shrunk.start == T0
    with pytest.raises(Refused, match="capacity \\(32 nodes\\)"):
        cal.book(path, unsized, _request("c-3", nodes=11, start=T0 + DAY), NOW)


def test_cancelling_a_cancelled_booking_is_refused_naming_when(tmp_path):
    path = tmp_path / "cal.duckdb"
    cal.book(path, _identity(), _request("c-1"), NOW)
    cal.cancel(path, "c-1", "data redo", NOW)
    before = path.read_bytes()
    with pytest.raises(Refused) as err:
        cal.cancel(path, "c-1", "again", NOW + timedelta(hours=1))
    assert err.value.exit_code == 3
    assert "c-1 was already cancelled on 2026-12-01T12:00:00Z (data redo)" in err.value.message
    assert path.read_bytes() == before


def test_a_past_start_names_the_option_the_user_gave(tmp_path):
    request = replace(_request("m-1", start=datetime(2020, 1, 1, tzinfo=UTC)), start_given_by="--start")
    with pytest.raises(ConfigError) as err:
        cal.book(tmp_path / "cal.duckdb", _identity(), request, NOW)
    assert err.value.where == "--start" and "window.start" not in err.value.render()
    assert "pass a future --start" in err.value.fix


# ---------------------------------------------------------------------------------- proposals, aligned


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 32), _moments, st.integers(3600, 5 * 24 * 3600)), max_size=6),
    st.integers(1, 32),
    st.integers(3600, 5 * 24 * 3600),
    st.sampled_from(["second", "minute", "hour", "day"]),
)
def test_the_least_idle_start_is_on_the_same_grid_and_never_before_the_earliest(raw, nodes, seconds, align):
    bookings = [_b(f"c{i}", n, s, s + timedelta(seconds=d)) for i, (n, s, d) in enumerate(raw)]
    state = cal.CalendarState(Path("x"), "x", "d", 32, PRICING, tuple(bookings))
    out = cal.propose(state, nodes, timedelta(seconds=seconds), T0 + timedelta(seconds=17), None, align)
    earliest, tight = out.earliest.start, out.least_idle.start
    assert earliest <= tight
    if earliest == tight:  # one start, one idle stretch, however it was found
        assert out.earliest.gap_idle_node_hours == out.least_idle.gap_idle_node_hours
    assert out.least_idle.gap_idle_node_hours <= out.earliest.gap_idle_node_hours
    step = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}[align]
    for start in (earliest, tight):
        moment = datetime.fromisoformat(start.replace("Z", "+00:00"))
        assert int(moment.timestamp()) % step == 0, (align, start)
        assert not cal.blocking(bookings, moment, moment + timedelta(seconds=seconds), nodes, 32)


def test_propose_says_whether_the_configured_start_fits_and_puts_least_idle_after_earliest():
    from campaign.calendar.proposals import proposal_text

    # A booking that ends at 21:13 leaves the cluster free from then; starts are on whole days (window.align: day).
    ends = T0 + timedelta(days=1, hours=21, minutes=13)
    held = _b("c-held", 32, T0, ends)
    state = cal.CalendarState(Path("x"), "x", "d", 32, PRICING, (held,))
    out = cal.propose(state, 32, 2 * DAY, T0, None, "day")
    assert out.earliest.start == out.least_idle.start == "2027-01-06T00:00:00Z"
    text = proposal_text(out)
    assert "window.start in the config  auto: commit books the earliest start that fits, 2027-01-06" in text
    assert text.index("earliest start that fits") < text.index("least idle start that fits")
    assert "(the same start)" in text
    clash = cal.propose(state, 32, 2 * DAY, T0, T0 + DAY, "day")
    assert "does not fit (held by c-held); the earliest start that fits is 2027-01-06T00:00:00Z" in (
        proposal_text(clash)
    )
    fits = cal.propose(state, 32, 2 * DAY, T0, T0 + 5 * DAY, "day")
    assert proposal_text(fits).splitlines()[1].endswith(": fits")

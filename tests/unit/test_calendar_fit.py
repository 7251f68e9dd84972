"""The sweep behind `earliest_fit` and `least_idle_fit` (O(n log n)) gives exactly the answers of the first,
quadratic implementation (tests/oracles/calendar_quadratic_fit.py) on random calendars: dense, sparse, with
executed (released early) and cancelled bookings, touching and overlapping edges."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaign import calendar as cal
from campaign.calendar.timeline import FreeStarts, blocking
from tests.helpers.examples import examples
from tests.oracles.calendar_quadratic_fit import earliest_fit_quadratic, least_idle_fit_quadratic

T0 = datetime(2027, 1, 4, tzinfo=UTC)
HOUR = 3600
CAPACITY = 32

# Times on a coarse grid (whole hours over 20 days) so that edges often touch and candidates often coincide.
_hours = st.integers(0, 20 * 24)
_booking = st.tuples(
    st.integers(1, CAPACITY),
    _hours,
    st.integers(1, 5 * 24),
    st.sampled_from(["booked", "booked", "executed", "cancelled"]),
    st.integers(0, 5 * 24),
)


def _calendar(raw):
    out = []
    for i, (nodes, start_h, length_h, status, early_h) in enumerate(raw):
        start = T0 + timedelta(hours=start_h)
        end = start + timedelta(hours=length_h)
        actual = end - timedelta(hours=min(early_h, length_h)) if status == "executed" else None
        out.append(
            cal.Booking(
                f"b{i}", f"c{i}", cal.CAMPAIGN, f"c{i}", nodes, start, end, status=status, actual_end=actual
            )
        )
    return out


@settings(max_examples=examples(250), deadline=None)
@given(
    st.lists(_booking, max_size=25),
    st.integers(1, CAPACITY),
    st.integers(1, 6 * 24),
    st.integers(-48, 15 * 24),
    st.integers(0, HOUR - 1),
)
def test_the_sweep_gives_the_quadratic_answers(raw, nodes, length_h, not_before_h, offset_s):
    bookings = _calendar(raw)
    duration = timedelta(hours=length_h, seconds=offset_s % 7)
    not_before = T0 + timedelta(hours=not_before_h, seconds=offset_s)
    assert cal.earliest_fit(bookings, nodes, duration, CAPACITY, not_before) == earliest_fit_quadratic(
        bookings, nodes, duration, CAPACITY, not_before
    )
    assert cal.least_idle_fit(bookings, nodes, duration, CAPACITY, not_before) == least_idle_fit_quadratic(
        bookings, nodes, duration, CAPACITY, not_before
    )


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(_booking, max_size=25),
    st.integers(1, CAPACITY),
    st.integers(1, 6 * 24),
    st.integers(-48, 26 * 24),
)
def test_a_start_fits_exactly_when_nothing_blocks_it(raw, nodes, length_h, start_h):
    bookings = _calendar(raw)
    duration = timedelta(hours=length_h)
    start = T0 + timedelta(hours=start_h)
    assert FreeStarts(bookings, nodes, duration, CAPACITY).fits(start) == (
        not blocking(bookings, start, start + duration, nodes, CAPACITY)
    )


def test_a_booking_larger_than_the_cluster_is_a_caller_error():
    with pytest.raises(ValueError, match="33 nodes cannot fit a cluster of 32"):
        cal.least_idle_fit([], 33, timedelta(hours=1), CAPACITY, T0)

"""The cluster calendar: one DuckDB file per cluster holding every campaign's booking (and maintenance) as
capacity in nodes over time, the idle gaps between them priced, and where a new campaign fits."""

from campaign.calendar.catalog import (
    CALENDAR_ENV,
    BookingRequest,
    CalendarState,
    ClusterIdentity,
    book,
    calendar_path,
    calendars_in,
    cancel,
    cluster_identity,
    confirm_hold,
    find_booking,
    read_calendar,
    record_actual_end,
    release_hold,
)
from campaign.calendar.gaps import Pricing, calendar_report, idle_node_w
from campaign.calendar.proposals import propose
from campaign.calendar.timeline import (
    CAMPAIGN,
    HELD,
    MAINTENANCE,
    Booking,
    blocking,
    ceil_minute,
    earliest_fit,
    least_idle_fit,
    segments,
    utc_seconds,
)

__all__ = [
    "CALENDAR_ENV",
    "CAMPAIGN",
    "HELD",
    "MAINTENANCE",
    "Booking",
    "BookingRequest",
    "CalendarState",
    "ClusterIdentity",
    "Pricing",
    "blocking",
    "book",
    "calendar_path",
    "calendar_report",
    "calendars_in",
    "cancel",
    "ceil_minute",
    "cluster_identity",
    "confirm_hold",
    "earliest_fit",
    "find_booking",
    "idle_node_w",
    "least_idle_fit",
    "propose",
    "read_calendar",
    "record_actual_end",
    "release_hold",
    "segments",
    "utc_seconds",
]

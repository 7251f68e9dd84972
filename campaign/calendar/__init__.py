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
    find_booking,
    read_calendar,
    record_actual_end,
)
from campaign.calendar.gaps import Pricing, calendar_report, idle_node_w
from campaign.calendar.proposals import propose
from campaign.calendar.timeline import (
    CAMPAIGN,
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
    "earliest_fit",
    "find_booking",
    "idle_node_w",
    "least_idle_fit",
    "propose",
    "read_calendar",
    "record_actual_end",
    "segments",
    "utc_seconds",
]

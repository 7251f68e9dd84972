"""The `window:` section: when the committed window starts and how long it is."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator

from campaign.config.schema.base import MAX_WINDOW_DAYS, WINDOW_YEARS, Frozen


class Auto(StrEnum):
    """`window.start: auto`, resolved once at load: commit books the earliest start where the campaign fits on the
    cluster's calendar. A start is a datetime or `AUTO`, never a string to compare (it dumps as "auto")."""

    AUTO = "auto"


AUTO = Auto.AUTO


class WindowConfig(Frozen):
    start: datetime | Auto = Field(
        description="Start of the execution window, ISO 8601 with a time zone, or 'auto': commit books the earliest "
        "start where the campaign fits on the cluster's calendar."
    )
    days: float = Field(
        ge=0.01, le=MAX_WINDOW_DAYS, description="Length of the execution window, days (at most a year)."
    )
    align: Literal["minute", "hour", "day"] = Field(
        "minute",
        description="What an 'auto' start is rounded up to (UTC): the next whole minute, hour or day "
        "(midnight). 'day' keeps the simulated window's clock phase (diurnal drift) the same "
        "whenever it is booked. Ignored for a fixed start.",
    )

    @property
    def is_auto(self) -> bool:
        return self.start is AUTO

    @property
    def fixed_start(self) -> datetime | None:
        """The start the config fixes; None for `auto` (the booking gives it)."""
        return None if isinstance(self.start, Auto) else self.start

    @field_validator("start")
    @classmethod
    def _start_in_range(cls, value: datetime | Auto) -> datetime | Auto:
        if isinstance(value, Auto):
            return value
        low, high = WINDOW_YEARS
        if not (low <= value.year < high):
            raise ValueError(
                f"window start must fall in the years {low} to {high - 1}; give an ISO 8601 date "
                "such as 2027-01-04T00:00:00Z"
            )
        return value

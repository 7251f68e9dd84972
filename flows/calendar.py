"""The calendar report: the cluster's bookings, idle gaps and their cost, a Gantt chart and a Prefect artifact.

Deployed as `calendar-report`, scheduled daily."""

import sys
from pathlib import Path

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from campaign import store
from campaign.calendar.horizon import locate_calendar
from flows.common import fails_cleanly, params_field, stage_run_name
from tasks.calendar import report_calendar


class CalendarParams(BaseModel):
    """Which cluster's calendar, and the horizon to report (default: the span of its bookings)."""

    model_config = ConfigDict(extra="forbid")

    cluster: str | None = Field(None, description="Cluster name (default: the only calendar in the folder).")
    calendar: str | None = Field(
        None,
        description="Calendar file (default calendars/<cluster>.duckdb beside the "
        "workspaces, or CAMPAIGN_CALENDAR).",
    )
    workspaces: str | None = Field(None, description="Folder that holds the workspaces (default workspace).")
    start: str | None = Field(None, description="Horizon start, ISO 8601 (default: the first booking).")
    end: str | None = Field(None, description="Horizon end, ISO 8601 (default: the last booked end).")


def _cluster_of(parameters: dict) -> str:
    """What a calendar report is about: its cluster (or its calendar file's name)."""
    calendar = params_field(parameters, "calendar")
    return params_field(parameters, "cluster") or (Path(str(calendar)).stem if calendar else "calendar")


@flow(name="calendar-report", flow_run_name=stage_run_name("calendar-report", _cluster_of))
@fails_cleanly
def calendar_report_flow(params: CalendarParams = CalendarParams()):
    path = locate_calendar(params.cluster, params.calendar, params.workspaces)
    return report_calendar(path, params.start, params.end, store.now())


if __name__ == "__main__":
    from campaign_cli.terminal import flow_main

    sys.exit(flow_main(calendar_report_flow))

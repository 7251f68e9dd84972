"""`campaign calendar`: the cluster's bookings, gaps and their cost, proposals, cancellations."""

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from campaign.errors import ConfigError
from campaign_cli.commands.app import CalendarOpt, ConfigArg, JsonOpt, SetOpt, WorkspaceOpt, _imports, app
from campaign_cli.terminal import calendar_env as _calendar_env
from campaign_cli.terminal import finish as _finish
from campaign_cli.terminal import prefect_api as _prefect_api

if TYPE_CHECKING:
    from campaign.calendar.report_records import CalendarReport

calendar_app = typer.Typer(
    no_args_is_help=True, help="The cluster's calendar: bookings, idle gaps and their cost."
)
app.add_typer(calendar_app, name="calendar")
ClusterOpt = Annotated[
    str | None, typer.Option("--cluster", help="Cluster name (default: the only calendar).")
]
WorkspacesOpt = Annotated[
    str | None,
    typer.Option(
        "--workspaces", help="Folder holding the workspaces, whose calendars/ to use (default workspace)."
    ),
]


@calendar_app.command("show")
def calendar_show(
    cluster: ClusterOpt = None,
    from_: Annotated[
        str | None, typer.Option("--from", help="Horizon start, ISO 8601 (default: the first booking).")
    ] = None,
    to: Annotated[
        str | None, typer.Option("--to", help="Horizon end, ISO 8601 (default: the last booked end).")
    ] = None,
    json_: JsonOpt = False,
    calendar: CalendarOpt = None,
    workspaces: WorkspacesOpt = None,
) -> None:
    """Bookings, utilisation and every idle gap with its cost; a Gantt PNG beside the calendar."""
    from campaign import calendar as cal
    from campaign import store
    from campaign.calendar.horizon import horizon, locate_calendar, report_files
    from campaign.files import check_outputs

    path = locate_calendar(cluster, calendar, workspaces)
    png, report_json = report_files(path)
    check_outputs({"the Gantt chart": png, "the calendar report": report_json}, {"--calendar": path})
    horizon(
        cal.read_calendar(path), store.now(), from_, to
    )  # bad input fails here, before a Prefect API starts
    from campaign.calendar.recorded import calendar_report_of, recorded_report

    # The report recorded beside the calendar, when it is this very report: printed as is, with no flow run (the
    # run that drew it published it); anything changed, and the flow draws and publishes it again.
    recorded = recorded_report(calendar_report_of(path, from_, to, store.now()))
    if recorded is not None:
        typer.echo("calendar unchanged since its report was drawn: not redrawn", err=True)
        # As the file beside the calendar holds it (its keys sorted).
        typer.echo(
            json.dumps(recorded.to_json(), indent=2, sort_keys=True) if json_ else _calendar_text(recorded)
        )
        return
    with _prefect_api(None, warm=_imports("flows.calendar")):
        from flows.calendar import CalendarParams, calendar_report_flow

        report = _finish(
            calendar_report_flow(CalendarParams(calendar=str(path), start=from_, end=to), return_state=True)
        )
    if json_:
        typer.echo(json.dumps(report, indent=2))
        return
    from campaign.calendar.report_records import CalendarReport

    typer.echo(_calendar_text(CalendarReport.from_json(report)))


def _calendar_text(r: "CalendarReport") -> str:
    t, h = r.totals, r.horizon
    lines = [
        f"cluster {r.cluster}: {t.cluster_nodes} nodes, {h.start} .. {h.end} ({h.hours:,.1f} h)",
        (
            f"utilisation {t.utilisation:.1%}: busy {t.busy_node_hours:,.1f} node-h, idle "
            f"{t.idle_node_hours:,.1f} node-h costing ${t.idle_cost_usd:,.2f}"
        ),
        "bookings:",
    ]
    lines += [
        f"  {b.commitment_id:16s} {b.campaign:16s} {b.start} .. {b.actual_end or b.end}  "
        f"{b.nodes:5d} nodes  {b.status}"
        for b in r.bookings
    ] or ["  (none)"]
    lines.append("gaps:")
    lines += [
        f"  {g.start} .. {g.end}  {g.hours:8.1f} h  {g.idle_nodes:5d} idle nodes  "
        f"{g.idle_node_hours:10,.1f} node-h  ${g.cost_usd:,.2f}"
        + ("  (early finish of " + g.released_by + ")" if g.released_by else "")
        for g in r.gaps
    ]
    lines.append(f"gantt: {r.gantt_png}")
    return "\n".join(lines)


@calendar_app.command("propose")
def calendar_propose(
    config: ConfigArg,
    json_: JsonOpt = False,
    workspace: WorkspaceOpt = None,
    calendar: CalendarOpt = None,
    set_: SetOpt = None,
) -> None:
    """The earliest start where the campaign fits, and the start that strands the least idle capacity."""
    from datetime import timedelta

    from campaign import calendar as cal
    from campaign import store
    from campaign.config import load_config

    loaded = load_config(config, list(set_ or []))
    cfg = loaded.config
    ws = store.workspace_for(cfg.name, workspace)
    identity = cal.cluster_identity(cfg.cluster)
    with _calendar_env(calendar):
        path = cal.calendar_path(cfg.cluster.name, ws.root)
    state = cal.read_calendar(path, identity)
    out = cal.propose(
        state,
        cfg.cluster.booked_nodes,
        timedelta(seconds=round(cfg.window.days * 86_400)),
        store.now(),
        cfg.window.fixed_start,
        cfg.window.align,
    )
    if json_:
        typer.echo(json.dumps(out.to_json(), indent=2))
        return
    from campaign.calendar.proposals import proposal_text

    typer.echo(proposal_text(out))


@calendar_app.command("cancel")
def calendar_cancel(
    commitment: Annotated[str, typer.Argument(help="Commitment id (c-...) or maintenance id.")],
    reason: Annotated[str, typer.Option("--reason", help="Why: kept on record with the booking.")],
    cluster: ClusterOpt = None,
    calendar: CalendarOpt = None,
    workspaces: WorkspacesOpt = None,
) -> None:
    """Release a booking: recorded with its reason, never deleted; execute then refuses the commitment."""
    from campaign import calendar as cal
    from campaign import store
    from campaign.calendar.horizon import locate_calendar

    if cluster or calendar or os.environ.get(cal.CALENDAR_ENV):
        paths = [locate_calendar(cluster, calendar, workspaces)]
    else:
        paths = cal.calendars_in(Path(workspaces or "workspace") / "calendars")
    for path in paths:
        if cal.find_booking(cal.read_calendar(path), commitment) is not None:
            booking = cal.cancel(path, commitment, reason, store.now())
            typer.echo(
                f"cancelled {booking.commitment_id} ({booking.nodes} nodes, {booking.start} .. {booking.end}) "
                f"on {path}: {reason}"
            )
            return
    where = (
        ", ".join(str(p) for p in paths) or f"{Path(workspaces or 'workspace') / 'calendars'} (no calendars)"
    )
    raise ConfigError(
        f"unknown commitment {commitment!r}: no calendar holds it",
        where=where,
        fix="give an id from `campaign calendar show`, or the calendar that holds it with --cluster "
        "or --calendar",
    )


@calendar_app.command("maintenance")
def calendar_maintenance(
    config: ConfigArg,
    start: Annotated[str, typer.Option("--start", help="Start, ISO 8601.")],
    hours: Annotated[float, typer.Option("--hours", min=0.01, max=8784.0, help="Length, hours.")],
    reason: Annotated[str, typer.Option("--reason", help="What the maintenance is.")],
    nodes: Annotated[
        int | None,
        typer.Option("--nodes", min=1, max=2_000_000, help="Nodes it takes (default: the whole cluster)."),
    ] = None,
    workspace: WorkspaceOpt = None,
    calendar: CalendarOpt = None,
    set_: SetOpt = None,
) -> None:
    """Book a maintenance window on the cluster of CONFIG (a booking like any other; cancel it by its id)."""
    import uuid
    from datetime import timedelta

    from campaign import calendar as cal
    from campaign import store
    from campaign.calendar.horizon import parse_moment

    if not reason.strip():
        raise ConfigError("a maintenance window needs a reason", where="--reason", fix="say what it is")
    from campaign.config import load_config

    loaded = load_config(config, list(set_ or []))
    cfg = loaded.config
    ws = store.workspace_for(cfg.name, workspace)
    with _calendar_env(calendar):
        path = cal.calendar_path(cfg.cluster.name, ws.root)
    identity = cal.cluster_identity(cfg.cluster)
    booking = cal.book(
        path,
        identity,
        cal.BookingRequest(
            commitment_id=f"m-{uuid.uuid4().hex[:12]}",
            campaign="maintenance",
            kind=cal.MAINTENANCE,
            nodes=nodes or identity.total_nodes,
            duration=timedelta(seconds=round(hours * 3600)),
            start=parse_moment(start, "--start"),
            note=reason,
            start_given_by="--start",
        ),
        store.now(),
    )
    typer.echo(
        f"maintenance {booking.commitment_id}: {booking.nodes} nodes {booking.start} .. {booking.end} on {path}"
    )

"""The calendar file of one cluster: a DuckDB catalog of bookings, guarded by a file lock for every access.

One calendar per cluster, by default `calendars/<cluster name>.duckdb` in the folder that holds the workspaces
(`workspace/calendars/` for the default layout; beside the `--workspace` folder otherwise); `--calendar PATH` or
`CAMPAIGN_CALENDAR` (a file, or a folder of calendars) shares one, e.g. on a team file system. A calendar belongs
to the cluster whose topology digest it was created with and refuses any other. The lock is held for one short
transaction (a booking, a cancel, a read), never while a flow waits.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
from filelock import FileLock, Timeout

from campaign.calendar.gaps import Pricing, idle_node_w
from campaign.calendar.timeline import (
    CAMPAIGN,
    HELD,
    Booking,
    blocking,
    ceil_minute,
    earliest_fit,
    utc_seconds,
)
from campaign.config import ClusterConfig
from campaign.errors import ConfigError, DataError, Refused, WorkspaceBusy
from campaign.files import atomic_write_json
from campaign.sql.rows import first_row, one_row, rows, scalar

SCHEMA_VERSION = 1
CALENDAR_ENV = "CAMPAIGN_CALENDAR"
DEFAULT_WORKSPACES = Path("workspace")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# ------------------------------------------------------------------------------------------ where and whose


@dataclass(frozen=True)
class ClusterIdentity:
    """What makes a calendar this cluster's: its name and topology (not the job's nodes, prices or failures)."""

    name: str
    total_nodes: int
    topology: dict[str, Any]
    pricing: Pricing
    total_given: bool = True  # False: cluster.total_nodes was not set; an existing calendar's size is taken

    @property
    def topology_digest(self) -> str:
        canonical = json.dumps(self.topology, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def cluster_identity(cluster: ClusterConfig) -> ClusterIdentity:
    topology = {
        "name": cluster.name,
        "total_nodes": cluster.capacity_nodes,
        "gpus_per_node": cluster.gpus_per_node,
        "accelerator": cluster.accelerator.name,
        "nvlink_domain_gpus": cluster.network.nvlink_domain_gpus,
        "pod_gpus": cluster.network.pod_gpus,
    }
    pricing = Pricing(
        cluster.gpus_per_node,
        cluster.cost.gpu_hour_usd,
        cluster.cost.energy_usd_per_mwh,
        idle_node_w(
            cluster.gpus_per_node,
            cluster.accelerator.idle_w,
            cluster.power.node_overhead_w,
            cluster.power.pue,
        ),
    )
    return ClusterIdentity(
        cluster.name, cluster.capacity_nodes, topology, pricing, cluster.total_nodes is not None
    )


def _check_name(cluster_name: str) -> str:
    if not _NAME.match(cluster_name):
        raise ConfigError(
            f"cluster name {cluster_name!r} cannot name a calendar file",
            where="cluster.name",
            fix="use letters, digits, '.', '_' and '-' only (e.g. demo-h100-16)",
        )
    return cluster_name


def calendar_path(
    cluster_name: str, workspace_root: Path | None = None, override: str | Path | None = None
) -> Path:
    """`--calendar PATH`, else CAMPAIGN_CALENDAR, else calendars/<cluster>.duckdb in the folder holding the
    workspace (`workspace/` when there is none). A folder given either way holds one file per cluster."""
    chosen = override or os.environ.get(CALENDAR_ENV) or None
    if chosen:
        path = Path(chosen).expanduser()
        if path.is_dir() or str(chosen).endswith(("/", os.sep)):
            path = path / f"{_check_name(cluster_name)}.duckdb"
        return path.resolve()
    root = workspace_root.parent if workspace_root is not None else DEFAULT_WORKSPACES
    return (root / "calendars" / f"{_check_name(cluster_name)}.duckdb").resolve()


def calendars_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.duckdb")) if folder.is_dir() else []


# -------------------------------------------------------------------------------------------- the file


def lock_wait_s() -> float:
    from campaign.store import lock_wait_s as workspace_lock_wait_s

    return workspace_lock_wait_s()


@contextmanager
def _locked(path: Path, command: str) -> Iterator[None]:
    lock = FileLock(str(path) + ".lock", is_singleton=False)
    holder = Path(str(path) + ".lock.json")
    try:
        lock.acquire(timeout=lock_wait_s())
    except Timeout:
        try:
            info = json.loads(holder.read_text())
            who = f"pid {info['pid']} on {info['host']} ({info['command']}, since {info['since']})"
        except (OSError, ValueError, KeyError):
            who = "another campaign command"
        raise WorkspaceBusy(
            f"the cluster calendar is locked by {who}",
            where=str(path),
            fix="run the command again in a moment (a booking holds the lock for milliseconds; a "
            "killed holder releases it by itself)",
        ) from None
    try:
        atomic_write_json(
            holder,
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "command": command,
                "since": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        )
        yield
    finally:
        holder.unlink(missing_ok=True)
        lock.release()


def _sql(name: str) -> str:
    return resources.files("campaign.calendar").joinpath(f"{name}.sql").read_text(encoding="utf-8")


@contextmanager
def _connect(path: Path, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    try:
        con = duckdb.connect(str(path), read_only=not write)
    except duckdb.Error as exc:
        raise DataError(
            f"cannot open the cluster calendar ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})",
            where=str(path),
            fix="close programs that have it open; if it is damaged, move it aside "
            "(the bookings it held must then be committed again)",
        ) from None
    try:
        con.execute("SET TimeZone = 'UTC'")
        yield con
    finally:
        con.close()


@contextmanager
def open_calendar(
    path: Path, command: str, identity: ClusterIdentity | None = None, create: bool = False
) -> Iterator[duckdb.DuckDBPyConnection]:
    """The locked calendar, its cluster checked against `identity`. `create` makes a missing file (bookings only);
    otherwise a missing calendar is bad input naming the path."""
    if not path.exists() and not create:
        raise ConfigError(
            "no calendar here (nothing has been booked on this cluster yet)",
            where=str(path),
            fix="commit a campaign on the cluster first, or pass the calendar with --calendar PATH "
            f"(or {CALENDAR_ENV})",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path, command), _connect(path, write=True) as con:
        try:
            is_new = not scalar(
                con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'calendar_meta'"
            )
            if is_new and path.stat().st_size > 0 and scalar(con, "SELECT count(*) FROM duckdb_tables()"):
                raise DataError(
                    "this DuckDB file is not a cluster calendar (it has other tables)",
                    where=str(path),
                    fix="pass the calendar file with --calendar, or remove that option",
                )
            if is_new and identity is None:
                raise ConfigError(
                    "this file is not a cluster calendar",
                    where=str(path),
                    fix="pass a calendar file (calendars/<cluster>.duckdb)",
                )
            con.execute(_sql("schema"))
            if is_new:
                assert identity is not None
                con.execute(
                    "INSERT INTO calendar_meta VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        SCHEMA_VERSION,
                        identity.name,
                        identity.topology_digest,
                        json.dumps(identity.topology),
                        identity.total_nodes,
                        datetime.now(UTC),
                    ],
                )
            elif identity is not None:
                _check_identity(con, path, identity)
        except duckdb.Error as exc:
            raise DataError(
                f"the cluster calendar cannot be read ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:200]})",
                where=str(path),
                fix="move the damaged file aside; the bookings it held must then be committed again",
            ) from None
        yield con


def _check_identity(con: duckdb.DuckDBPyConnection, path: Path, identity: ClusterIdentity) -> None:
    meta = one_row(con, "SELECT cluster, topology_digest, topology, total_nodes FROM calendar_meta LIMIT 1")
    name, digest, total = meta["cluster"], meta["topology_digest"], meta["total_nodes"]
    if digest == identity.topology_digest:
        return
    theirs = json.loads(meta["topology"])
    if not identity.total_given:
        # No cluster.total_nodes in the config: the calendar knows the cluster's size; the rest must match.
        same_size = ClusterIdentity(
            identity.name,
            theirs.get("total_nodes"),
            {**identity.topology, "total_nodes": theirs.get("total_nodes")},
            identity.pricing,
        )
        if same_size.topology_digest == digest:
            return
    differences = ", ".join(
        f"{k}: calendar {theirs.get(k)!r}, config {v!r}"
        for k, v in identity.topology.items()
        if theirs.get(k) != v
    )
    raise ConfigError(
        f"this is the calendar of cluster '{name}' ({total} nodes, topology {digest[:12]}), not of the cluster the "
        f"config describes ('{identity.name}', {identity.total_nodes} nodes, topology "
        f"{identity.topology_digest[:12]}); they differ in {differences}",
        where=str(path),
        fix="use this cluster's own calendar (--calendar PATH or CAMPAIGN_CALENDAR), or describe the same cluster in "
        "the config (e.g. --set cluster.total_nodes=<the cluster's nodes>, which every campaign sharing it gives)",
    )


# ---------------------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class CalendarState:
    path: Path
    cluster: str
    topology_digest: str
    total_nodes: int
    pricing: Pricing
    bookings: tuple[Booking, ...]
    price_history: tuple[tuple[datetime, Pricing], ...] = ()  # (valid_from, prices), oldest first


def _state(con: duckdb.DuckDBPyConnection, path: Path, pricing: Pricing | None = None) -> CalendarState:
    meta = one_row(con, "SELECT cluster, topology_digest, total_nodes FROM calendar_meta")
    history = tuple(
        (utc_seconds(r.pop("valid_from")), Pricing(**r))
        for r in rows(
            con,
            "SELECT valid_from, gpus_per_node, gpu_hour_usd, energy_usd_per_mwh, idle_node_w FROM prices "
            "ORDER BY valid_from, rowid",
        )
    )
    recorded = history[-1][1] if history else None
    bookings = tuple(_utc_booking(Booking(**r)) for r in rows(con, _sql("bookings")))
    return CalendarState(
        path,
        meta["cluster"],
        meta["topology_digest"],
        int(meta["total_nodes"]),
        pricing or recorded or Pricing(1, 0.0, 0.0, 0.0),
        bookings,
        history,
    )


def _utc_booking(b: Booking) -> Booking:
    from dataclasses import replace

    return replace(
        b,
        start=utc_seconds(b.start),
        end=utc_seconds(b.end),
        actual_end=utc_seconds(b.actual_end) if b.actual_end else None,
    )


def read_calendar(path: Path, identity: ClusterIdentity | None = None) -> CalendarState:
    """Every booking of the calendar (an empty calendar if the file does not exist yet and `identity` says
    which cluster it would be)."""
    if not path.exists() and identity is not None:
        return CalendarState(
            path, identity.name, identity.topology_digest, identity.total_nodes, identity.pricing, ()
        )
    with open_calendar(path, "calendar read", identity) as con:
        return _state(con, path)


def find_booking(state: CalendarState, commitment_id: str) -> Booking | None:
    """The booking of a commitment: the one holding capacity, else the newest (cancelled) one."""
    mine = [b for b in state.bookings if b.commitment_id == commitment_id]
    holding = [b for b in mine if b.holds]
    return (holding or sorted(mine, key=lambda b: b.created_at or b.start))[-1] if mine else None


# ---------------------------------------------------------------------------------------------- booking


@dataclass(frozen=True)
class BookingRequest:
    commitment_id: str
    campaign: str
    nodes: int
    duration: timedelta
    start: datetime | None  # None: the earliest start where it fits (window.start: auto)
    kind: str = CAMPAIGN
    align: str = "minute"  # what an auto start (start None) is rounded up to: minute, hour or day (UTC)
    workspace: str | None = None
    config_digest: str | None = None
    data_digest: str | None = None
    note: str = ""
    start_given_by: str = "window.start"  # what the user set the start with: a config key or a command option


def book(
    path: Path, identity: ClusterIdentity, request: BookingRequest, now: datetime, hold: bool = False
) -> Booking:
    """Book `request` on the calendar in one locked transaction, or refuse naming what holds the capacity.
    `hold`: a tentative hold (status "held") while a person decides; it holds the capacity as a booking does.

    Idempotent: a commitment (or the same workspace and digests) already holding a booking gets that booking back,
    so a commit killed after booking and run again books nothing twice; booking over its own hold books exactly
    the held dates and nodes."""
    now = utc_seconds(now)
    with open_calendar(path, f"book {request.commitment_id}", identity, create=True) as con:
        state = _state(con, path, identity.pricing)
        for b in state.bookings:
            if b.holds and (
                b.commitment_id == request.commitment_id
                or (
                    request.workspace is not None
                    and b.workspace == request.workspace
                    and b.config_digest == request.config_digest
                    and b.data_digest == request.data_digest
                )
            ):
                if b.status == HELD and not hold:
                    return _set_status(con, b, "booked", "booked", now, "the hold, approved")
                return b
        if request.nodes > state.total_nodes:
            raise ConfigError(
                f"a booking of {request.nodes} nodes is larger than the cluster "
                f"'{state.cluster}' ({state.total_nodes} nodes)",
                where=str(path),
                fix=f"book at most {state.total_nodes} nodes",
            )
        if request.start is None:
            start = earliest_fit(
                state.bookings,
                request.nodes,
                request.duration,
                state.total_nodes,
                ceil_minute(now),
                request.align,
            )
        else:
            start = utc_seconds(request.start)
            if start < now:
                soon = ceil_minute(now + timedelta(hours=1)).isoformat()
                given_by = request.start_given_by
                raise ConfigError(
                    f"the window starts at {start.isoformat()}, which is in the past (now {now.isoformat()})",
                    where=given_by,
                    fix=(
                        f"set window.start to a future time (e.g. --set window.start={soon}), or to auto for the "
                        "earliest free start"
                        if given_by == "window.start"
                        else f"pass a future {given_by} (e.g. {given_by} {soon})"
                    ),
                )
        end = start + request.duration
        holders = blocking(state.bookings, start, end, request.nodes, state.total_nodes)
        if holders:
            later = earliest_fit(state.bookings, request.nodes, request.duration, state.total_nodes, start)
            soonest = earliest_fit(
                state.bookings, request.nodes, request.duration, state.total_nodes, ceil_minute(now)
            )
            also = f" (the earliest from now is {_iso(soonest)})" if soonest < later else ""
            raise Refused(
                f"the cluster '{state.cluster}' has no room for {request.nodes} nodes over {_iso(start)} .. "
                f"{_iso(end)}: the capacity ({state.total_nodes} nodes) is held by "
                + "; ".join(b.describe() for b in holders)
                + f". Earliest free start at or after {_iso(start)}: {_iso(later)}{also}",
                where=str(path),
                fix=f"set window.start={_iso(later)} (or auto), shrink the campaign (cluster.nodes, "
                "cluster.spare_nodes), or cancel a booking with `campaign calendar cancel ID --reason TEXT`",
            )
        booking = Booking(
            booking_id=f"b-{uuid.uuid4().hex[:12]}",
            commitment_id=request.commitment_id,
            kind=request.kind,
            campaign=request.campaign,
            nodes=request.nodes,
            start=start,
            end=end,
            status=HELD if hold else "booked",
            workspace=request.workspace,
            config_digest=request.config_digest,
            data_digest=request.data_digest,
            note=request.note,
            created_at=now,
        )
        con.execute("BEGIN TRANSACTION")
        try:
            _record_prices(con, state, identity.pricing, now, request.commitment_id)
            con.execute(
                "INSERT INTO bookings (booking_id, commitment_id, kind, campaign, workspace, config_digest, "
                "data_digest, nodes, start_at, end_at, actual_end, status, note, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)",
                [
                    booking.booking_id,
                    booking.commitment_id,
                    booking.kind,
                    booking.campaign,
                    booking.workspace,
                    booking.config_digest,
                    booking.data_digest,
                    booking.nodes,
                    booking.start,
                    booking.end,
                    booking.status,
                    booking.note,
                    now,
                ],
            )
            con.execute(
                "INSERT INTO booking_events VALUES (?, ?, ?, ?)",
                [
                    booking.booking_id,
                    booking.status,
                    now,
                    f"{booking.nodes} nodes {_iso(start)} .. {_iso(end)}",
                ],
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return booking


def _set_status(
    con: duckdb.DuckDBPyConnection, booking: Booking, status: str, event: str, now: datetime, detail: str
) -> Booking:
    """One booking's new status and the event that says why, in one transaction."""
    from dataclasses import replace

    note = f"{event}: {detail}" if status == "cancelled" else booking.note
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            "UPDATE bookings SET status = ?, note = ? WHERE booking_id = ?",
            [status, note, booking.booking_id],
        )
        con.execute(
            "INSERT INTO booking_events VALUES (?, ?, ?, ?)", [booking.booking_id, event, now, detail]
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return replace(booking, status=status, note=note)


def confirm_hold(path: Path, booking_id: str, now: datetime) -> Booking:
    """A yes: the hold becomes the booking, with exactly its dates and nodes (idempotent). Refused when the hold
    was released meanwhile (e.g. `campaign calendar cancel`), so a yes never books other dates than it saw, and
    when its start passed while the approval waited."""
    now = utc_seconds(now)
    with open_calendar(path, f"confirm {booking_id}") as con:
        state = _state(con, path)
        found = [b for b in state.bookings if b.booking_id == booking_id]
        if found and found[0].status == HELD and found[0].start < now:
            raise Refused(
                f"the held window starts {_iso(found[0].start)}, before the approval came ({_iso(now)}); "
                "nothing booked",
                where=str(path),
                fix="commit again: it holds the earliest window from now and asks for approval of its dates",
            )
        if found and found[0].status == HELD:
            return _set_status(con, found[0], "booked", "booked", now, "the hold, approved")
        if found and found[0].status in ("booked", "executed"):
            return found[0]
        what = f"was released ({found[0].note})" if found else "is not on this calendar"
        raise Refused(
            f"the calendar hold {booking_id} {what} while the approval was pending; nothing booked",
            where=str(path),
            fix="commit again: it holds a window anew and asks for approval of its dates",
        )


def release_hold(path: Path, commitment_id: str, reason: str, now: datetime) -> Booking | None:
    """Release the tentative hold of a commitment (a no, a timeout, a cancelled run): recorded as cancelled with
    the reason, never deleted. A booking that is no longer a hold (booked on a yes) is left alone; None if the
    commitment holds nothing here."""
    now = utc_seconds(now)
    with open_calendar(path, f"release {commitment_id}") as con:
        booking = find_booking(_state(con, path), commitment_id)
        if booking is None or booking.status != HELD:
            return booking
        return _set_status(con, booking, "cancelled", "hold released", now, reason)


def _record_prices(
    con: duckdb.DuckDBPyConnection, state: CalendarState, pricing: Pricing, now: datetime, by: str
) -> None:
    row = first_row(
        con,
        "SELECT gpus_per_node, gpu_hour_usd, energy_usd_per_mwh, idle_node_w FROM prices "
        "ORDER BY valid_from DESC LIMIT 1",
    )
    if row is None or Pricing(**row) != pricing:
        con.execute(
            "INSERT INTO prices VALUES (?, ?, ?, ?, ?, ?)",
            [
                now,
                pricing.gpus_per_node,
                pricing.gpu_hour_usd,
                pricing.energy_usd_per_mwh,
                pricing.idle_node_w,
                by,
            ],
        )


def _iso(moment: datetime) -> str:
    return utc_seconds(moment).isoformat().replace("+00:00", "Z")


def cancel(path: Path, commitment_id: str, reason: str, now: datetime) -> Booking:
    """Release the booking of a commitment (or a maintenance window): recorded with its reason, never deleted."""
    if not reason.strip():
        raise ConfigError(
            "a cancellation needs a reason", where="--reason", fix="say why, e.g. --reason 'data redo'"
        )
    now = utc_seconds(now)
    with open_calendar(path, f"cancel {commitment_id}") as con:
        state = _state(con, path)
        booking = find_booking(state, commitment_id)
        if booking is None:
            known = ", ".join(sorted({b.commitment_id for b in state.bookings})) or "none"
            raise ConfigError(
                f"unknown commitment {commitment_id!r} on the calendar of cluster '{state.cluster}' "
                f"(known: {known})",
                where=str(path),
                fix="give a commitment id from `campaign calendar show` (or the calendar of its "
                "cluster with --cluster / --calendar)",
            )
        if booking.status == "cancelled":
            when = first_row(
                con,
                "SELECT event_at, detail FROM booking_events WHERE booking_id = ? AND event = 'cancelled' "
                "ORDER BY event_at DESC LIMIT 1",
                [booking.booking_id],
            )
            said = f"on {_iso(when['event_at'])} ({when['detail']})" if when else f"earlier ({booking.note})"
            raise Refused(
                f"commitment {commitment_id} was already cancelled {said}; nothing to release",
                where=str(path),
                fix="nothing to do: its capacity is already free (`campaign calendar show` lists it as cancelled)",
            )
        if booking.status == "executed":
            raise Refused(
                f"commitment {commitment_id} was already executed (it ended {_iso(booking.held_until)}); "
                "an executed window cannot be cancelled",
                where=str(path),
                fix="nothing to release: the time after its actual end is already free",
            )
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                "UPDATE bookings SET status = 'cancelled', note = ? WHERE booking_id = ?",
                [f"cancelled: {reason}", booking.booking_id],
            )
            con.execute(
                "INSERT INTO booking_events VALUES (?, 'cancelled', ?, ?)", [booking.booking_id, now, reason]
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        from dataclasses import replace

        return replace(booking, status="cancelled", note=f"cancelled: {reason}")


def record_actual_end(
    path: Path, identity: ClusterIdentity, commitment_id: str, actual_end: datetime, now: datetime
) -> Booking:
    """After execute: the booking ends when the job did; the rest of its window is released (an early-finish gap)."""
    with open_calendar(path, f"execute {commitment_id}", identity) as con:
        state = _state(con, path)
        booking = find_booking(state, commitment_id)
        if booking is None or not booking.holds:
            raise Refused(
                f"commitment {commitment_id} holds no booking on this calendar",
                where=str(path),
                fix="commit again to book the window",
            )
        end = min(utc_seconds(actual_end), booking.end)
        end = max(end, booking.start)
        if booking.status == "executed" and booking.actual_end == end:
            return booking
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                "UPDATE bookings SET status = 'executed', actual_end = ? WHERE booking_id = ?",
                [end, booking.booking_id],
            )
            con.execute(
                "INSERT INTO booking_events VALUES (?, 'executed', ?, ?)",
                [
                    booking.booking_id,
                    utc_seconds(now),
                    (f"actual end {_iso(end)}; booked end {_iso(booking.end)}"),
                ],
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        from dataclasses import replace

        return replace(booking, status="executed", actual_end=end)

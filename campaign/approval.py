"""What a person approves when a commitment needs approval, and the marker that says a run waits for it.

The request gathers what the approver must see to say yes: the window (start, end, days) and the GPUs of the
tentative hold the commit put on the cluster's calendar before asking (a yes books exactly that hold; a no, a timeout
or a cancelled run releases it), the GPUs it books (job and spares), the plan's expected days and the p90 completion time of the window's replicas, the reserved cost,
every required gate with the figure it was judged on, and the two digests the verdict belongs to.

Sources: the gate records of the newest validate for these digests (`store.latest_gates`; the schedule gate's
`window_length` details carry the p90 from `campaign.calendar.window_length`), the plan
(`campaign.plan.make_plan`: expected days = target tokens / (tokens per second x expected ETTR)), and the
cluster's price (`cluster.cost.gpu_hour_usd`): reserved cost = the hold's GPUs x its hours x GPU-hour price.

While the run waits, `<workspace>/approval-pending.json` names it (flow run id, its UI address, since when), so
other commands can say where a run waits instead of only "busy". Campaign removes the marker only when it is the
one this run wrote (its flow run id), so it never deletes a file it did not write.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from campaign.calendar.timeline import Booking
from campaign.config import CampaignConfig
from campaign.files import atomic_write_json
from campaign.gates import REQUIRED_GATES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from campaign.plan import Plan
    from campaign.store import GateRecord

PENDING_FILE = "approval-pending.json"
WRITER = "campaign commit"


@dataclass(frozen=True)
class GateLine:
    gate: str
    passed: bool
    figure: str


@dataclass(frozen=True)
class ApprovalRequest:
    campaign: str
    window_start: str  # ISO 8601, or "auto (...)" when the calendar picks it at booking
    window_end: str | None
    window_days: float
    gpus: int  # the job's GPUs
    booked_gpus: int  # job and spares: what the booking holds
    expected_days: float | None  # the plan's expected campaign length
    p90_days: (
        float | None
    )  # p90 completion time of the window's replicas; inf beyond the window; None unknown
    cost_usd: float  # booked GPUs x window hours x GPU-hour price
    gpu_hour_usd: float
    gates: tuple[GateLine, ...]
    config_digest: str
    data_digest: str
    # The expected length at the low and high ends of the plan's step-time band, and what the band rests on.
    expected_days_range: tuple[float, float] | None = None
    plan_basis: str = ""
    hold_id: str | None = None  # the calendar booking held while the approval waits
    commitment_id: str | None = None
    cluster: str | None = None

    def headline(self) -> str:
        """One line: what a yes books."""
        end = f" .. {self.window_end}" if self.window_end else ""
        return (
            f"Book {self.campaign}: window {self.window_start}{end} ({self.window_days:g} days) on "
            f"{self.gpus:,} GPUs ({self.booked_gpus:,} with spares), ${self.cost_usd:,.0f} reserved"
        )

    def markdown(self) -> str:
        """The approval artifact and the resume form's description (Markdown, no raw HTML)."""

        def days(value: float | None) -> str:
            if value is None:
                return "unknown"
            return "beyond the window" if math.isinf(value) else f"{value:.2f} days"

        gates_passed = sum(g.passed for g in self.gates)
        lines = [
            f"## Approve the window of `{self.campaign}`?",
            "",
            "| | |",
            "| --- | --- |",
            (
                f"| Window | {self.window_start}{' .. ' + self.window_end if self.window_end else ''} "
                f"({self.window_days:g} days) |"
            ),
            f"| GPUs | {self.gpus:,} for the job, {self.booked_gpus:,} booked with spares |",
            *self._hold_rows(),
            (
                f"| Expected length | {days(self.expected_days)} (plan"
                + (
                    f"; {self.expected_days_range[0]:.2f}-{self.expected_days_range[1]:.2f} days over its step-time band"
                    if self.expected_days_range
                    else ""
                )
                + f"); p90 {days(self.p90_days)} (replicas) |"
            ),
            *([f"| Plan basis | {_cell(self.plan_basis)} |"] if self.plan_basis else []),
            (
                f"| Reserved cost | ${self.cost_usd:,.2f} ({self.booked_gpus:,} GPUs x {self.window_days * 24:,.1f} h x "
                f"${self.gpu_hour_usd:g}/GPU-h) |"
            ),
            f"| Config digest | `{self.config_digest}` |",
            f"| Gate evidence digest (prepared data and the files the gates read) | `{self.data_digest}` |",
            "",
            f"### Gates ({gates_passed}/{len(self.gates)} passed)",
            "",
            "| gate | result | figure |",
            "| --- | --- | --- |",
        ]
        lines += [
            f"| {g.gate} | {'passed' if g.passed else '**FAILED**'} | {_cell(g.figure)} |" for g in self.gates
        ]
        lines += [
            "",
            "Approve to book the window; reject (with a comment) to fail the commit run and book nothing.",
        ]
        return "\n".join(lines)

    def _hold_rows(self) -> list[str]:
        if self.hold_id is None:
            return []
        return [
            (
                f"| Calendar hold | `{self.hold_id}` ({self.commitment_id}) on cluster `{self.cluster}`: these dates "
                "and GPUs are held for you until you answer; a yes books exactly them, a no or no answer releases "
                "them |"
            )
        ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;")


def replica_p90_days(config: CampaignConfig, plan: Plan, replicas: int) -> float | None:
    """The p90 day, of `replicas` seeded replicas of the window, on which the target is reached (inf: beyond the
    window), when the schedule gate did not judge the window (`gates.config.window_replicas` 0): the gate's own
    judgement with that many replicas."""
    # The simulator loads only when the gate did not judge the window.
    from campaign.window_judge import judge_window

    p90 = judge_window(config, plan, replicas).p90_completion_days
    return math.inf if p90 is None else p90


def approval_request(
    config: CampaignConfig,
    config_digest: str,
    data_digest: str,
    gates: Mapping[str, GateRecord],
    expected_days: float | None,
    p90_days: float | None = None,
    plan: Plan | None = None,
    hold: Booking | None = None,
) -> ApprovalRequest:
    """The request for these digests from the recorded gates (`store.latest_gates`) and the plan's expected days;
    the p90 from the schedule gate's replicas, else `p90_days`. With the calendar's tentative `hold`, the window,
    the GPUs and the cost are exactly the hold's (its start resolves `window.start: auto`)."""
    window = config.window
    fixed = window.fixed_start
    days = float(window.days)
    booked_gpus = config.cluster.booked_nodes * config.cluster.gpus_per_node
    end: str | None
    if hold is not None:
        start, end = hold.start.isoformat(), hold.end.isoformat()
        days = (hold.end - hold.start).total_seconds() / 86_400
        booked_gpus = hold.nodes * config.cluster.gpus_per_node
    elif fixed is None:
        start, end = "auto (the earliest start that fits on the cluster's calendar, found when booking)", None
    else:
        start_dt = fixed if fixed.tzinfo else fixed.replace(tzinfo=UTC)
        start = start_dt.isoformat()
        end = (start_dt + timedelta(seconds=round(window.days * 86_400))).isoformat()
    cost = booked_gpus * days * 24 * config.cluster.cost.gpu_hour_usd
    p90 = p90_days
    lines = []
    for gate in REQUIRED_GATES:
        record = gates.get(gate)
        if record is None:
            lines.append(GateLine(gate, False, "not run for these digests"))
            continue
        details = record.details
        lines.append(GateLine(gate, bool(record.passed), str(details.get("summary", ""))))
        if gate == "schedule" and details.get("window_length"):
            p90 = details["window_length"].get("p90_completion_days")
            p90 = math.inf if p90 is None else p90  # judged, and beyond the window
    finite = expected_days if expected_days is not None and math.isfinite(expected_days) else None
    return ApprovalRequest(
        config.name,
        start,
        end,
        days,
        config.cluster.gpus,
        booked_gpus,
        finite,
        p90,
        round(cost, 2),
        float(config.cluster.cost.gpu_hour_usd),
        tuple(lines),
        config_digest,
        data_digest,
        _days_range(finite, plan),
        plan.basis if plan is not None else "",
        hold.booking_id if hold else None,
        hold.commitment_id if hold else None,
        config.cluster.name if hold else None,
    )


def _days_range(expected_days: float | None, plan: Plan | None) -> tuple[float, float] | None:
    """The expected length at the ends of the plan's step-time band (length scales with the step time)."""
    if plan is None or expected_days is None:
        return None
    band = plan.step_time_range_s
    if not band or not band[0] > 0 or not plan.step_time_s > 0:
        return None
    return expected_days * band[0] / plan.step_time_s, expected_days * band[1] / plan.step_time_s


# ---------------------------------------------------------------------------------------------- the marker


@dataclass(frozen=True)
class PendingApproval:
    flow_run_id: str
    url: str | None
    since: str
    headline: str

    def describe(self) -> str:
        where = (
            f" at {self.url}"
            if self.url
            else " (answer it in the Prefect UI, flow run " + self.flow_run_id + ")"
        )
        return f"commit run {self.flow_run_id} waits for approval{where} since {self.since}"


def write_pending(ws_root: Path, flow_run_id: str, url: str | None, headline: str) -> PendingApproval:
    pending = PendingApproval(flow_run_id, url, datetime.now(UTC).isoformat(timespec="seconds"), headline)
    atomic_write_json(Path(ws_root) / PENDING_FILE, {"written_by": WRITER, **asdict(pending)})
    return pending


def read_pending(ws_root: Path) -> PendingApproval | None:
    """The run waiting for approval in this workspace, or None (no marker, or not one campaign wrote)."""
    try:
        raw = json.loads((Path(ws_root) / PENDING_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("written_by") != WRITER:
        return None
    try:
        return PendingApproval(
            str(raw["flow_run_id"]), raw.get("url"), str(raw["since"]), str(raw["headline"])
        )
    except KeyError:
        return None


def clear_pending(ws_root: Path, flow_run_id: str) -> None:
    """Remove the marker if it is the one this run wrote; leave anything else alone."""
    pending = read_pending(ws_root)
    if pending is not None and pending.flow_run_id == flow_run_id:
        (Path(ws_root) / PENDING_FILE).unlink(missing_ok=True)

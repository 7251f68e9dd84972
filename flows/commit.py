"""The commit stage: book the window only if every gate passed for exactly this config and data."""

import sys
from typing import Literal

from prefect import flow, get_run_logger
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from pydantic import ConfigDict, Field, create_model, model_validator

from campaign import store
from campaign.approval import ApprovalRequest, clear_pending, write_pending
from campaign.approval_form import wrappable
from campaign.errors import CampaignError, Refused
from campaign.window import window_inputs, with_start
from flows.common import StageParams, campaign_tags, fails_cleanly, stage_run, stage_run_name
from tasks.calendar import book_calendar, confirm_hold, hold_calendar, release_hold
from tasks.commit import (
    book_window,
    check_gates,
    publish_approval_request,
    recheck_after_approval,
    record_answer,
    schedule_execute,
)
from tasks.config import load_campaign
from tasks.power import write_power_notice

Decision = Literal["approve", "reject"]


class Approval(RunInput):
    """The resume form of a commit that needs a person's approval. The form built for a run
    (`approval_form`) carries that run's window, GPUs, days, cost, gates and digests in its description.

    The decision has no default, so a form submitted with only a name is refused by the Prefect server (the run
    stays paused, holding its dates) instead of rejecting the window; a rejection needs a comment. Both rules are
    in the form's JSON schema, which the server checks before it resumes the run."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            # A rejection without a reason is refused by the server (JSON Schema if/then), so the run stays
            # paused and the approver is asked again, rather than failing the run here.
            "if": {"properties": {"decision": {"const": "reject"}}, "required": ["decision"]},
            "then": {"properties": {"comment": {"minLength": 1, "pattern": "\\S"}}, "required": ["comment"]},
        },
    )

    decision: Decision = Field(
        description="Approve books the window described above; reject (with a comment) books nothing."
    )
    approver: str = Field(
        min_length=1, max_length=200, description="Your name; recorded with the commitment."
    )
    comment: str = Field(
        "", max_length=2000, description="Why; required when you reject, and read by the team."
    )

    @model_validator(mode="after")
    def _reject_says_why(self) -> "Approval":
        if self.decision == "reject" and not self.comment.strip():
            raise ValueError("a rejection needs a comment: say why, for the team")
        return self

    @property
    def approved(self) -> bool:
        return self.decision == "approve"


def approval_form(request: ApprovalRequest) -> type[Approval]:
    """The Approval form for this request: its description (shown above the form in the UI) is the request (its
    tables as lists, which wrap in the UI's narrow modal), and
    the decision's help names what a yes books."""
    form = create_model(
        "Approval",
        __base__=Approval,
        decision=(
            Decision,
            Field(
                description=(
                    f"Approve: {request.headline()}. Reject (say why in the comment): book nothing and release "
                    f"the hold. Gates: {sum(g.passed for g in request.gates)}/{len(request.gates)} passed; "
                    f"config {request.config_digest[:12]}, data {request.data_digest[:12]}."
                ),
            ),
        ),
    )
    form._description = wrappable(request.markdown())  # the modal is narrow: nothing cut off
    return form


def wait_for_approval(ws: store.Workspace, request: ApprovalRequest, timeout_s: int) -> Approval:
    """Pause for a person's answer WITHOUT holding the workspace lock; `approval-pending.json` says where the run
    waits meanwhile. The caller re-checks everything after this returns (the lock was let go)."""
    from prefect.runtime import flow_run as current

    run_id, url = str(current.id or "local"), current.ui_url
    with store.released(ws, "campaign commit (approved; re-checking)"):
        write_pending(ws.root, run_id, url, request.headline())
        get_run_logger().info("waiting for approval (up to %d s): %s", timeout_s, request.headline())
        parent = show_waiting_on_parent(
            f"commit run {current.name or run_id} waits for approval: {request.headline()}"
        )
        try:
            return pause_flow_run(
                wait_for_input=approval_form(request),
                timeout=timeout_s,
                poll_interval=2,
                key=f"approval-{request.config_digest[:12]}-{request.data_digest[:12]}",
            )
        except FlowPauseTimeout:
            raise Refused(
                f"no answer to the approval request within {timeout_s} s; nothing booked",
                where=str(ws.root),
                fix="commit again and answer the approval form in the Prefect UI "
                "(or raise commit.approval_timeout_s)",
            ) from None
        finally:
            clear_pending(ws.root, run_id)
            if parent:
                show_waiting_on_parent(None, parent)


WAITING_STATE = "Awaiting approval"


def show_waiting_on_parent(message: str | None, parent: str | None = None) -> str | None:
    """A lifecycle run would show plain "Running" while its commit subflow is paused: its state is named
    "Awaiting approval" with what it waits for (`message`), and back to "Running" once answered (`None`). Returns
    the parent run's id (None when commit runs on its own). The engine of the parent keeps its own state, so this
    only changes what the UI shows."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run as current
    from prefect.states import Running, State

    parent = parent or current.parent_flow_run_id
    if not parent:
        return None
    state: State[None] = (
        Running(message=message) if message is None else Running(name=WAITING_STATE, message=message)
    )
    try:
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(parent, state, force=True)
    except Exception as exc:  # only what the UI shows: the approval itself goes on
        get_run_logger().warning("could not show the wait on the lifecycle run: %s", exc)
    return str(parent)


@flow(name="commit", flow_run_name=stage_run_name("commit"))
@fails_cleanly
def commit_flow(params: StageParams = StageParams(), schedule_execution: bool = True):
    """Book the window; run as its own deployment with `schedule_execution`, it also schedules `execute-window`
    at the window's start. The lifecycle runs execute itself right after, so it passes False (one execution).
    With `commit.require_approval`, it puts a tentative hold on the calendar (resolving `window.start: auto`),
    publishes exactly that hold's dates, GPUs and cost for approval and waits for a person without holding the
    workspace; after a yes it re-checks the config, the data and the gates, and books exactly the hold. A no, a
    timeout, a failed re-check or a cancelled run releases the hold."""
    loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
    with stage_run(ws, "commit", loaded.digest) as run_id, campaign_tags(loaded.config.name):
        data_digest = check_gates(ws, loaded)
        approved_by, comment = "automatic (every gate passed)", ""
        if loaded.config.commit.require_approval:
            hold = hold_calendar(ws, loaded, data_digest, store.now())
            try:
                request = publish_approval_request(ws, loaded, data_digest, hold)
                answer = wait_for_approval(ws, request, int(loaded.config.commit.approval_timeout_s))
                if not answer.approved:
                    record_answer(ws, request, answer.approver, answer.comment, approved=False)
                    raise Refused(
                        f"booking rejected by {answer.approver}"
                        + (f": {answer.comment}" if answer.comment else " (no comment)"),
                        where=str(ws.root),
                        fix="resolve the approver's concern and commit again",
                    )
                # The lock was let go while waiting: whatever was approved must still be what is booked.
                loaded, data_digest = recheck_after_approval(
                    ws, params.config, params.overrides, params.workspace, request
                )
                booking = confirm_hold(ws, loaded, hold, store.now())
            except CampaignError as err:
                release_hold(ws, loaded, hold, err.message, store.now())
                raise
            except BaseException:  # cancelled (a worker's SIGTERM), Ctrl-C, or a bug: the hold goes back too
                release_hold.fn(ws, loaded, hold, "the commit run ended before an answer", store.now())
                raise
            approved_by, comment = answer.approver, answer.comment
            record_answer(ws, request, approved_by, comment, approved=True)
        else:
            # The calendar lock is held inside book_calendar only (never while waiting for approval above), and
            # the calendar is read afresh there.
            booking = book_calendar(ws, loaded, data_digest, store.now())
        booked = book_window(ws, loaded, data_digest, run_id, approved_by, booking, comment)
        # The utility's warning: commitments/<id>-power.md and .json, and an artifact.
        write_power_notice(
            ws.root / "commitments",
            booked.commitment_id,
            window_inputs(with_start(loaded.config, booked.window_start)),
            loaded.config.sim.replicas,
            f"window {booked.commitment_id}",
        )
        if schedule_execution:
            schedule_execute(booked, params.model_dump())
        return booked


if __name__ == "__main__":
    from campaign_cli.terminal import stage_main

    sys.exit(stage_main("commit"))

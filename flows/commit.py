"""The commit stage: book the window only if every gate passed for exactly this config and data."""

import sys

from prefect import flow
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput

from campaign import store
from campaign.errors import CampaignError, Refused
from campaign.window import window_inputs, with_start
from flows.common import StageParams, failed, quiet_expected_errors, stage_run
from tasks.calendar import book_calendar
from tasks.commit import book_window, check_gates, schedule_execute
from tasks.config import load_campaign
from tasks.power import write_power_notice


class Approval(RunInput):
    approved: bool
    approver: str


@flow(name="commit")
def commit(params: StageParams = StageParams(), schedule_execution: bool = True):
    """Book the window; run as its own deployment with `schedule_execution`, it also schedules `execute-window`
    at the window's start. The lifecycle runs execute itself right after, so it passes False (one execution)."""
    quiet_expected_errors()
    try:
        loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
        with stage_run(ws, "commit", loaded.digest) as run_id:
            data_digest = check_gates(ws, loaded)
            approved_by = "automatic (every gate passed)"
            if loaded.config.commit.require_approval:
                answer = pause_flow_run(wait_for_input=Approval, timeout=int(loaded.config.commit.approval_timeout_s),
                                        poll_interval=2)
                if not answer.approved:
                    raise Refused(f"booking rejected by {answer.approver}", where=str(ws.root),
                                  fix="resolve the approver's concern and commit again")
                approved_by = answer.approver
            # The calendar lock is held inside book_calendar only (never while waiting for approval above).
            booking = book_calendar(ws, loaded, data_digest, store.now())
            booked = book_window(ws, loaded, data_digest, run_id, approved_by, booking)
            # The utility's warning: commitments/<id>-power.md and .json, and an artifact (issue 9).
            write_power_notice(ws.root / "commitments", booked.commitment_id,
                               window_inputs(with_start(loaded.config, booked.window_start)),
                               loaded.config.sim.replicas, f"window {booked.commitment_id}")
            if schedule_execution:
                schedule_execute(booked, params.model_dump())
            return booked
    except CampaignError as err:
        return failed(err)


if __name__ == "__main__":
    from flows.cli import run_stage_main

    sys.exit(run_stage_main("commit"))

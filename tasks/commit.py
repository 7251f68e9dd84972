"""Commit: book the execution window if every gate passed for exactly this config and this data."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import cast

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from campaign import store
from campaign.approval import ApprovalRequest, approval_request, replica_p90_days
from campaign.calendar import Booking
from campaign.config import LoadedConfig, load_config
from campaign.errors import Refused
from campaign.evidence import gate_file_changes, gate_files, read_evidence
from campaign.files import atomic_write_json
from campaign.gates import commit_problems
from campaign.plan import make_plan
from tasks.artifacts import approval_key


@task(name="check-gates", cache_policy=None)
def check_gates(ws: store.Workspace, loaded: LoadedConfig) -> str:
    """The data digest, recomputed from the files, that the newest validate for this config passed with every
    gate; or refuse naming each missing or failed gate and whatever changed since."""
    return passed_data_digest(ws, loaded)


def passed_data_digest(ws: store.Workspace, loaded: LoadedConfig) -> str:
    evidence = read_evidence(
        ws.data_dir, loaded.config.data.in_workspace(ws.root), files=gate_files(loaded.config)
    )
    if evidence is None:
        raise Refused(
            "nothing to commit: no prepared data (data/manifest.json is missing)",
            where=str(ws.root),
            fix="run `campaign prepare` and `campaign validate` first",
        )
    problems = list(evidence.problems)
    recorded = store.latest_gates(ws, loaded.digest, evidence.digest)
    if not recorded:  # nothing validated for these digests: name a file a gate read that changed since
        last = store.latest_gate_details(ws, loaded.digest, "data_identity")
        problems += gate_file_changes(last.get("gate_files"), evidence.gate_files, "the last validate")
    problems += commit_problems(
        recorded, loaded.digest, evidence.digest, bool(recorded) or store.ever_validated(ws)
    )
    if problems:
        raise Refused(
            "commit refused:\n  - " + "\n  - ".join(problems),
            where=str(ws.root),
            fix="make every gate pass with `campaign validate`, then commit again",
        )
    return evidence.digest


@task(name="approval-request", cache_policy=None)
def publish_approval_request(
    ws: store.Workspace, loaded: LoadedConfig, data_digest: str, hold: Booking | None = None
) -> ApprovalRequest:
    """What the approver is asked: the window, GPUs and cost of the calendar's `hold`, expected days and p90, every
    gate with its figure and the digests, published as a Markdown artifact on the paused run."""
    plan = make_plan(loaded.config)
    gates = store.latest_gates(ws, loaded.digest, data_digest)
    schedule = gates.get("schedule")
    judged = schedule is not None and schedule.details.get("window_length")
    # Without the schedule gate's replicas, the window's p90 comes from `sim.replicas` summary replicas here.
    p90 = (
        None if judged or not plan.fits else replica_p90_days(loaded.config, plan, loaded.config.sim.replicas)
    )
    request = approval_request(
        loaded.config, loaded.digest, data_digest, gates, plan.expected_days, p90, plan, hold=hold
    )
    create_markdown_artifact(
        request.markdown(),
        key=approval_key(loaded.config.name),
        description=f"Approval request: {request.headline()}",
    )
    get_run_logger().info("approval requested: %s", request.headline())
    return request


@task(name="recheck-after-approval", cache_policy=None)
def recheck_after_approval(
    ws: store.Workspace,
    config_path: str,
    overrides: list[str],
    workspace: str | None,
    request: ApprovalRequest,
) -> tuple[LoadedConfig, str]:
    """After the wait (the workspace lock was let go): the config read again from its file, the data digest
    recomputed from the files and the gates looked up again must be exactly what was approved."""
    loaded = load_config(config_path, overrides)
    if loaded.digest != request.config_digest:
        raise Refused(
            f"the config changed while the approval was pending (approved {request.config_digest[:12]}, "
            f"now {loaded.digest[:12]}); nothing booked",
            where=str(loaded.path),
            fix="validate the config you want and commit it again (a new approval)",
        )
    data_digest = passed_data_digest(ws, loaded)
    if data_digest != request.data_digest:
        raise Refused(
            f"the data changed while the approval was pending (approved {request.data_digest[:12]}, "
            f"now {data_digest[:12]}); nothing booked",
            where=str(ws.data_dir),
            fix="validate the data you want and commit it again (a new approval)",
        )
    return loaded, data_digest


@task(name="record-answer", cache_policy=None)
def record_answer(
    ws: store.Workspace, request: ApprovalRequest, approver: str, comment: str, approved: bool
) -> None:
    """The answer beside the request: the artifact shows who answered, how and why."""
    verdict = "Approved" if approved else "Rejected"
    note = f"**{verdict} by {approver}**" + (f": {comment}" if comment else "")
    create_markdown_artifact(
        f"{note}\n\n{request.markdown()}",
        key=approval_key(request.campaign),
        description=f"{verdict} by {approver}: {request.headline()}",
    )
    get_run_logger().info("%s by %s%s", verdict.lower(), approver, f": {comment}" if comment else "")


def commitment_id_for(ws: store.Workspace, config_digest: str, data_digest: str) -> str:
    """The id of this workspace's commitment for these digests, or a new one."""
    existing = [
        c for c in store.commitments(ws) if c.config_digest == config_digest and c.data_digest == data_digest
    ]
    return existing[0].commitment_id if existing else f"c-{uuid.uuid4().hex[:12]}"


@task(name="book-window", cache_policy=None)
def book_window(
    ws: store.Workspace,
    loaded: LoadedConfig,
    data_digest: str,
    run_id: str,
    approved_by: str,
    booking: Booking,
    approval_comment: str = "",
) -> store.Commitment:
    """Record the commitment for the window the calendar booking holds (its start resolves `window.start: auto`)."""
    commitment = store.record_commitment(
        ws,
        store.Commitment(
            commitment_id=booking.commitment_id,
            window_start=booking.start,
            window_end=booking.end,
            config_digest=loaded.digest,
            data_digest=data_digest,
            approved_by=approved_by,
            run_id=run_id,
            created_at=store.now(),
            config_json=json.dumps(loaded.config.model_dump(mode="json", by_alias=True), sort_keys=True),
            approval_comment=approval_comment,
        ),
    )
    # The committed config travels with the commitment, so analyse needs no config argument.
    atomic_write_json(
        ws.root / "commitments" / f"{commitment.commitment_id}.json",
        {
            "commitment_id": commitment.commitment_id,
            "config_digest": commitment.config_digest,
            "data_digest": commitment.data_digest,
            "approved_by": commitment.approved_by,
            "approval_comment": approval_comment,
            "config": loaded.config.model_dump(mode="json", by_alias=True),
        },
    )
    # A commitment booked again after a cancel keeps its id; its window is the booking's.
    commitment = replace(commitment, window_start=booking.start, window_end=booking.end)
    get_run_logger().info(
        "window %s .. %s booked as %s (config %s, gate evidence %s)",
        commitment.window_start,
        commitment.window_end,
        commitment.commitment_id,
        loaded.digest[:12],
        data_digest[:12],
    )
    return commitment


def execute_deployment_for(commit_deployment: str) -> str:
    """The execute-window deployment that goes with a commit deployment: `<campaign>-commit` (deployments/prefect.yaml)
    -> `execute/<campaign>-execute-window`."""
    return f"execute/{commit_deployment.removesuffix('-commit')}-execute-window"


@task(name="schedule-execute", cache_policy=None, retries=2, retry_delay_seconds=[1, 5])
def schedule_execute(commitment: store.Commitment, params: dict) -> str:
    """Inside a deployment run, schedule the campaign's execute deployment at the window's start (once per
    commitment).

    Run locally (no deployment), there is nothing to schedule: `campaign execute` runs the window by hand.
    """
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment
    from prefect.runtime import deployment as current

    if current.id is None:
        return "not in a deployment run: run `campaign execute` when the window opens"
    deployment = execute_deployment_for(current.name)
    # Prefect types run_deployment as returning the run or a coroutine; called from sync code it returns the run.
    flow_run = cast(
        FlowRun,
        run_deployment(
            deployment,
            parameters={"params": params},
            scheduled_time=commitment.window_start,
            # one execute run per booking: a commitment booked again after a cancel gets its own
            timeout=0,
            as_subflow=False,
            idempotency_key=f"{commitment.commitment_id}@{commitment.window_start.isoformat()}",
            flow_run_name=f"window-{commitment.commitment_id}",
        ),
    )
    get_run_logger().info(
        "execute scheduled at %s as flow run %s of %s", commitment.window_start, flow_run.id, deployment
    )
    return str(flow_run.id)

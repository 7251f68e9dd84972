"""Execute: check the commitment still matches, then simulate the committed window, or run it for real under the
supervisor (campaign.execution), and record it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact

from campaign import store
from campaign.approval import read_pending
from campaign.config import CampaignConfig, LoadedConfig
from campaign.errors import ConfigError, Refused
from campaign.evidence import gate_file_changes, gate_files, read_evidence
from campaign.execution.journal import EventListener, Journal, JournalEvent
from campaign.execution.measured import measured_summary
from campaign.execution.multinode import MultiNodeSettings, supervise_multinode
from campaign.execution.multinode_run import is_multinode, multinode_settings
from campaign.execution.multinode_summary import multinode_summary
from campaign.execution.policy import SHORT, STOPPED, TARGET
from campaign.execution.progress import ProgressLines
from campaign.execution.run import real_run_settings
from campaign.execution.slurm import slurm_problem
from campaign.execution.stopping import StopRequest, is_cancelled, stop_on_signals
from campaign.execution.supervisor import RealRunSettings, supervise
from campaign.figures import tokens_b
from campaign.files import atomic_write_parquet
from campaign.gates import execute_problems
from campaign.plan import make_plan
from campaign.sim import simulate
from campaign.window import window_inputs
from tasks.artifacts import artifact_key


@dataclass(frozen=True)
class ExecutionRecord:
    commitment_id: str
    replica: int
    reused: bool
    ettr: float
    tokens_trained: float
    completed: bool
    completion_s: float | None = None  # seconds from the window start to the job's end (None: not finished)
    end: str = ""  # a real run: why it ended ("target step reached", "cancelled: ...")
    outcome: str = TARGET  # target (exit 0), short (the run ended before its target) or stopped (by a person)
    final_step: int | None = None  # a real run: the step its counted checkpoints (or the target) reached
    target_step: int | None = None


@task(name="check-commitment", cache_policy=None)
def check_commitment(ws: store.Workspace, loaded: LoadedConfig) -> store.Commitment:
    """The commitment for this config and the data on disk, or refuse naming what is missing or changed."""
    evidence = read_evidence(
        ws.data_dir, loaded.config.data.in_workspace(ws.root), files=gate_files(loaded.config)
    )
    current = evidence.digest if evidence is not None else None
    changed = list(evidence.problems) if evidence is not None else []
    booked = store.commitments(ws)
    if evidence is not None and booked and all(c.data_digest != current for c in booked):
        committed = store.latest_gates(ws, booked[0].config_digest, booked[0].data_digest).get(
            "data_identity"
        )
        if committed is not None:
            changed += gate_file_changes(committed.details.get("gate_files"), evidence.gate_files, "commit")
    recorded = store.latest_gates(ws, loaded.digest, current) if current else {}
    validated = bool(recorded) or store.ever_validated(ws)
    problems = execute_problems(booked, loaded.digest, current, changed, recorded, validated)
    pending = read_pending(ws.root)
    if problems and pending:
        problems.insert(0, pending.describe())
    if problems:
        raise Refused(
            "execute refused:\n  - " + "\n  - ".join(problems),
            where=str(ws.root),
            fix="no flag skips this: prepare, validate and commit the data and config you want to run",
        )
    return next(c for c in booked if c.config_digest == loaded.digest and c.data_digest == current)


@task(name="simulate-window", cache_policy=None)
def simulate_window(
    ws: store.Workspace, config: CampaignConfig, commitment: store.Commitment, run_id: str, replica: int = 0
) -> ExecutionRecord:
    if store.has_replica(ws, commitment.commitment_id, replica):
        get_run_logger().info("window %s already executed; reusing its record", commitment.commitment_id)
        summary = store.replica_summary(ws, commitment.commitment_id, replica)
        store.record_execution(ws, run_id, commitment.commitment_id, replica, reused=True)
        return ExecutionRecord(
            commitment.commitment_id,
            replica,
            True,
            summary.ettr,
            summary.tokens_trained,
            summary.completed,
            summary.completion_s,
        )
    plan = make_plan(config)
    # Progress as simulated time advances: one Prefect progress artifact, updated every 2%.
    # Prefect types its sync-compatible functions as returning the value or a coroutine; called from sync code
    # they return the value.
    progress_id = cast(
        UUID,
        create_progress_artifact(
            0.0,
            key=artifact_key(config.name, "execute-progress"),
            description=f"window {commitment.commitment_id}: simulated time",
        ),
    )

    def report(fraction: float, t_s: float, tokens: float) -> None:
        update_progress_artifact(
            progress_id,
            100.0 * fraction,
            description=f"window {commitment.commitment_id}: day {t_s / 86400:.1f}, {tokens:.4g} tokens",
        )

    result = simulate(window_inputs(config, plan), replica=replica, on_progress=report)
    summary = replace(
        result.summary, checkpoint_interval_optimal_s=plan.checkpoint.optimal_interval_s, plan=plan.to_json()
    )
    # Keyed by commitment: a second window never overwrites the files of the first.
    sim_dir = ws.sim_dir / commitment.commitment_id
    atomic_write_parquet(sim_dir / f"events-{replica}.parquet", _arrow(result.events))
    atomic_write_parquet(sim_dir / f"power-{replica}.parquet", _arrow(result.power))
    store.record_replica(
        ws, run_id, commitment.commitment_id, replica, config.seed, summary, result.events, result.power
    )
    store.record_execution(ws, run_id, commitment.commitment_id, replica, reused=False)
    create_markdown_artifact(
        key=artifact_key(config.name, "execute-summary"),
        markdown=(
            f"# Window {commitment.commitment_id}\n\n* ETTR **{summary.ettr:.3f}**\n"
            f"* tokens trained {tokens_b(summary.tokens_trained)} of {tokens_b(summary.tokens_target)}\n"
            f"* unexpected interruptions {summary.interruptions.unexpected}, "
            f"planned {summary.interruptions.planned}\n"
        ),
    )
    get_run_logger().info(
        "window simulated: ETTR %.3f, %.4g tokens, %s unexpected interruptions",
        summary.ettr,
        summary.tokens_trained,
        summary.interruptions.unexpected,
    )
    return ExecutionRecord(
        commitment.commitment_id,
        replica,
        False,
        summary.ettr,
        summary.tokens_trained,
        summary.completed,
        summary.completion_s,
    )


def _arrow(frame):
    import pyarrow as pa

    return pa.Table.from_pandas(frame, preserve_index=False)


REAL_REPLICA = (
    -1
)  # the catalog's replica number of a real run: measured, never one of the simulator's replicas
EXECUTION_DIR = "execution"


@task(name="run-window", cache_policy=None)
def run_window(
    ws: store.Workspace, config: CampaignConfig, commitment: store.Commitment, run_id: str
) -> ExecutionRecord:
    """Run the committed window for real under the supervisor (execute.backend: local or slurm), record its events and
    its measured summary as the window's record; a rerun after a finished run reuses it, after a killed one
    resumes it."""
    ex = config.execute
    problem = slurm_problem() if ex.backend == "slurm" else None
    if problem:
        raise ConfigError(
            f"execute.backend is slurm, but the Slurm commands cannot be used here: {problem}",
            where="execute.backend",
            fix="run execute where sbatch, scontrol and scancel reach the cluster, or use execute.backend: local",
        )
    log = get_run_logger()
    if store.has_replica(ws, commitment.commitment_id, REAL_REPLICA):
        summary = store.replica_summary(ws, commitment.commitment_id, REAL_REPLICA)
        measured = summary.measured
        end = measured.end if measured is not None else ""
        if is_cancelled(end):
            log.warning(
                "window %s was cancelled (%s); its record is kept and the window is not run again",
                commitment.commitment_id,
                end,
            )
        else:
            log.info("window %s already run for real; reusing its record", commitment.commitment_id)
        store.record_execution(ws, run_id, commitment.commitment_id, REAL_REPLICA, reused=True)
        recorded = measured.outcome if measured is not None else None
        outcome = (
            recorded
            if recorded in (TARGET, SHORT, STOPPED)
            else TARGET
            if summary.completed
            else STOPPED
            if is_cancelled(end)
            else SHORT
        )
        return ExecutionRecord(
            commitment.commitment_id,
            REAL_REPLICA,
            True,
            summary.ettr,
            summary.tokens_trained,
            summary.completed,
            summary.completion_s,
            end,
            outcome,
            measured.final_step if measured is not None else None,
            measured.target_step if measured is not None else None,
        )
    folder = ws.root / EXECUTION_DIR / commitment.commitment_id
    multi = multinode_settings(config, ws.root, folder) if is_multinode(config) else None
    settings = multi.run if multi is not None else real_run_settings(config, ws.root, folder)
    flow_run_id = _flow_run_id()
    progress_id = cast(
        UUID,
        create_progress_artifact(
            0.0,
            key=artifact_key(config.name, "execute-progress"),
            description=f"window {commitment.commitment_id}: real run, step 0 of {settings.steps}",
        ),
    )
    shown = [0]

    def report(step: int, steps: int) -> None:
        if step * 50 // steps > shown[0]:  # every 2 %
            shown[0] = step * 50 // steps
            update_progress_artifact(
                progress_id,
                100.0 * step / steps,
                description=f"window {commitment.commitment_id}: step {step}",
            )

    def said(event: JournalEvent, occurred_at: float | None) -> None:  # a failure, restart or end shows too
        if event.kind != "job_start":
            what = f"{event.kind.replace('_', ' ')} {event.category}".strip()
            update_progress_artifact(
                progress_id,
                100.0 * shown[0] / 50,
                description=f"window {commitment.commitment_id}: {what} at {event.t_s:.1f} s (attempt {event.attempt})",
            )

    on_event = prefect_event_emitter(config.name, commitment.commitment_id, flow_run_id, said)
    stop = StopRequest(poll=_cancel_poll(flow_run_id))
    progress = ProgressLines(
        _say_and_show(log, flow_run_id),
        settings.steps,
        settings.tokens_per_step,
        settings.progress_every,
        settings.nodes,
    )

    log.info(
        "real run of window %s: %s, to step %d, %d fault(s) to inject",
        commitment.commitment_id,
        " ".join(settings.command),
        settings.steps,
        len(settings.injections),
    )
    with stop_on_signals(stop):  # SIGTERM stops the job and records its end; then Prefect hears the signal
        if multi is not None:
            journal = supervise_multinode(multi, folder, on_progress=report, on_event=on_event, stop=stop)
        else:
            journal = supervise(
                settings, folder, on_progress=report, on_event=on_event, stop=stop, progress=progress
            )
        return _record_real_run(ws, config, commitment, run_id, folder, settings, journal, multi)


def _record_real_run(
    ws: store.Workspace,
    config: CampaignConfig,
    commitment: store.Commitment,
    run_id: str,
    folder: Path,
    settings: RealRunSettings,
    journal: Journal,
    multi: MultiNodeSettings | None = None,
) -> ExecutionRecord:
    """The finished (or cancelled) run's events and measured summary as the window's record."""
    ex, log = config.execute, get_run_logger()
    summary = (
        multinode_summary(
            journal,
            settings.steps,
            settings.tokens_per_step,
            ex.checkpoint_every,
            config.seed,
            config.cluster.cost.gpu_hour_usd,
            multi.job_nodes,
            multi.spare_nodes,
            max_wall_s=settings.max_wall_s,
        )
        if multi is not None
        else measured_summary(
            journal,
            settings.steps,
            settings.tokens_per_step,
            ex.checkpoint_every,
            config.seed,
            config.cluster.cost.gpu_hour_usd,
            max_wall_s=settings.max_wall_s,
        )
    )
    summary = replace(summary, plan=make_plan(config).to_json())
    events = journal.frame()
    atomic_write_parquet(folder / "events.parquet", _arrow(events))
    store.record_replica(
        ws, run_id, commitment.commitment_id, REAL_REPLICA, config.seed, summary, events, _no_power()
    )
    store.record_execution(ws, run_id, commitment.commitment_id, REAL_REPLICA, reused=False)
    m = summary.measured_run()
    create_markdown_artifact(
        key=artifact_key(config.name, "execute-summary"),
        markdown=(
            f"# Window {commitment.commitment_id}, run for real\n\n* ETTR **{summary.ettr:.3f}**\n"
            f"* step {m.final_step} of {m.target_step} ({m.end})\n"
            f"* failures {summary.interruptions.unexpected}: {m.failures_injected} injected, "
            f"{m.failures_organic} organic; restarts {m.restarts}\n"
        ),
    )
    if is_cancelled(m.end):
        log.warning("window %s: %s", commitment.commitment_id, m.end)
    log.info(
        "window run for real: step %d of %d (%s), ETTR %.3f, %d failures (%d injected), %d restarts",
        m.final_step,
        m.target_step,
        m.end,
        summary.ettr,
        summary.interruptions.unexpected,
        m.failures_injected,
        m.restarts,
    )
    return ExecutionRecord(
        commitment.commitment_id,
        REAL_REPLICA,
        False,
        summary.ettr,
        summary.tokens_trained,
        summary.completed,
        summary.completion_s,
        m.end,
        m.outcome,
        m.final_step,
        m.target_step,
    )


def _say_and_show(log: Any, flow_run_id: str | None, every_s: float = 10.0) -> Callable[[str], None]:
    """A progress line to the run's log (the terminal and the Prefect run's logs) and, at most every `every_s`
    seconds, as the flow run's state message (what the UI shows beside "Running")."""
    from prefect.client.orchestration import get_client
    from prefect.states import Running

    shown = [float("-inf")]

    def say(line: str) -> None:
        log.info("%s", line)
        now = time.monotonic()
        if flow_run_id is None or now - shown[0] < every_s:
            return
        shown[0] = now
        try:
            with get_client(sync_client=True) as client:
                client.set_flow_run_state(UUID(flow_run_id), Running(message=line[:1000]), force=True)
        except Exception:  # only what the UI shows: the run and its log lines go on
            return

    return say


def _no_power():
    import pandas as pd

    return pd.DataFrame({"t_s": pd.Series(dtype="float64"), "power_mw": pd.Series(dtype="float64")})


# The events of a real run the Prefect UI shows as they happen (a checkpoint is in the progress, not the feed).
LIVE_KINDS = frozenset(
    {
        "job_start",
        "failure",
        "detected",
        "restart_start",
        "restart_end",
        "node_excluded",
        "supervisor_resumed",
        "job_requeued",
        "job_complete",
        "window_end",
    }
)


def prefect_event_emitter(
    campaign: str,
    commitment_id: str,
    flow_run_id: str | None,
    also: EventListener | None = None,
) -> EventListener:
    """The supervisor's `on_event`: each failure, restart, exclusion and end as a Prefect event when it happens,
    on a resource naming the campaign and the flow run (and related to the flow run, so its page lists them).
    A Prefect that cannot take an event never stops the run: the journal on disk is the record."""
    from prefect.events import emit_event

    resource = {
        "prefect.resource.id": f"campaign.{campaign}.execute.{flow_run_id or 'local'}",
        "prefect.resource.name": f"{campaign} window {commitment_id}",
        "campaign": campaign,
        "commitment-id": commitment_id,
    }
    related = (
        [{"prefect.resource.id": f"prefect.flow-run.{flow_run_id}", "prefect.resource.role": "flow-run"}]
        if flow_run_id
        else []
    )
    warned = [False]

    def on_event(event: JournalEvent, occurred_at: float | None) -> None:
        if event.kind not in LIVE_KINDS:
            return
        name = f"campaign.execute.{event.kind}" + (f".{event.category}" if event.category else "")
        payload: dict[str, Any] = {
            k: getattr(event, k) for k in ("t_s", "category", "scope", "node", "detail", "attempt")
        }
        occurred = datetime.fromtimestamp(occurred_at, UTC) if occurred_at is not None else None
        try:
            emit_event(event=name, resource=resource, related=related, payload=payload, occurred=occurred)
        except Exception as exc:  # the run goes on; the event is in events.jsonl
            if not warned[0]:
                warned[0] = True
                get_run_logger().warning("cannot emit Prefect events (%s); the journal keeps them", exc)
        if also is not None:
            also(event, occurred_at)

    return on_event


def _flow_run_id() -> str | None:
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    return str(context.flow_run.id) if context is not None and context.flow_run is not None else None


def _cancel_poll(flow_run_id: str | None) -> Callable[[], str | None] | None:
    """Asked every few seconds during a real run: whether its flow run was cancelled in Prefect (a cancellation
    that sends no signal, as for a flow run `campaign execute` runs in its own process)."""
    if flow_run_id is None:
        return None
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType

    def poll() -> str | None:
        try:
            with get_client(sync_client=True) as client:
                state = client.read_flow_run(UUID(flow_run_id)).state
        except Exception:  # the API unreachable: the run goes on; SIGTERM still stops it
            return None
        if state is not None and state.type in (StateType.CANCELLING, StateType.CANCELLED):
            return f"the flow run {flow_run_id} was cancelled"
        return None

    return poll

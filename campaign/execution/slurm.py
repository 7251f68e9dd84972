"""The Slurm backend: each start of the trainer is the same batch job, submitted once with `sbatch --requeue` and
requeued (`scontrol requeue`) for every restart, so the run keeps one job id and Slurm's own `Restarts` count. A
restart that excludes a node requeues the ended job held (`scontrol requeuehold`), sets its `ExcNodeList` and
releases it (`scontrol release`): an ended job's exclusions cannot be changed.

One requeued job rather than one job per restart: the scheduler then sees one job with its restarts (as a person
reading `scontrol show job` expects), and a node failure that Slurm requeues by itself is the same job coming back.
The live state is read with `scontrol show job -o`; how each start ended (its state, node and exit code as
Slurm recorded them) with `sacct`, from the accounting database where the cluster runs one, else from the job
completion log (`sacct --completion`, `JobCompType=jobcomp/filetxt`), else from the node's state. A start is
killed with `scancel --full --signal=KILL`, an injected hang is `--signal=STOP`, an injected node loss sets the
node DOWN (`scontrol update NodeName=... State=DOWN`) so that Slurm itself fails the job (NODE_FAIL) and
requeues it; the node is RESUMEd once the failure is recorded. An excluded node goes into the job's
`ExcNodeList` before it runs again. Slurm delays a requeued job's start (two minutes in 22.05); the
supervisor's own back-off has already passed, so the job is made eligible at once.
Source: Slurm 22.05 `sbatch(1)`, `scontrol(1)`, `scancel(1)`, `sacct(1)`, `slurm.conf(5)`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from campaign.rehearsal.contract import Metrics
from campaign.rehearsal.processes import POLL_S, MetricsTail, Start

STATE_POLL_S = 0.5
RETURN_WAIT_S = 15.0  # the longest a returned node is waited for back in service
ENDED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}
# The batch script: the trainer as its child, stopped when campaign's supervisor stops touching its heartbeat file
# (campaign killed with SIGKILL leaves no job training unsupervised). A trainer killed by signal N exits 128 + N.
JOB_SCRIPT = """#!/bin/sh
# campaign: one start of the trainer (its command is the arguments)
"$@" &
trainer=$!
while kill -0 "$trainer" 2>/dev/null; do
  seen=$(stat -c %Y "$CAMPAIGN_SUPERVISOR_HEARTBEAT" 2>/dev/null || echo 0)
  if [ $(( $(date +%s) - seen )) -gt "${CAMPAIGN_SUPERVISOR_TIMEOUT_S:-60}" ]; then
    kill -KILL "$trainer"
    echo "campaign: the supervisor's heartbeat stopped; the trainer was killed" >&2
    exit 75
  fi
  sleep 1
done
wait "$trainer"
"""
HEARTBEAT = "supervisor.alive"
NODE_FAIL = "NODE_FAIL"
# A node in any of these states has failed its jobs (scontrol shows them joined with "+", e.g. IDLE+DRAIN).
NODE_LOST_STATES = {"DOWN", "DRAIN", "FAIL", "FAILING", "NOT_RESPONDING"}


@dataclass
class JobState:
    state: str
    exit_code: int
    signal: int
    node: str
    restarts: int


@dataclass(frozen=True)
class JobEnd:
    """One end of a start of the job, as Slurm's accounting or job completion log recorded it."""

    state: str
    node: str
    exit_code: int
    signal: int


def slurm_problem() -> str | None:
    """Why the Slurm commands cannot be used here, or None."""
    missing = [c for c in ("sbatch", "scontrol", "scancel") if shutil.which(c) is None]
    return f"{', '.join(missing)} not on PATH" if missing else None


def _record(folder: Path) -> dict[str, object]:
    path = folder / "slurm.json"
    loaded = json.loads(path.read_text()) if path.exists() else {}
    return loaded if isinstance(loaded, dict) else {}


def _save_record(folder: Path, record: dict[str, object]) -> None:
    path = folder / "slurm.json"
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(record) + "\n")
    partial.replace(path)


def _downed(record: dict[str, object]) -> list[str]:
    nodes = record.get("downed_nodes")
    return [str(n) for n in nodes] if isinstance(nodes, list) else []


def current_job(folder: Path) -> str | None:
    """The run's Slurm job id, once submitted."""
    job = _record(folder).get("job_id")
    return str(job) if job is not None else None


def is_running(folder: Path) -> bool:
    """Whether the run's job is still queued or training (a supervisor started again then adopts it)."""
    job = current_job(folder)
    state = job_state(job) if job else None
    return state is not None and state.state not in ENDED


def _run(args: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed ({done.returncode}): {done.stderr.strip()[:300]}")
    return done.stdout


def job_state(job_id: str) -> JobState | None:
    """The job's state from `scontrol show job -o`, or None when Slurm no longer knows it."""
    try:
        text = _run(["scontrol", "show", "job", "-o", job_id])
    except RuntimeError:
        return None
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    code, _, sig = fields.get("ExitCode", "0:0").partition(":")
    return JobState(
        fields.get("JobState", "UNKNOWN"),
        int(code or 0),
        int(sig or 0),
        fields.get("BatchHost", fields.get("NodeList", "")),
        int(fields.get("Restarts", "0") or 0),
    )


def parse_sacct(text: str) -> list[JobEnd]:
    """The ends in `sacct --parsable2 --noheader --format=State,NodeList,ExitCode` output, oldest first. A
    completion log also lists a requeue of an ended job as a PENDING line: only ended states count."""
    ends = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 3:
            continue
        state = parts[0].split()[0] if parts[0].strip() else ""  # "CANCELLED by 0" -> CANCELLED
        if state not in ENDED and state != "REQUEUED":
            continue
        code, _, sig = parts[2].partition(":")
        node = "" if parts[1].startswith("None") else parts[1]
        ends.append(JobEnd(state, node, int(code or 0), int(sig or 0)))
    return ends


def job_ends(job_id: str) -> list[JobEnd]:
    """Every end of the job's starts that Slurm recorded: from `sacct` (the accounting database) or, on a
    cluster without one, `sacct --completion` (the job completion log); empty where neither is kept."""
    query = ["-j", job_id, "--duplicates", "--allocations", "--parsable2", "--noheader"]
    query.append("--format=State,NodeList,ExitCode")
    for args in (["sacct", *query], ["sacct", "--completion", *query]):
        try:
            return parse_sacct(_run(args))
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            continue  # "Slurm accounting storage is disabled": try the completion log
    return []


def node_state(node: str) -> str:
    """The node's state as `scontrol show node` gives it (e.g. IDLE, DOWN+NOT_RESPONDING), or "" if unknown."""
    try:
        text = _run(["scontrol", "show", "node", "-o", node])
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        return ""
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    return fields.get("State", "")


def is_node_lost(state: str) -> bool:
    """Whether a node in `state` (scontrol's, with "+" flags, or sinfo's with a "*") has failed its jobs."""
    return bool(set(state.rstrip("*~#!%$@^-").upper().split("+")) & NODE_LOST_STATES)


def end_state(now: JobState | None, requeued_by_slurm: bool, ends: list[JobEnd], node: str) -> str:
    """How a start ended by Slurm's own account: NODE_FAIL when its node failed it (recorded as such, or requeued
    by Slurm off a node that is now down), else the recorded state, "REQUEUED" or the state now."""
    if (now is not None and now.state == NODE_FAIL) or any(e.state == NODE_FAIL for e in ends):
        return NODE_FAIL
    if requeued_by_slurm:
        return NODE_FAIL if node and is_node_lost(node_state(node)) else "REQUEUED"
    if ends:
        return ends[-1].state
    return now.state if now is not None else ""


def lose_node(folder: Path, node: str, reason: str) -> str | None:
    """Set `node` DOWN, so Slurm fails its jobs (NODE_FAIL) and requeues those that may be requeued; the node
    is remembered in the run's record until `return_nodes`. None, or why it could not be done (an operator's
    right: a plain user may not)."""
    if not node:
        return "the job's node is not known"
    try:
        _run(["scontrol", "update", f"NodeName={node}", "State=DOWN", f"Reason={reason}"])
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    record = _record(folder)
    record["downed_nodes"] = sorted({*_downed(record), node})
    _save_record(folder, record)
    return None


def lose_job_node(folder: Path) -> str | None:
    """An injected node loss: the node the run's job is running on set DOWN (see `lose_node`)."""
    job = current_job(folder)
    state = job_state(job) if job else None
    node = state.node if state is not None and state.state == "RUNNING" else ""
    return lose_node(folder, node, "campaign: injected node loss")


def return_nodes(folder: Path, limit_s: float = RETURN_WAIT_S) -> list[str]:
    """RESUME every node this run set DOWN (an injected node loss is over once its failure is recorded) and wait,
    up to `limit_s`, until Slurm has them back in service; the nodes returned."""
    record = _record(folder)
    downed = _downed(record)
    for node in downed:
        with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
            _run(["scontrol", "update", f"NodeName={node}", "State=RESUME"])
    # A RESUMEd node is IDLE+NOT_RESPONDING until its slurmd answers slurmctld's ping (a second or so): Slurm
    # schedules nothing on it meanwhile, and the next run (or an operator) would find it still lost.
    until = time.monotonic() + limit_s
    while any(is_node_lost(node_state(n)) for n in downed) and time.monotonic() < until:
        time.sleep(STATE_POLL_S / 5)
    if downed:
        record["downed_nodes"] = []
        _save_record(folder, record)
    return downed


def finish(folder: Path) -> None:
    """The run is over: its nodes back in service, and a job Slurm requeued that no start will follow
    (every node excluded, or the window ended) cancelled rather than left in the queue."""
    return_nodes(folder)
    job = current_job(folder)
    state = job_state(job) if job else None
    if job and state is not None and state.state == "PENDING":
        with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
            _run(["scancel", job])


def signal_job(job_id: str, name: str) -> None:
    """Signal the batch script and the trainer below it."""
    with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
        _run(["scancel", "--full", f"--signal={name}", job_id])


def submit_or_requeue(
    folder: Path,
    command: list[str],
    env: dict[str, str],
    log_dir: Path,
    exclude: list[str],
    adopt: bool = False,
) -> str:
    """The run's job id: submitted the first time, requeued (with its excluded nodes) every later time, or, with
    `adopt`, the job as it runs."""
    log_dir.mkdir(parents=True, exist_ok=True)
    known = current_job(folder)
    if known is not None:
        job_id = known
        if adopt:
            return job_id
        state = job_state(job_id)
        pending = state is not None and state.state == "PENDING"  # Slurm requeued it itself (a node failed)
        if state is not None and state.state not in ENDED and not pending:
            signal_job(job_id, "KILL")  # a start left by a supervisor that was stopped
            _wait_ended(job_id, 30.0)
        if exclude and not pending:
            # an ended job's exclusions cannot be changed: requeue it held, change them, then release it
            _run(["scontrol", "requeuehold", job_id])
            _wait_pending(job_id, 30.0)
            _run(["scontrol", "update", f"JobId={job_id}", f"ExcNodeList={','.join(exclude)}"])
            _run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"])
            _run(["scontrol", "release", job_id])
            return job_id
        if (
            exclude
        ):  # Slurm requeued it itself (a node failed): it waits in the queue, and may be changed there
            _run(["scontrol", "update", f"JobId={job_id}", f"ExcNodeList={','.join(exclude)}"])
        if not pending:
            _run(["scontrol", "requeue", job_id])
        _run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"])
        return job_id
    script = folder / "job.sh"
    script.write_text(JOB_SCRIPT)
    script.chmod(0o755)
    args = [
        "sbatch",
        "--parsable",
        "--requeue",
        "--open-mode=append",
        f"--job-name=campaign-{folder.name}",
        f"--output={log_dir / 'slurm-%j.out'}",
        f"--error={log_dir / 'slurm-%j.err'}",
        f"--chdir={os.getcwd()}",
        "--export=ALL",
        *([f"--exclude={','.join(exclude)}"] if exclude else []),
        str(script),
        *command,
    ]
    job_id = _run(args, env=env).strip().split(";")[0]
    _save_record(folder, {**_record(folder), "job_id": job_id})
    return job_id


def _wait_pending(job_id: str, limit_s: float) -> None:
    """Wait until a requeued job is back in the queue (a requeue takes effect a moment later)."""
    until = time.monotonic() + limit_s
    state = job_state(job_id)
    while state is not None and state.state != "PENDING" and time.monotonic() < until:
        time.sleep(STATE_POLL_S / 5)
        state = job_state(job_id)


def _wait_ended(job_id: str, limit_s: float) -> JobState | None:
    until = time.monotonic() + limit_s
    state = job_state(job_id)
    while state is not None and state.state not in ENDED and time.monotonic() < until:
        time.sleep(STATE_POLL_S)
        state = job_state(job_id)
    return state


def run_slurm_start(
    label: str,
    folder: Path,
    command: list[str],
    env: dict[str, str],
    metrics_path: Path,
    log_dir: Path,
    deadline: float,
    kill_when: Callable[[Metrics], bool],
    exclude: list[str],
    on_submitted: Callable[[str], None] | None = None,
    adopt: bool = False,
    from_byte: int | None = None,
) -> tuple[Start, str, str, str]:
    """One start as the run's Slurm job: follow its metrics and state until it ends, Slurm requeues it (its node
    failed), `kill_when` says kill, or `deadline` (monotonic) passes. Returns the start, the job id, the node it
    ran on and how it ended by Slurm's account (`end_state`: NODE_FAIL, COMPLETED, FAILED, ...)."""
    # From the end of the last whole line: an adopted trainer may be writing the next one.
    start_byte = metrics_path.read_bytes().rfind(b"\n") + 1 if metrics_path.exists() else 0
    if from_byte is not None:  # an adopted start: from the first line the stopped supervisor had not read
        start_byte = min(from_byte, start_byte)
    result = Start(
        label=label, command=command, stderr_path=log_dir / "slurm.err", metrics_start_byte=start_byte
    )
    tail = MetricsTail(metrics_path, start_byte, 1)
    began = time.monotonic()
    heartbeat = folder / HEARTBEAT
    heartbeat.touch()
    env = {**env, "CAMPAIGN_SUPERVISOR_HEARTBEAT": str(heartbeat)}
    try:
        job_id = submit_or_requeue(folder, command, env, log_dir, exclude, adopt)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        result.launch_error = str(exc)
        return result, "", "", ""
    if on_submitted is not None and not adopt:
        on_submitted(job_id)
    state, checked = job_state(job_id), time.monotonic()
    while state is not None and state.state in ENDED and time.monotonic() - checked < 30.0:
        time.sleep(
            POLL_S
        )  # a requeue takes effect a moment later: never read the previous start's end as this one's
        state = job_state(job_id)
    restarts = state.restarts if state is not None else 0  # more later: Slurm requeued the job itself
    ends_before = len(job_ends(job_id))
    ran_on, requeued_by_slurm = "", False
    while True:
        heartbeat.touch()
        tail.poll()
        if tail.metrics.problems:
            break
        if kill_when(tail.metrics):
            result.killed_by_harness = True
            break
        if time.monotonic() - checked > STATE_POLL_S:
            state, checked = job_state(job_id), time.monotonic()
            if state is not None and state.state == "RUNNING" and state.node:
                ran_on = state.node
            if state is None or state.state in ENDED:
                break
            if state.restarts > restarts:
                requeued_by_slurm = True
                break
        if time.monotonic() > deadline:
            result.timed_out = True
            break
        time.sleep(POLL_S)
    if not requeued_by_slurm and (state is None or state.state not in ENDED):
        signal_job(job_id, "KILL")
        state = _wait_ended(job_id, 60.0) or state
    tail.poll()
    result.metrics = tail.metrics
    result.wall_s = time.monotonic() - began
    ends = job_ends(job_id)[ends_before:]
    node = ran_on or (ends[-1].node if ends else "") or (state.node if state is not None else "")
    ended = end_state(state, requeued_by_slurm, ends, node)
    if state is not None and not requeued_by_slurm:
        code = state.exit_code
        result.returncode = -state.signal if state.signal else -(code - 128) if 128 < code < 160 else code
    return result, job_id, node, ended

"""The Slurm backend: each start of the trainer is the same batch job, submitted once with `sbatch --requeue` and
requeued (`scontrol requeue`) for every restart, so the run keeps one job id and Slurm's own `Restarts` count.

One requeued job rather than one job per restart: the scheduler then sees one job with its restarts (as a person
reading `scontrol show job` expects), and a node failure that Slurm requeues by itself is the same job coming back.
State is read with `scontrol show job -o` (`sacct` needs a Slurm accounting database, which a cluster need not
run); a start is killed with `scancel --full --signal=KILL`, an injected hang is `--signal=STOP`; an excluded
node goes into the job's `ExcNodeList` before it is requeued. Slurm delays a requeued job's start (two minutes
in 22.05); the supervisor's own back-off has already passed, so the job is made eligible at once.
Source: Slurm 22.05 `sbatch(1)`, `scontrol(1)`, `scancel(1)`.
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


@dataclass
class JobState:
    state: str
    exit_code: int
    signal: int
    node: str
    restarts: int


def slurm_problem() -> str | None:
    """Why the Slurm commands cannot be used here, or None."""
    missing = [c for c in ("sbatch", "scontrol", "scancel") if shutil.which(c) is None]
    return f"{', '.join(missing)} not on PATH" if missing else None


def current_job(folder: Path) -> str | None:
    """The run's Slurm job id, once submitted."""
    record = folder / "slurm.json"
    return str(json.loads(record.read_text())["job_id"]) if record.exists() else None


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
    record = folder / "slurm.json"
    log_dir.mkdir(parents=True, exist_ok=True)
    if record.exists():
        job_id = str(json.loads(record.read_text())["job_id"])
        if adopt:
            return job_id
        state = job_state(job_id)
        if state is not None and state.state not in ENDED:
            signal_job(job_id, "KILL")  # a start left by a supervisor that was stopped
            _wait_ended(job_id, 30.0)
        if exclude:
            _run(["scontrol", "update", f"JobId={job_id}", f"ExcNodeList={','.join(exclude)}"])
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
    record.write_text(json.dumps({"job_id": job_id}) + "\n")
    return job_id


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
) -> tuple[Start, str, str]:
    """One start as the run's Slurm job: follow its metrics and state until it ends, `kill_when` says kill, or
    `deadline` (monotonic) passes. Returns the start, the job id and the node it ran on."""
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
        return result, "", ""
    if on_submitted is not None and not adopt:
        on_submitted(job_id)
    state, checked = job_state(job_id), time.monotonic()
    while state is not None and state.state in ENDED and time.monotonic() - checked < 30.0:
        time.sleep(
            POLL_S
        )  # a requeue takes effect a moment later: never read the previous start's end as this one's
        state = job_state(job_id)
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
            if state is None or state.state in ENDED:
                break
        if time.monotonic() > deadline:
            result.timed_out = True
            break
        time.sleep(POLL_S)
    if state is None or state.state not in ENDED:
        signal_job(job_id, "KILL")
        state = _wait_ended(job_id, 60.0) or state
    tail.poll()
    result.metrics = tail.metrics
    result.wall_s = time.monotonic() - began
    if state is not None:
        code = state.exit_code
        result.returncode = -state.signal if state.signal else -(code - 128) if 128 < code < 160 else code
    return result, job_id, state.node if state is not None else ""

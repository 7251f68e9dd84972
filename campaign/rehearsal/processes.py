"""Start a trainer under a supervisor, follow its metrics file, stop it for real, reap every process it started.

The harness starts `campaign/rehearsal/supervisor.py` in a new session; the supervisor is a child subreaper
(Linux `PR_SET_CHILD_SUBREAPER`) and starts the trainer in a process group of its own. Stopping a start (the kill
step, a timeout, malformed metrics) is a SIGTERM to the supervisor, which SIGKILLs the trainer's whole group
(a `torchrun` and its workers), then kills and reaps every process still below it: one that left the group
(a double fork and `setsid`) was re-parented to the supervisor, so it is found, named as escaped and killed. If
campaign itself dies mid-validate, the kernel sends the supervisor SIGTERM (`PR_SET_PDEATHSIG`) and it cleans up
the same way; the next rehearsal kills any group still listed in the registry file before it reuses the folder.
Source: POSIX `setsid(2)`, `setpgid(2)`, `killpg(3)`; Linux `prctl(2)`; Python `subprocess`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campaign.rehearsal.contract import MAX_LINE_BYTES, Metrics, parse_or_record
from campaign.rehearsal.supervisor import descendants, process_table

SUPERVISOR = Path(__file__).with_name("supervisor.py")

POLL_S = 0.02
ONE_KILLED_GRACE_S = 30.0  # a launcher ends its job within this once one of its ranks was killed
STOP_WAIT_S = 15.0  # the supervisor's own sweep takes at most 5 s
STDERR_TAIL_LINES = 15


@dataclass
class Start:
    """One start of the trainer and how it ended."""

    label: str
    command: list[str]
    stderr_path: Path
    metrics_start_byte: int
    returncode: int | None = None
    killed_by_harness: bool = False
    killed_process: str | None = None  # with kill_one: "PID: COMMAND" of the one process the harness killed
    timed_out: bool = False
    launch_error: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0  # CPU seconds of the trainer and every process below it
    survivors: list[int] = field(default_factory=list)
    escaped: list[dict[str, object]] = field(default_factory=list)  # processes that left the trainer's group
    metrics: Metrics = field(default_factory=Metrics)
    line_times: dict[int, float] = field(default_factory=dict)  # step -> seconds since start, for tokens/s

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> list[str]:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.strip()][-lines:]


class MetricsTail:
    """Reads the complete lines a trainer appended since `start_byte`, as they arrive."""

    def __init__(self, path: Path, start_byte: int, first_line: int) -> None:
        self.path = path
        self.offset = start_byte
        self.line_no = first_line
        self.pending = b""
        self.metrics = Metrics()

    def poll(self) -> int:
        """Parse the new complete lines; returns how many arrived. Malformed lines go to metrics.problems."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return 0
        self.offset += len(data)
        chunks = (self.pending + data).split(b"\n")
        self.pending = chunks.pop()
        for raw in chunks:
            line_no = self.line_no
            self.line_no += 1
            if raw.strip():
                parse_or_record(raw, self.path, line_no, self.metrics)
        if len(self.pending) > MAX_LINE_BYTES:
            self.metrics.problems.append(
                f"{self.path}:{self.line_no}: a line of more than {MAX_LINE_BYTES:,} bytes without an end"
            )
            self.pending = b""
        return len(chunks)


def missing_executable(command: list[str]) -> str | None:
    """Why `command` cannot start (no such file, not executable), or None."""
    if not command:
        return "the command is empty"
    program = command[0]
    if os.sep in program:
        if not os.path.isfile(program):
            return f"FileNotFoundError: no such file: {program!r}"
        if not os.access(program, os.X_OK):
            return f"PermissionError: not executable: {program!r}"
        return None
    return None if shutil.which(program) else f"FileNotFoundError: {program!r} is not on PATH"


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/pid/stat field 22), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2 :].split()[19])


def kill_registered_groups(registry: Path) -> list[int]:
    """SIGKILL every process group listed in `registry` whose leader is still the same process; returns them."""
    try:
        entries = json.loads(registry.read_text())
    except (OSError, json.JSONDecodeError):
        return []
    killed = []
    for entry in entries:
        pid, started = int(entry["pgid"]), entry.get("start_time")
        if (started is not None and start_time(pid) == started) or group_members(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def _register(registry: Path, pid: int) -> None:
    try:
        entries = json.loads(registry.read_text()) if registry.exists() else []
    except json.JSONDecodeError:
        entries = []
    entries.append({"pgid": pid, "start_time": start_time(pid)})
    registry.write_text(json.dumps(entries) + "\n")


def resolve_command(command: list[str], python: str) -> list[str]:
    """A first argument `python` is the interpreter running campaign (so its environment is the trainer's)."""
    return [python, *command[1:]] if command and command[0] == "python" else list(command)


def kill_newest_leaf(pid: int) -> str | None:
    """SIGKILL the newest process at or below `pid` that has no child (one rank under a launcher, or the trainer
    itself when it is one process); "PID: COMMAND" of it, or None when none was left to kill."""
    table = process_table()
    tree = [pid, *descendants(pid, table)]
    leaves = [p for p in tree if not descendants(p, table)]
    newest = max(leaves, key=lambda p: (start_time(p) or 0, p), default=None)
    if newest is None:
        return None
    try:
        command = Path(f"/proc/{newest}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        os.kill(newest, signal.SIGKILL)
    except (OSError, ProcessLookupError, PermissionError):
        return None
    return f"{newest}: {command.strip()[:300]}"


def group_members(pgid: int) -> list[int]:
    """Live processes (not zombies) whose process group is `pgid`, read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def read_status(path: Path) -> dict[str, Any]:
    """The supervisor's status file, or {} while it has not written one."""
    try:
        status = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return status if isinstance(status, dict) else {}


def stop_supervisor(proc: subprocess.Popen, status_path: Path) -> None:
    """Ask the supervisor to stop the trainer (SIGTERM: it SIGKILLs the trainer's group and reaps everything
    below it) and wait; if it does not finish in time, SIGKILL it and the trainer's group directly."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_WAIT_S)
        return
    except subprocess.TimeoutExpired:
        pass
    trainer = read_status(status_path).get("trainer_pid")
    for pgid in (trainer, proc.pid):
        if isinstance(pgid, int):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def run_start(
    label: str,
    command: list[str],
    env: dict[str, str],
    metrics_path: Path,
    log_dir: Path,
    deadline: float,
    kill_when: Callable[[Metrics], bool] | None = None,
    registry: Path | None = None,
    on_checkpoint: Callable[[Metrics], None] | None = None,
    wrap: Sequence[str] = (),
    kill_one: bool = False,
) -> Start:
    """Start the trainer, follow its metrics until it exits, `kill_when` says kill, or `deadline` passes.

    Whatever happens, the trainer's group and every process below it are killed and reaped before this returns.
    `on_checkpoint` is called each time new checkpoint events have arrived (to look at the checkpoint folder).
    `wrap` goes before the command (the sandbox, `campaign.rehearsal.sandbox`). `kill_one`: when `kill_when` says
    kill, SIGKILL only the newest process of the trainer with no child (one rank under a launcher), then wait up to
    ONE_KILLED_GRACE_S for the trainer to end by itself, as a launcher ends its job when a rank dies.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    start_byte = metrics_path.stat().st_size if metrics_path.exists() else 0
    first_line = 1
    if start_byte:
        with open(metrics_path, "rb") as handle:
            first_line = handle.read(start_byte).count(b"\n") + 1
    stderr_path = log_dir / f"{label}.stderr.log"
    status_path = log_dir / f"{label}.supervisor.json"
    status_path.unlink(missing_ok=True)
    result = Start(label=label, command=command, stderr_path=stderr_path, metrics_start_byte=start_byte)
    tail = MetricsTail(metrics_path, start_byte, first_line)
    began = time.monotonic()
    problem = missing_executable(command)
    if problem:
        result.launch_error = problem
        return result
    with open(log_dir / f"{label}.stdout.log", "wb") as out, open(stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen(
                [sys.executable, str(SUPERVISOR), str(status_path), str(os.getpid()), *wrap, *command],
                env=env,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            result.launch_error = f"{type(exc).__name__}: {exc}"
            return result
        if registry is not None:
            _register(registry, proc.pid)
        trainer_registered = False
        try:
            while True:
                if registry is not None and not trainer_registered:
                    trainer = read_status(status_path).get("trainer_pid")
                    if isinstance(trainer, int):
                        _register(registry, trainer)
                        trainer_registered = True
                seen_before = len(result.line_times)
                checkpoints_before = len(tail.metrics.checkpoints)
                if tail.poll():
                    now = time.monotonic() - began
                    for step, _ in tail.metrics.losses[seen_before:]:
                        result.line_times.setdefault(step, now)
                    if on_checkpoint is not None and len(tail.metrics.checkpoints) > checkpoints_before:
                        on_checkpoint(tail.metrics)
                if tail.metrics.problems:
                    break
                if kill_when is not None and kill_when(tail.metrics):
                    result.killed_by_harness = True
                    trainer = read_status(status_path).get("trainer_pid")
                    if kill_one and isinstance(trainer, int):
                        result.killed_process = kill_newest_leaf(trainer)
                        ended_by = time.monotonic() + ONE_KILLED_GRACE_S
                        while proc.poll() is None and time.monotonic() < ended_by:
                            if read_status(status_path).get("returncode") is not None:
                                break  # the trainer has ended: the supervisor reaps what is left
                            time.sleep(POLL_S)
                    break
                if proc.poll() is not None:
                    break
                if time.monotonic() > deadline:
                    result.timed_out = True
                    break
                time.sleep(POLL_S)
        finally:
            stop_supervisor(proc, status_path)
            status = read_status(status_path)
            returncode = status.get("returncode")
            result.returncode = returncode if isinstance(returncode, int) else proc.returncode
            result.escaped = [e for e in status.get("escaped", []) if isinstance(e, dict)]
            survivors = status.get("survivors", [])
            result.survivors = [p for p in survivors if isinstance(p, int)] if "returncode" in status else []
            result.wall_s = time.monotonic() - began
            cpu = status.get("cpu_s")
            result.cpu_s = float(cpu) if isinstance(cpu, (int, float)) else 0.0
    tail.poll()
    result.metrics = tail.metrics
    return result


def drop_partial_line(path: Path) -> int:
    """Cut a last line a kill left without its newline, so the next start appends whole lines; returns bytes cut."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep == len(data):
        return 0
    with open(path, "r+b") as handle:
        handle.truncate(keep)
    return len(data) - keep

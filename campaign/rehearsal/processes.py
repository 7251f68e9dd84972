"""Start a trainer in its own process group, follow its metrics file, kill the whole group for real.

The trainer runs as `subprocess.Popen(..., start_new_session=True)`: it leads a new session and process group,
so `os.killpg(pid, SIGKILL)` reaches every process it started (a `torchrun` and its workers) unless one of
them deliberately leaves the group. After every start the harness kills the group and checks `/proc` that no
member survives. If campaign itself dies (killed mid-validate), the trainer's leader gets SIGKILL from the
kernel (Linux `PR_SET_PDEATHSIG`, set by a two-line launcher that then execs the command), and the next
rehearsal kills any group still listed in the registry file before it reuses the folder.
Source: POSIX `setsid(2)`, `killpg(3)`; Linux `prctl(2)` PR_SET_PDEATHSIG; Python `subprocess`.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from campaign.rehearsal.contract import Metrics, MetricsError, parse_metrics_line

POLL_S = 0.02
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
    timed_out: bool = False
    launch_error: str | None = None
    wall_s: float = 0.0
    survivors: list[int] = field(default_factory=list)
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
            if not raw.strip():
                continue
            try:
                parse_metrics_line(raw.decode("utf-8", errors="replace"), line_no, self.metrics)
            except MetricsError as exc:
                self.metrics.problems.append(str(exc))
        return len(chunks)


# Runs before the trainer, in its process: ask the kernel to SIGKILL it when campaign dies, then become it. If
# campaign died before the request was made, nobody would send the signal: prctl(2) says to check getppid().
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "try:\n    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "except (AttributeError, OSError):\n    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n    os._exit(137)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


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


def kill_group(proc: subprocess.Popen) -> list[int]:
    """SIGKILL the process group led by `proc`, reap the leader; returns pids of members still alive after 2 s."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    deadline = time.monotonic() + 2.0
    survivors = group_members(proc.pid)
    while survivors and time.monotonic() < deadline:
        time.sleep(0.05)
        survivors = group_members(proc.pid)
    return survivors


def run_start(
    label: str,
    command: list[str],
    env: dict[str, str],
    metrics_path: Path,
    log_dir: Path,
    deadline: float,
    kill_when: Callable[[Metrics], bool] | None = None,
    registry: Path | None = None,
) -> Start:
    """Start the trainer, follow its metrics until it exits, `kill_when` says kill, or `deadline` passes.

    Whatever happens, the process group is killed and reaped before this returns.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    start_byte = metrics_path.stat().st_size if metrics_path.exists() else 0
    first_line = 1
    if start_byte:
        with open(metrics_path, "rb") as handle:
            first_line = handle.read(start_byte).count(b"\n") + 1
    stderr_path = log_dir / f"{label}.stderr.log"
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
                [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *command],
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
        try:
            while True:
                seen_before = len(result.line_times)
                if tail.poll():
                    now = time.monotonic() - began
                    for step, _ in tail.metrics.losses[seen_before:]:
                        result.line_times.setdefault(step, now)
                if tail.metrics.problems:
                    break
                if kill_when is not None and kill_when(tail.metrics):
                    result.killed_by_harness = True
                    break
                if proc.poll() is not None:
                    break
                if time.monotonic() > deadline:
                    result.timed_out = True
                    break
                time.sleep(POLL_S)
        finally:
            result.survivors = kill_group(proc)
            result.returncode = proc.returncode
            result.wall_s = time.monotonic() - began
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

"""The trainer's supervisor: a small process between campaign and the trainer that reaps every descendant.

Run as a script (`python supervisor.py STATUS CAMPAIGN_PID COMMAND...`, imports nothing from campaign). It makes
itself a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`), so a process the trainer starts that double-forks and
calls `setsid` is re-parented to it instead of to init; it starts the trainer in a process group of its own; and
when the trainer ends (it exits, or campaign asks with SIGTERM, or campaign dies: `PR_SET_PDEATHSIG`) it kills the
trainer's group, then kills and reaps every process still below it. A process found outside the trainer's group
is named in the status file as escaped: the gate fails on it. The status file (JSON, replaced atomically) holds
the trainer's pid, then its exit code, the escaped processes, any group member that survived SIGKILL, and the CPU
seconds the trainer and its processes used (what a start of the rehearsal costs, whatever else the machine runs).
Source: Linux `prctl(2)` PR_SET_CHILD_SUBREAPER and PR_SET_PDEATHSIG; POSIX `setpgid(2)`, `waitpid(2)`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05  # waitpid while the trainer runs: nothing else, so the supervisor costs no CPU to speak of
SWEEP_S = 5.0  # how long the final sweep keeps killing what is left below the supervisor
COMMAND_CHARS = 200


def prctl(option: int, arg: int) -> bool:
    """Call prctl(2); False where it does not exist (not Linux) or fails."""
    try:
        return bool(ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0)
    except (AttributeError, OSError):
        return False


def process_table() -> dict[int, tuple[str, int, int]]:
    """Every process in /proc: pid -> (state, ppid, process group)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2:
            table[int(entry)] = (fields[0], int(fields[1]), int(fields[2]))
    return table


def descendants(root: int, table: dict[int, tuple[str, int, int]] | None = None) -> list[int]:
    """Live (not zombie) processes below `root`, by their parent links."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if table[pid][0] not in ("Z", "X"):
            out.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(out)


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return "?"
    text = raw.replace(b"\0", b" ").decode("utf-8", errors="replace").strip()
    return text if len(text) <= COMMAND_CHARS else text[: COMMAND_CHARS - 3] + "..."


def group_members(pgid: int) -> list[int]:
    return sorted(p for p, (state, _, group) in process_table().items() if group == pgid and state != "Z")


def _write_status(path: Path, status: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(status) + "\n")
    os.replace(tmp, path)


def _reap(trainer: int, returncode: int | None) -> int | None:
    """Collect every child that has ended (adopted ones too); returns the trainer's exit code once it is known."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return returncode
        if pid == 0:
            return returncode
        if pid == trainer:
            returncode = os.waitstatus_to_exitcode(status)


def _note_escaped(me: int, trainer: int, escaped: dict[int, str]) -> None:
    table = process_table()
    for pid in descendants(me, table):
        if pid != trainer and table[pid][2] != trainer and pid not in escaped:
            escaped[pid] = command_line(pid)


def supervise(status_path: Path, parent: int, command: list[str]) -> int:
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # campaign died: clean up as if asked to stop
    if os.getppid() != parent:  # it died before the request was made (prctl(2) says to check)
        return 137
    is_subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1)
    me = os.getpid()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    trainer = os.fork()
    if trainer == 0:  # the trainer: its own process group, killed by the kernel if the supervisor dies
        try:
            os.setpgid(0, 0)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != me:
                os._exit(137)
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"cannot start {command[0]!r}: {type(exc).__name__}: {exc}\n".encode())
        os._exit(127)
    with contextlib.suppress(OSError):
        os.setpgid(trainer, trainer)  # also from this side, so the group exists before anyone signals it
    status: dict[str, object] = {"trainer_pid": trainer, "subreaper": is_subreaper}
    _write_status(status_path, status)
    escaped: dict[int, str] = {}
    returncode: int | None = None
    while returncode is None:
        if stop:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(trainer, signal.SIGKILL)
        returncode = _reap(trainer, returncode)
        if returncode is None:
            time.sleep(POLL_S)
    # The trainer has ended: stop its group, then everything else still below the supervisor. A process that left
    # the group was re-parented to the supervisor when its parent ended (or hangs below a group member that is
    # being killed now), so the sweep finds it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(trainer, signal.SIGKILL)
    deadline = time.monotonic() + SWEEP_S
    while time.monotonic() < deadline:
        _note_escaped(me, trainer, escaped)
        left = descendants(me)
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _reap(trainer, returncode)
        if not left and not group_members(trainer):
            break
        time.sleep(POLL_S)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)  # the trainer and every process below it, all reaped
    status.update(
        returncode=returncode,
        cpu_s=round(used.ru_utime + used.ru_stime, 3),
        escaped=[{"pid": pid, "command": cmd} for pid, cmd in sorted(escaped.items())],
        survivors=group_members(trainer) + descendants(me),
    )
    _write_status(status_path, status)
    return 0


if __name__ == "__main__":
    sys.exit(supervise(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]))

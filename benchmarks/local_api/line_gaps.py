"""The longest silences of a command as a user watches it: each line it prints, timed, then the longest gaps.

`make run` on a fresh clone must never go a minute without a line (pip's install, Numba's first compile, the
demo's flows). This reads the command's merged output line by line as it comes and reports the total wall time,
the command's own CPU-seconds (user + sys of it and its children) and the six longest gaps, each with the line
that ended it. The 1-minute load before and after is printed beside them.

Run (a fresh clone, as a new user):
    d=$(mktemp -d) && git clone -q <repo> $d && cd $d && python3 benchmarks/local_api/line_gaps.py -- make run
Results: benchmarks/results/.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time


def load() -> str:
    with open("/proc/loadavg") as handle:
        return handle.read().split()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    parser.add_argument("--show", action="store_true", help="echo each line with its time and gap")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command after --, e.g. -- make run")
    before = load()
    started = last = time.monotonic()
    gaps: list[tuple[float, str]] = []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.monotonic()
        gaps.append((now - last, line.strip()[:110]))
        if args.show:
            sys.stdout.write(f"{now - started:8.1f} +{now - last:6.1f} | {line}")
        last = now
    code = proc.wait()
    ended = time.monotonic()
    gaps.append((ended - last, "<the command ended>"))
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"command: {' '.join(command)} (exit {code}) in {os.getcwd()}")
    print(
        f"wall {ended - started:.1f} s, CPU {usage.ru_utime + usage.ru_stime:.1f} s (user + sys, with children)"
    )
    print(f"load (1 min) before {before}, after {load()}; {len(gaps) - 1} lines")
    print("longest gaps, each with the line that ended it:")
    for gap, line in sorted(gaps, reverse=True)[:6]:
        print(f"  {gap:6.1f} s  {line}")
    return code


if __name__ == "__main__":
    sys.exit(main())

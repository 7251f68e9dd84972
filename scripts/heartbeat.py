"""Run a command and say it is still going: `python scripts/heartbeat.py "WHAT" COMMAND...` prints
`  still WHAT (N s)` after every HEARTBEAT_S seconds in which the command printed nothing, so a long step of
`make install` (compiling kernels on a busy machine) never goes a minute without a line. Its output passes through
unchanged. Standard library only: it runs before the project is installed. Exits with the command's exit code."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

HEARTBEAT_S = 30.0


def run_with_heartbeat(what: str, argv: list[str], heartbeat_s: float = HEARTBEAT_S) -> int:
    started = last = time.monotonic()
    lock = threading.Lock()
    done = threading.Event()

    def beat() -> None:
        nonlocal last
        while not done.wait(1.0):
            with lock:
                if time.monotonic() - last >= heartbeat_s:
                    print(f"  still {what} ({time.monotonic() - started:.0f} s)", flush=True)
                    last = time.monotonic()

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            with lock:
                sys.stdout.write(line)
                sys.stdout.flush()
                last = time.monotonic()
    done.set()
    thread.join()
    return proc.returncode


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print('usage: python scripts/heartbeat.py "WHAT" COMMAND...', file=sys.stderr)
        sys.exit(2)
    sys.exit(run_with_heartbeat(sys.argv[1], sys.argv[2:]))

"""Run `pip install ...` and show its progress in a few lines instead of pip's hundreds (or nothing, with --quiet).

Used by `make install`: one line per stage (collecting, building, installing), the count of packages collected
updated in place on a terminal (every 25th on a log), and pip's whole output when it fails. Standard library only:
it runs before the project is installed. Exits with pip's exit code.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

HEARTBEAT_S = (
    30.0  # a line at least this often while pip works in silence (installing 180 packages takes minutes)
)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python scripts/pip_progress.py PYTHON -m pip install ...", file=sys.stderr)
        return 2
    tty = sys.stdout.isatty()
    started = time.monotonic()
    kept: list[str] = []
    collected = satisfied = 0
    stage = ""

    def say(text: str, in_place: bool = False) -> None:
        said[0] = time.monotonic()
        if tty and in_place:
            sys.stdout.write(f"\r  {text}\033[K")
        else:
            sys.stdout.write(("\r\033[K" if tty else "") + f"  {text}\n")
        sys.stdout.flush()

    said = [time.monotonic()]
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(1.0):
            if time.monotonic() - said[0] >= HEARTBEAT_S:
                what = {"build": "building wheels", "install": "installing packages"}.get(
                    stage, "collecting packages"
                )
                say(f"still {what} ({time.monotonic() - started:.0f} s)")

    threading.Thread(target=heartbeat, daemon=True).start()
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            kept.append(line)
            words = line.split()
            if line.startswith("Collecting ") and len(words) > 1:
                collected += 1
                if tty or collected % 25 == 0:
                    say(f"collecting packages: {collected} ({words[1]})", in_place=True)
            elif line.startswith("Requirement already satisfied"):
                satisfied += 1
            elif line.startswith("Building wheel") and stage != "build":
                stage = "build"
                say(f"collected {collected} packages ({satisfied} already installed); building wheels ...")
            elif line.startswith("Installing collected packages") and stage != "install":
                stage = "install"
                count = len(line.split(":", 1)[-1].split(","))
                say(f"installing {count} packages into the virtual environment ...")
            elif line.startswith("Successfully installed"):
                say(f"installed ({time.monotonic() - started:.0f} s)")
    done.set()
    if proc.returncode != 0:
        sys.stdout.write(("\n" if tty else "") + "".join(kept[-60:]))
        print(f"  pip failed (exit {proc.returncode}); its last lines are above")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

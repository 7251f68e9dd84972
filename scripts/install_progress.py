"""Run `uv pip install ...` (or `pip install ...`) and show its progress in a few lines instead of hundreds.

Used by `make install`: one line per stage (resolving, downloading and building, installing, compiling bytecode;
pip's collecting, building and installing), pip's count of packages collected updated in place on a terminal (every
25th on a log), a line at least every 30 s while the installer works in silence, and the installer's last lines
when it fails. Standard library only: it runs before the project is installed. Exits with the installer's exit code.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

HEARTBEAT_S = 30.0  # a line at least this often while the installer works in silence (minutes with pip)
# uv's summary lines: it prints one per stage, then a `+ name==version` line per package, which are left out
UV_STAGES = {
    "Resolved": ("build", "resolved {}; downloading and building ..."),
    "Prepared": ("install", "prepared {}; installing ..."),
    "Installed": ("compile", "installed {}; compiling their bytecode ..."),
}


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python scripts/install_progress.py {UV pip|PYTHON -m pip} install ...", file=sys.stderr)
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
                what = {
                    "build": "building wheels",
                    "install": "installing packages",
                    "compile": "compiling bytecode",
                }.get(stage, "collecting packages")
                say(f"still {what} ({time.monotonic() - started:.0f} s)")

    threading.Thread(target=heartbeat, daemon=True).start()
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            kept.append(line)
            words = line.split()
            if words and words[0] in UV_STAGES and len(words) > 2 and words[2].startswith("package"):
                stage, text = UV_STAGES[words[0]]
                say(text.format(f"{words[1]} {words[2]}"))  # "1 package", "195 packages"
            elif line.startswith("Bytecode compiled"):
                say(f"installed ({time.monotonic() - started:.0f} s)")
            elif line.startswith("Collecting ") and len(words) > 1:
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
        print(
            f"  {'uv' if Path(argv[0]).name == 'uv' else 'pip'} failed (exit {proc.returncode}); its last lines are above"
        )
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

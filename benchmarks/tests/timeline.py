"""When each test ran, and on which xdist worker: the suite's schedule, to see what its last minutes wait on.

    CAMPAIGN_TEST_TIMELINE=OUT.jsonl .venv/bin/python -m pytest -p benchmarks.tests.timeline -n 4 --dist loadfile
    .venv/bin/python benchmarks/tests/timeline.py OUT.jsonl          # per file: worker, start, end, wall

A pytest plugin (loaded with -p) appends one JSON line per test to the file the variable names: its node id, its
worker, and the wall clock when its setup began and its teardown ended; run as a script, it sums the lines per
file, ordered by when each file began, and says when each worker went idle.
"""

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

VARIABLE = "CAMPAIGN_TEST_TIMELINE"
_started: dict[str, float] = {}
_controller = False


def pytest_configure(config: pytest.Config) -> None:
    # xdist's controller replays each worker's report hooks: only the process that ran the test records it (a
    # worker has `workerinput`; the controller has a process count and none).
    global _controller
    _controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    _started[nodeid] = time.time()


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    path = os.environ.get(VARIABLE)
    if not path or _controller or nodeid not in _started:
        return
    line = {
        "test": nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", f"pid {os.getpid()}"),
        "start": _started.pop(nodeid),
        "end": time.time(),
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def summarise(path: Path) -> str:
    lines = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines() if text.strip()]
    if not lines:
        return f"{path}: no tests recorded"
    origin = min(line["start"] for line in lines)
    files: dict[str, dict[str, float | str]] = defaultdict(dict)
    for line in lines:
        entry = files[line["test"].split("::")[0]]
        entry["worker"] = line["worker"]
        entry["start"] = min(float(entry.get("start", line["start"])), line["start"])
        entry["end"] = max(float(entry.get("end", line["end"])), line["end"])
    rows = ["| file | worker | start (s) | end (s) | wall (s) |", "| --- | --- | ---: | ---: | ---: |"]
    for name, entry in sorted(files.items(), key=lambda item: float(item[1]["start"])):
        start, end = float(entry["start"]) - origin, float(entry["end"]) - origin
        rows.append(f"| `{name}` | {entry['worker']} | {start:.0f} | {end:.0f} | {end - start:.0f} |")
    idle: dict[str, float] = defaultdict(float)
    for entry in files.values():
        idle[str(entry["worker"])] = max(idle[str(entry["worker"])], float(entry["end"]) - origin)
    rows.append("")
    rows.extend(f"{worker}: last test ended at {end:.0f} s" for worker, end in sorted(idle.items()))
    return "\n".join(rows)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        sys.exit(
            f"usage: {sys.argv[0]} TIMELINE.jsonl (written by pytest -p benchmarks.tests.timeline with {VARIABLE} set)"
        )
    print(summarise(Path(sys.argv[1])))

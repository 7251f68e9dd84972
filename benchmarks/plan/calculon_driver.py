"""Runs inside Calculon's own venv (never ours): reads [{"app", "exe", "system"}] JSON on stdin, prints one JSON
line per case with Calculon's step time (or its error), then the median seconds per estimate.

Called by benchmarks/plan/compare_calculon.py; Calculon itself lives outside the repository (benchmarks/README.md).
"""

import contextlib
import json
import logging
import statistics
import sys
import time

import calculon
from calculon.llm import Llm

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 5


SYSTEMS: dict[str, dict] = {}


def estimate(case: dict) -> float:
    """One Calculon estimate from parsed JSON (the system file is read once, outside the timing)."""
    if case["system"] not in SYSTEMS:
        SYSTEMS[case["system"]] = calculon.read_json_file(case["system"])
    app = Llm.Application(case["app"])
    exe = Llm.Execution.from_json(case["exe"])
    syst = calculon.System(SYSTEMS[case["system"]])
    model = Llm(app, logging.getLogger("calculon"))
    model.compile(syst, exe)
    model.run(syst)
    return model.get_total_time()


def main() -> None:
    cases = json.load(sys.stdin)
    timings = []
    for case in cases:
        try:
            step = estimate(case)
            error = None
        except (Llm.Error, AssertionError) as exc:
            step, error = None, str(exc)
        runs = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            with contextlib.suppress(Llm.Error, AssertionError):
                estimate(case)
            runs.append(time.perf_counter() - t0)
        timings.append(statistics.median(runs))
        print(json.dumps({"step_s": step, "error": error, "seconds_per_estimate": statistics.median(runs)}))
    print(json.dumps({"median_seconds_per_estimate": statistics.median(timings)}))


if __name__ == "__main__":
    main()

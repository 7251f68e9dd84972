"""What the window-length rule adds to `campaign validate`: the configuration gates (plan + schedule) with the rule
off (`gates.config.window_replicas=0`) and on (the shipped replica count), side by side, alternating.

    .venv/bin/python benchmarks/calendar/bench_window_length.py [--runs 5]

Measures `make_plan` + `plan_gates` + `judge_window`, i.e. the body of validate's `plan-gates` task without Prefect.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from campaign.calendar.window_length import judge_window
from campaign.config import load_config
from campaign.gates import plan_gates, schedule_with_window_length
from campaign.plan import make_plan


def configuration_gates(config) -> tuple[float, str]:
    t = time.perf_counter()
    plan = make_plan(config)
    results = plan_gates(plan, [(v.rule, v.message) for v in plan.violations])
    verdict = "off"
    if config.gates.config.window_replicas and plan.fits:
        judged = judge_window(config, plan)
        results = [schedule_with_window_length(r, judged) if r.gate == "schedule" else r for r in results]
        verdict = judged.verdict
    return time.perf_counter() - t, verdict


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print("| campaign | replicas | rule off (s) | rule on (s) | added (s) | verdict |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in ("demo", "llama3-405b"):
        path = REPO / "configs" / "campaigns" / f"{name}.yaml"
        on = load_config(path).config
        off = load_config(path, ["gates.config.window_replicas=0"]).config
        t_off, t_on, verdict = [], [], ""
        for _ in range(args.runs):  # alternating
            t_off.append(configuration_gates(off)[0])
            t, verdict = configuration_gates(on)
            t_on.append(t)
        a, b = statistics.median(t_off), statistics.median(t_on)
        print(
            f"| {name} | {on.gates.config.window_replicas} | {a:.3f} | {b:.3f} | {b - a:.3f} | {verdict} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

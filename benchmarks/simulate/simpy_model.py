"""The same job written plainly in SimPy, as a user would in an afternoon: the baseline campaign must beat.

Runs in its own venv (SimPy and numpy only; see benchmarks/README.md), never imports campaign. Reads the window's inputs
as JSON (written by bench_simulate.py from the campaign config) and prints one JSON line: seconds per replica
and the means over replicas. Event by event: train `interval_s`, write `write_s`, commit; a failure interrupts
the job, which loses the uncommitted segment, waits for detection, takes a spare node (or waits for a repair),
and restarts; a failure during recovery starts it again; planned maintenance checkpoints first, then holds the
job. No power, no diurnal drift, no tokens: interruptions and ETTR are what the comparison checks.
"""

import json
import sys
import time

import numpy as np
import simpy


def replica(p, seed):
    env = simpy.Environment()
    rng = np.random.default_rng(seed)
    spares = simpy.Container(env, init=p["spare_nodes"], capacity=p["spare_nodes"] + p["nodes"])
    stats = {"productive": 0.0, "unexpected": 0, "planned": 0}

    def repair(delay):
        yield env.timeout(delay)
        yield spares.put(1)

    def job():
        causes = []  # what the job must recover from before it trains again
        while True:
            if causes:
                cause = causes[-1]
                try:
                    if cause["kind"] == "planned":
                        yield env.timeout(cause["hold_s"])
                    else:
                        yield env.timeout(cause["detect_s"])
                        if cause["node"] and not cause.get("swapped"):
                            env.process(repair(cause["repair_s"]))
                            request = spares.get(1)
                            try:
                                yield request
                            except simpy.Interrupt:
                                request.cancel()
                                raise
                            cause["swapped"] = True
                        yield env.timeout(cause["restart_s"])
                    causes.pop()
                except simpy.Interrupt as again:
                    # Another failure during recovery: recover from it, then start this recovery again.
                    causes.append(dict(again.cause))
                continue
            started = env.now
            try:
                yield env.timeout(p["interval_s"])
                yield env.timeout(p["write_s"])
                stats["productive"] += p["interval_s"]
            except simpy.Interrupt as stop:
                cause = dict(stop.cause)
                if cause["kind"] == "planned":
                    # Checkpoint what was trained, then hold for the rest of the maintenance slot.
                    trained = min(env.now - started, p["interval_s"])
                    try:
                        yield env.timeout(p["write_s"])
                        stats["productive"] += trained
                        cause["hold_s"] = max(0.0, cause["end_s"] - env.now)
                    except simpy.Interrupt as failure:
                        cause = dict(failure.cause)
                causes.append(cause)

    def failures(job_process, category):
        while True:
            yield env.timeout(rng.exponential(1.0 / category["rate_per_s"]))
            stats["unexpected"] += 1
            job_process.interrupt(category)

    def maintenance(job_process):
        while True:
            yield env.timeout(rng.exponential(86_400.0 / p["planned_per_day"]))
            stats["planned"] += 1
            job_process.interrupt(
                {
                    "kind": "planned",
                    "end_s": env.now + p["planned_duration_s"],
                    "hold_s": p["planned_duration_s"],
                }
            )

    job_process = env.process(job())
    for category in p["categories"]:
        env.process(failures(job_process, category))
    if p["planned_per_day"] > 0:
        env.process(maintenance(job_process))
    env.run(until=p["window_s"])
    return stats


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        p = json.load(f)
    replicas, first = int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0
    started = time.perf_counter()
    runs = [replica(p, seed) for seed in range(first, first + replicas)]
    wall = time.perf_counter() - started
    print(
        json.dumps(
            {
                "replicas": replicas,
                "s_per_replica": wall / replicas,
                "interruptions_unexpected": float(np.mean([r["unexpected"] for r in runs])),
                "interruptions_planned": float(np.mean([r["planned"] for r in runs])),
                "ettr": float(np.mean([r["productive"] / p["window_s"] for r in runs])),
            }
        )
    )


if __name__ == "__main__":
    main()

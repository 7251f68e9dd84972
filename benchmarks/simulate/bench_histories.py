"""The cost of drawing each replica as a history: one 54-day, 16,384-GPU window (Llama 3 405B as shipped) through the
compiled summary path, per replica, for two source trees side by side (this checkout and another, e.g. a commit
before the change exported with `git archive`).

Each round runs, per tree, a fresh process that loads the kernels (compiling them once, untimed), then times
`simulate_batch` over the replicas and, apart, `draw_arrivals` alone; rounds alternate the trees. Prints the
medians of wall and CPU seconds per replica.

    .venv/bin/python benchmarks/simulate/bench_histories.py --other /tmp/before --replicas 200 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys, time
from campaign.config import load_config
from campaign.sim import simulate_batch
from campaign.sim.failures import draw_arrivals
from campaign.window import window_inputs
inputs = window_inputs(load_config(sys.argv[1]).config)
n = int(sys.argv[2])
simulate_batch(inputs, range(n, n + 2))  # load (or compile) the kernels, untimed
w, c = time.perf_counter(), time.process_time()
summaries = simulate_batch(inputs, range(n))
wall, cpu = time.perf_counter() - w, time.process_time() - c
w = time.perf_counter()
for r in range(n):
    draw_arrivals(inputs, r)
draws = time.perf_counter() - w
print(json.dumps({"wall": wall / n, "cpu": cpu / n, "draws": draws / n,
                  "failures": sum(s.interruptions.unexpected for s in summaries) / n,
                  "ettr": sum(s.ettr for s in summaries) / n}))
"""


def run(tree: Path, config: str, replicas: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, config, str(replicas)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--other", type=Path, required=True, help="the other source tree (e.g. git archive of a commit)"
    )
    ap.add_argument("--config", default="configs/campaigns/llama3-405b.yaml", help="relative to each tree")
    ap.add_argument("--replicas", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    trees = {"other": args.other.resolve(), "this": ROOT}
    results: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            results[name].append(run(tree, args.config, args.replicas))
    for name, rows in results.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(
            f"{name:5s} ({trees[name]}): {med['wall'] * 1e3:.3f} ms wall, {med['cpu'] * 1e3:.3f} ms CPU per replica; "
            f"draws alone {med['draws'] * 1e3:.3f} ms; mean failures {med['failures']:.1f}, ETTR {med['ettr']:.4f} "
            f"(medians of {len(rows)} alternating rounds, {args.replicas} replicas each)"
        )


if __name__ == "__main__":
    main()

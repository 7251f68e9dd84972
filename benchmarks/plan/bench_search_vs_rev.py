"""search_layouts on Llama 3 405B (16,384 GPUs): this tree against an older revision, side by side.

Two worker processes (this tree, and `git archive REV` unpacked in a temporary directory) each time one search
when asked; the driver asks them in alternation, so machine load falls on both alike, and prints the medians and
their ratio. Run: .venv/bin/python benchmarks/plan/bench_search_vs_rev.py --rev 5bbb54a [--repeats 21]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from campaign.config import load_config
from campaign.plan import search_layouts
cfg = load_config(sys.argv[1] + '/configs/campaigns/llama3-405b.yaml').config
search_layouts(cfg)
for _ in sys.stdin:
    t0 = time.perf_counter(); search_layouts(cfg); print(time.perf_counter() - t0, flush=True)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", required=True)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.rev], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        workers = {
            name: subprocess.Popen(
                [sys.executable, "-c", WORKER, root], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            for name, root in (("this tree", str(REPO)), (args.rev, tmp))
        }
        times: dict[str, list[float]] = {name: [] for name in workers}
        for _ in range(args.repeats):
            for name, proc in workers.items():
                proc.stdin.write("go\n")
                proc.stdin.flush()
                times[name].append(float(proc.stdout.readline()))
        for proc in workers.values():
            proc.stdin.close()
            proc.wait()
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, value in med.items():
        print(
            f"{name:12s} search_layouts median {value:.3f} s (min {min(times[name]):.3f}) of {args.repeats}"
        )
    this, old = med["this tree"], med[args.rev]
    print(f"ratio this / {args.rev}: {this / old:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Time to read a 10,000-step NeMo TensorBoard event file as a measurement, beside the same steps as metrics.csv.

Writes the file with tensorboardX (NeMo's six scalars per step: tests/helpers/nemo_events.py), then, in fresh
processes so the reader's import is counted once where a command pays it, times `read_step_times` on it and on the
same steps as Lightning's metrics.csv, and the parts of the event-file read (framing walk, EventAccumulator, mapping).
Wall beside CPU-seconds (user + sys of the process), the 1-minute load from /proc/loadavg before each run; medians.

    .venv/bin/python benchmarks/plan/bench_trainer_logs.py [--steps 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys, time
from pathlib import Path

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

kind, path = sys.argv[1], Path(sys.argv[2])
out = {}
w0, c0 = time.perf_counter(), cpu()
from campaign.plan.measure import read_step_times
out["import campaign's reader"] = (time.perf_counter() - w0, cpu() - c0)
if kind == "parts":
    from campaign.plan import tensorboard_events as tb
    for name, run in (
        ("import tensorboard's EventAccumulator", lambda: tb._accumulator(path)),
        ("framing walk (campaign)", lambda: tb.framing_note(path)),
        ("EventAccumulator.Reload", lambda: tb._accumulator(path).Reload()),
        ("read_step_times (whole read)", lambda: read_step_times(path)),
    ):
        w, c = time.perf_counter(), cpu()
        run()
        out[name] = (time.perf_counter() - w, cpu() - c)
else:
    w, c = time.perf_counter(), cpu()
    got = read_step_times(path)
    out["read_step_times"] = (time.perf_counter() - w, cpu() - c)
    out["n_steps"] = (len(got.seconds), 0)
print(json.dumps(out))
"""


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def write_inputs(folder: Path, steps: int) -> tuple[Path, Path]:
    import numpy as np

    from tests.helpers.nemo_events import TIMING, write_nemo_events

    times = 4.0 + np.random.default_rng(7).normal(0, 0.05, steps)
    events = write_nemo_events(folder / "version_0", times, batch=512)
    csv = folder / "metrics.csv"
    header = ["consumed_samples", "epoch", "global_step", "lr", "reduced_train_loss", "step", TIMING]
    rows = [",".join(header)]
    rows += [f"{(k + 1) * 512}.0,0,{k}.0,0.0003,2.5,{k},{t}" for k, t in enumerate(times)]
    csv.write_text("\n".join(rows) + "\n")
    return events, csv


def run(kind: str, path: Path) -> dict[str, list[float]]:
    before = load()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(path)],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    got["load"] = [before, 0.0]
    return got


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        events, csv = write_inputs(Path(tmp), args.steps)
        print(
            f"{args.steps:,} steps: event file {events.stat().st_size:,} bytes, metrics.csv {csv.stat().st_size:,}"
        )
        results: dict[str, list[dict[str, list[float]]]] = {"events": [], "csv": [], "parts": []}
        for _ in range(args.rounds):
            results["events"].append(run("events", events))
            results["csv"].append(run("csv", csv))
            results["parts"].append(run("parts", events))
    loads = [r["load"][0] for rs in results.values() for r in rs]
    print(f"load (1-min) before each run: {min(loads):.2f}-{max(loads):.2f}; medians of {args.rounds} rounds")
    print(f"{'what':44s} {'wall s':>8s} {'CPU s':>8s}")
    for label, kind, keys in (
        ("event file", "events", ["import campaign's reader", "read_step_times"]),
        ("metrics.csv", "csv", ["import campaign's reader", "read_step_times"]),
        (
            "event file, by part",
            "parts",
            [
                "import tensorboard's EventAccumulator",
                "framing walk (campaign)",
                "EventAccumulator.Reload",
                "read_step_times (whole read)",
            ],
        ),
    ):
        print(f"-- {label} (n_steps kept: {results[kind][0].get('n_steps', ['-'])[0]})")
        for key in keys:
            wall = statistics.median(r[key][0] for r in results[kind])
            cpu = statistics.median(r[key][1] for r in results[kind])
            print(f"   {key:41s} {wall:8.3f} {cpu:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The analyse task's work (analysis + report of a simulated 54-day, 16,384-GPU window) in this tree against the same
work at an older revision, side by side: one worker process per tree, timed in alternation on one catalog, so both
see the same machine load. Wall and CPU seconds per run; medians.

The older revision's report API is the one before `gather_report_inputs` (e867836 and earlier): the task read the
analysis, events and per-minute power itself and passed them to `write_report`.
Run: .venv/bin/python benchmarks/analyse/bench_report_vs_rev.py [--rev e867836] [--repeats 7]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "analyse"))

WORKER_NEW = """
from pathlib import Path
from campaign.analysis.report import write_report
from campaign.analysis.report_inputs import gather_report_inputs
from campaign.store import Workspace
ws = Workspace(Path(WS))
def once(out):
    write_report(out, gather_report_inputs(ws))
"""
WORKER_OLD = """
import json
from pathlib import Path
from campaign import store
from campaign.analysis.analysis import analyse_window, recommendations, series
from campaign.analysis.power_detail import rebuild_one_second, smoothing_effect
from campaign.analysis.report import write_report
ws = store.Workspace(Path(WS))
def once(out):  # the analyse task's body at that revision, without Prefect
    with store.catalog(ws, read_only=True) as con:
        result = analyse_window(con, str(ws.catalog_path), ws.data_dir)
        events = con.execute("SELECT * FROM window_events ORDER BY event_id").df()
        power = series(con, "power_series", result["commitment_id"], result["replica"])
        config_json, summary_json = con.execute("SELECT config_json, summary FROM executed_window").fetchone()
    power = power.assign(t_s=power["day"] * 86400.0)
    summary = json.loads(summary_json)
    one_second, note = rebuild_one_second(config_json, result["replica"], summary, len(events))
    if note == "":
        result["smoothing_effect"] = smoothing_effect(config_json, result["replica"], summary)
        result["recommendations"] = recommendations(result)
    write_report(out, result, events, power, one_second, note, None)
"""
LOOP = """
import sys, time
import campaign
print("campaign from", campaign.__file__, flush=True)
once(Path(OUT))  # warm-up: imports, caches
for line in sys.stdin:
    c, w = time.process_time(), time.perf_counter()
    once(Path(OUT))
    print(f"{time.perf_counter() - w} {time.process_time() - c}", flush=True)
"""


def worker(code: str, tree: Path, ws: Path, out: Path) -> subprocess.Popen:
    source = f"WS = {str(ws)!r}\nOUT = {str(out)!r}\n" + code + LOOP
    proc = subprocess.Popen(
        [sys.executable, "-c", source],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    print(f"  {tree.name}: {proc.stdout.readline().strip()}")
    return proc


def export(rev: str, into: Path) -> Path:
    data = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rev", default="e867836")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    from bench_analyse import build

    with tempfile.TemporaryDirectory(prefix="bench-report-rev-") as tmp:
        root = Path(tmp)
        build(root / "ws")
        old_tree = export(args.rev, root / f"rev-{args.rev}")
        print("workers (each warmed up once):")
        procs = {
            "this tree": worker(WORKER_NEW, REPO, root / "ws", root / "out-new"),
            f"rev {args.rev}": worker(WORKER_OLD, old_tree, root / "ws", root / "out-old"),
        }
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in procs}
        for _ in range(args.repeats):
            for name, proc in procs.items():  # alternating
                proc.stdin.write("go\n")
                proc.stdin.flush()
                wall, cpu = map(float, proc.stdout.readline().split())
                times[name].append((wall, cpu))
        for proc in procs.values():
            proc.stdin.close()
            proc.wait(timeout=60)
        print(f"\nanalysis + report, median of {args.repeats} alternating runs:")
        med = {
            k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for k, v in times.items()
        }
        for name, (wall, cpu) in med.items():
            print(f"  {name:16s} wall {wall:6.3f} s   cpu {cpu:6.3f} s")
        (new_w, new_c), (old_w, old_c) = med["this tree"], med[f"rev {args.rev}"]
        print(f"  rev / this tree: {old_w / new_w:.2f}x wall, {old_c / new_c:.2f}x cpu")
        for name, out in (("this tree", root / "out-new"), (f"rev {args.rev}", root / "out-old")):
            print(
                f"  {name}: report.html {(out / 'report.html').stat().st_size / 1e6:.2f} MB, report.md "
                f"{(out / 'report.md').stat().st_size / 1e6:.2f} MB"
            )


if __name__ == "__main__":
    main()

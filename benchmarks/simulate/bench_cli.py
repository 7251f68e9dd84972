"""`campaign simulate CONFIG --replicas N` end to end through the CLI, as a user runs it, Prefect included.

Alternates two variants in fresh processes: `private` (no PREFECT_API_URL: the command starts its private API,
campaign_cli/local_api.py) and `reuse` (PREFECT_API_URL naming a `prefect server start` this script started first, as
`make ui` leaves one running). Prints each run's wall and CPU seconds (the command and its children), the medians,
and the system's 1-minute load. The target: 1,000 Llama 3 405B replicas under 10 s end to end on 2 cores.
Results: benchmarks/results/.

Run: .venv/bin/python benchmarks/simulate/bench_cli.py [--replicas 1000] [--runs 5]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.local_api.bench_local_api import _server


def _run(args: list[str], env: dict) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(args, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(REPO / "configs" / "campaigns" / "llama3-405b.yaml"))
    parser.add_argument("--replicas", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    campaign = str(Path(sys.executable).with_name("campaign"))
    results: dict[str, list[tuple[float, float]]] = {"private": [], "reuse": []}
    with tempfile.TemporaryDirectory() as tmp:
        server, url = _server(Path(tmp) / "server")  # its CPU is not counted: it is not the command's child
        command = [
            campaign,
            "simulate",
            args.config,
            "--replicas",
            str(args.replicas),
            "--json",
            "--workspace",
            f"{tmp}/ws",
        ]
        try:
            _run(
                command, env
            )  # the workspace's first run (and the template database, if this machine has none)
            for _ in range(args.runs):
                results["private"].append(_run(command, env))
                results["reuse"].append(_run(command, {**env, "PREFECT_API_URL": url}))
        finally:
            server.terminate()
            server.wait(timeout=30)
    for name, runs in results.items():
        walls = [w for w, _ in runs]
        cpus = [c for _, c in runs]
        print(
            f"{name:8s} median {statistics.median(walls):5.2f} s wall, {statistics.median(cpus):5.2f} s CPU   runs: "
            + ", ".join(f"{w:.2f}" for w in walls)
        )
    print(
        f"{args.replicas} replicas of {Path(args.config).name}; 1-minute system load at the end: "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()

"""`campaign simulate CONFIG --replicas N` end to end through the CLI, beside the same replicas in-process.

Three variants alternate in every round, each in a fresh process as a user runs it:
- `in-process`: a Python process loads the config and the kernels (from Numba's cache), then times the command's
  own replicas (`simulate_batch` over the same inputs, step-time band and seeds), on one thread and, as the flow
  runs them, in one batch per `runtime.max_workers` on threads: their wall times are the references of the
  "within 2x" target; the process's whole wall and CPU are shown beside them;
- `cli, kept worker`: `campaign simulate ... --json --workspace W`, its flow run in the worker kept beside the
  workspace's local server (campaign_cli/kept_worker.py; both started by a first, unmeasured call);
- `cli, own process`: the same with CAMPAIGN_KEPT_WORKER=0: Prefect, the flow and the kernels imported by the
  command itself.
CPU-seconds are user + sys of the command and its children (RUSAGE_CHILDREN). The kept worker and the server are
not the command's children: what they spent during the run (the growth of utime + stime in /proc/PID/stat) is
shown beside it, and their sum is the command's whole CPU cost.
`--layers` also times, once, in one fresh process, each layer the command in its own process pays for.
Prints a Markdown table of medians, the 1-minute load (/proc/loadavg) before each run, and the commit.

Run: .venv/bin/python benchmarks/simulate/bench_cli.py [--replicas 1000] [--rounds 5] [--layers]
Results: benchmarks/results/2026-12-05-simulate-cli.md
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LLAMA = str(REPO / "configs" / "campaigns" / "llama3-405b.yaml")
IN_PROCESS = """
import json, sys, time
sys.path.insert(0, {repo!r})
from campaign.config import load_config
from campaign.sim.compiled import warm
from concurrent.futures import ThreadPoolExecutor
from campaign.sim.replicas import replica_batches, simulate_batch
from campaign.window import window_replicas_inputs
config = load_config({config!r}).config
inputs, band = window_replicas_inputs(config)
warm()
started = time.perf_counter()
simulate_batch(inputs, range({replicas}), band)
one = time.perf_counter() - started
# as the flow runs them: one batch per runtime.max_workers, on threads of one process (the kernels release the GIL)
batches = replica_batches({replicas}, config.runtime.max_workers)
started = time.perf_counter()
with ThreadPoolExecutor(max_workers=len(batches)) as pool:
    list(pool.map(lambda b: simulate_batch(inputs, b, band), batches))
print(json.dumps({{"replicas_s": one, "replicas_threads_s": time.perf_counter() - started,
                  "threads": len(batches)}}))
"""
LAYERS = """
import json, os, resource, sys, time
sys.path.insert(0, {repo!r})
out = {{}}
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def layer(name, fn):
    c, t = cpu(), time.perf_counter()
    value = fn()
    out[name] = [time.perf_counter() - t, cpu() - c]
    return value
layer("CLI: typer app and commands", lambda: __import__("campaign_cli.cli"))
from campaign.sim.sweeps import check_sweeps
layer("CLI: config read and checked", lambda: check_sweeps({config!r}, [], []))
layer("import prefect", lambda: __import__("prefect.flows"))
layer("import the simulate flow and its tasks", lambda: [__import__("flows.simulate"), __import__("tasks.analyse")])
layer("import matplotlib (the report's plots)", lambda: __import__("campaign.analysis.plots"))
from campaign.sim.compiled import warm
layer("kernels loaded from Numba's cache", warm)
from campaign_cli.terminal import finish, prefect_api, workspace_if_any
api = prefect_api(workspace_if_any({workspace!r}))
layer("local API: the kept server found and leased", api.__enter__)
from flows.simulate import SimulateParams, simulate_with_runner
params = SimulateParams(config={config!r}, replicas={replicas}, workspace={workspace!r})
r = layer("flow run, first in the process", lambda: finish(simulate_with_runner(params)))
out["  of which the replicas (2 threads)"] = [r["wall_s"], None]
r = layer("flow run, second in the process (warm)", lambda: finish(simulate_with_runner(params)))
out["  of which the replicas (2 threads) "] = [r["wall_s"], None]
from campaign.analysis.simulate_report import simulate_figures
from campaign.analysis.simulate_run import ReplicaValues

values = ReplicaValues.from_json(r["replica_values"])
layer("  the report's three figures alone", lambda: simulate_figures(values, r["summary"]["window_days"]))
layer("logs and events sent before exit", lambda: api.__exit__(None, None, None))
print(json.dumps(out))
"""


def cpu_of(pid: int | None) -> float:
    """utime + stime of a live process, in seconds (0 when it is gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kept_pids(home: Path) -> tuple[int | None, int | None]:
    """The workspace's kept server and worker, if they run."""

    def pid(name: str) -> int | None:
        try:
            return int(json.loads((home / name).read_text())["pid"])
        except (OSError, ValueError, KeyError):
            return None

    return pid("server.json"), pid("worker.json")


def run(args: list[str], env: dict[str, str], home: Path | None = None) -> dict[str, float | str]:
    """Wall, CPU of the command and its children, CPU of the kept server and worker over it, load before."""
    load = float(Path("/proc/loadavg").read_text().split()[0])
    server, worker = kept_pids(home) if home else (None, None)
    kept_before = cpu_of(server), cpu_of(worker)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return {
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "server_cpu_s": cpu_of(server) - kept_before[0],
        "worker_cpu_s": cpu_of(worker) - kept_before[1],
        "load": load,
        "stdout": out.stdout,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=LLAMA)
    parser.add_argument("--replicas", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layers", action="store_true", help="Also time each layer once, in one process.")
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    base.pop("CAMPAIGN_KEPT_WORKER", None)
    campaign = str(Path(sys.executable).with_name("campaign"))
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        command = [
            campaign,
            "simulate",
            args.config,
            "--replicas",
            str(args.replicas),
            "--json",
            "--workspace",
        ]
        command.append(str(ws))
        run(command, base)  # makes the workspace (this first run uses the shared server), unmeasured
        run(command, base)  # starts the workspace's kept server and worker, unmeasured
        in_process = [
            sys.executable,
            "-c",
            IN_PROCESS.format(repo=str(REPO), config=args.config, replicas=args.replicas),
        ]
        for _ in range(args.rounds):
            r = run(in_process, base)
            r.update(json.loads(r["stdout"].strip().splitlines()[-1]))
            runs.setdefault("in-process", []).append(r)
            runs.setdefault("cli, kept worker", []).append(run(command, base, ws / ".prefect"))
            own = run(command, {**base, "CAMPAIGN_KEPT_WORKER": "0"}, ws / ".prefect")
            runs.setdefault("cli, own process", []).append(own)
            for name in ("in-process", "cli, kept worker", "cli, own process"):
                row = {k: round(v, 3) for k, v in runs[name][-1].items() if k != "stdout"}
                print(json.dumps({"variant": name, **row}), flush=True)
        layers = None
        if args.layers:
            code = LAYERS.format(
                repo=str(REPO), config=args.config, replicas=args.replicas, workspace=str(ws)
            )
            layers = json.loads(run([sys.executable, "-c", code], base)["stdout"].strip().splitlines()[-1])
        subprocess.run([campaign, "server", "stop", str(ws)], env=base, capture_output=True, check=False)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    reference = med("in-process", "replicas_s")
    threaded = med("in-process", "replicas_threads_s")
    threads = int(runs["in-process"][-1]["threads"])
    print(
        f"\ncommit {commit}; {args.replicas} replicas of {Path(args.config).name}; {args.rounds} rounds, medians"
    )
    print(
        "\n| variant | median wall | x in-process replicas | CPU-s (command) | CPU-s (kept worker + server) |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| in-process: the replicas alone (one thread) | {reference:.2f} s | 1.00 | | |")
    print(
        f"| in-process: the replicas alone ({threads} threads, as the flow runs them) | {threaded:.2f} s | "
        f"{threaded / reference:.2f} | | |"
    )
    print(
        f"| in-process: the whole process | {med('in-process', 'wall_s'):.2f} s | | {med('in-process', 'cpu_s'):.2f} | |"
    )
    for name in ("cli, kept worker", "cli, own process"):
        kept = statistics.median(r["worker_cpu_s"] + r["server_cpu_s"] for r in runs[name])
        print(
            f"| `campaign simulate` end to end, {name.split(', ')[1]} | {med(name, 'wall_s'):.2f} s | "
            f"{med(name, 'wall_s') / reference:.2f} | {med(name, 'cpu_s'):.2f} | {kept:.2f} |"
        )
    ratios = [
        k["wall_s"] / p["replicas_s"]
        for k, p in zip(runs["cli, kept worker"], runs["in-process"], strict=True)
    ]
    print(f"\nkept worker / in-process replicas, per round: {', '.join(f'{x:.2f}' for x in ratios)}")
    threaded_ratios = [
        k["wall_s"] / p["replicas_threads_s"]
        for k, p in zip(runs["cli, kept worker"], runs["in-process"], strict=True)
    ]
    print(
        f"kept worker / in-process replicas on {threads} threads, per round: "
        f"{', '.join(f'{x:.2f}' for x in threaded_ratios)} (median {statistics.median(threaded_ratios):.2f})"
    )
    loads = [r["load"] for rows in runs.values() for r in rows]
    print(f"1-minute load before each run: {min(loads):.2f}-{max(loads):.2f} on {os.cpu_count()} cores")
    if layers:
        print("\n| layer (one process, in order) | wall | CPU-s |\n| --- | ---: | ---: |")
        for name, (wall, cpu) in layers.items():
            print(f"| {name} | {wall:.2f} s | {'' if cpu is None else f'{cpu:.2f}'} |")


if __name__ == "__main__":
    main()

"""What each local command costs a user, first and second call, beside `prefect version` and `python -c pass`.

On a finished demo workspace (`campaign run configs/campaigns/demo.yaml --workspace W`, made once beforehand, its
calendar in W/../calendars), in alternating rounds, each command in a fresh process as a user runs it; wall seconds
and CPU-seconds (user + sys of the command and its children; the kept Prefect server, started by an earlier command,
is not a child and is not counted), and the 1-minute load before each run:

- `python -c pass` and `prefect version`: the interpreter, and Prefect's own command, as anchors;
- `plan`: `campaign plan configs/campaigns/demo.yaml` (no flow);
- `calendar show`: first after its recorded report is set aside (it draws the Gantt chart in a flow run), second
  unchanged (the recorded report is printed);
- `analyse --json`: the same with the report's inputs digest (report/report-inputs.json);
- `validate`: second on an unchanged workspace (every gate but data_identity reused); with `--validate-first`, also
  `validate --rerun` (every gate run, the rehearsal trains) once per round;
- `simulate --replicas N` of the Llama 3 config end to end, against the same replicas in-process
  (`simulate_batch` in a process whose kernels are loaded: the replicas' own time), with `--simulate`.

Run: .venv/bin/python benchmarks/local_api/bench_commands.py --workspace W [--rounds 3] [--validate-first]
     [--simulate]
Results: benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "configs" / "campaigns" / "demo.yaml")
LLAMA = str(REPO / "configs" / "campaigns" / "llama3-405b.yaml")
IN_PROCESS = """
import sys, time
sys.path.insert(0, {repo!r})
from campaign.config import load_config
from campaign.sim import simulate_batch
from campaign.sim.compiled import warm
from campaign.window import window_inputs
inputs = window_inputs(load_config({config!r}).config)
warm()
started = time.perf_counter()
simulate_batch(inputs, range({replicas}))
print(time.perf_counter() - started)
"""


def run(args: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """(wall s, CPU-s of the command and its children, load before, stdout)."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, load, out.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", required=True, help="A finished demo workspace.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--validate-first", action="store_true", help="Also `validate --rerun` (minutes).")
    parser.add_argument(
        "--simulate", action="store_true", help="Also simulate end to end against in-process."
    )
    parser.add_argument("--replicas", type=int, default=1000)
    args = parser.parse_args()
    ws = Path(args.workspace).resolve()
    bin_ = Path(sys.executable).parent
    campaign, prefect = str(bin_ / "campaign"), str(bin_ / "prefect")
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    calendars = ws.parent / "calendars"
    runs: dict[str, list[tuple[float, float, float]]] = {}

    def measure(name: str, argv: list[str]) -> str:
        wall, cpu, load, out = run(argv, env)
        runs.setdefault(name, []).append((wall, cpu, load))
        print(json.dumps({"variant": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load": load}))
        return out

    def forget(*paths: Path) -> None:
        for path in paths:
            path.unlink(missing_ok=True)

    for _ in range(args.rounds):
        measure("python -c pass", [sys.executable, "-c", "pass"])
        measure("prefect version", [prefect, "version"])
        for call in ("first", "second"):
            measure(f"plan ({call})", [campaign, "plan", DEMO])
        forget(*calendars.glob("*-gantt.inputs"))
        for call in ("first", "second"):
            measure(f"calendar show ({call})", [campaign, "calendar", "show", "--workspaces", str(ws.parent)])
        forget(ws / "report" / "report-inputs.json")
        for call in ("first", "second"):
            measure(f"analyse --json ({call})", [campaign, "analyse", "--workspace", str(ws), "--json"])
        if args.validate_first:
            measure(
                "validate --rerun (every gate run)",
                [campaign, "validate", DEMO, "--workspace", str(ws), "--rerun"],
            )
        measure("validate (unchanged: reused)", [campaign, "validate", DEMO, "--workspace", str(ws)])
        if args.simulate:
            code = IN_PROCESS.format(repo=str(REPO), config=LLAMA, replicas=args.replicas)
            out = measure("simulate: in-process replicas (process)", [sys.executable, "-c", code])
            runs.setdefault("simulate: in-process replicas (replicas only)", []).append(
                (float(out.strip().splitlines()[-1]), float("nan"), os.getloadavg()[0])
            )
            measure(
                f"simulate --replicas {args.replicas} end to end",
                [
                    campaign,
                    "simulate",
                    LLAMA,
                    "--replicas",
                    str(args.replicas),
                    "--json",
                    "--workspace",
                    str(ws.parent / "sim"),
                ],
            )
    print("\n| command | runs | median wall | median CPU-s | load (1-min) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, rows in runs.items():
        walls, cpus, loads = zip(*rows, strict=True)
        cpu = statistics.median(cpus)
        print(
            f"| {name} | {len(rows)} | {statistics.median(walls):.2f} s | "
            f"{'' if cpu != cpu else f'{cpu:.2f}'} | {min(loads):.1f}-{max(loads):.1f} |"
        )


if __name__ == "__main__":
    main()

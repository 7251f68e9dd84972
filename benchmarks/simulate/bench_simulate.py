"""Campaign's simulator against a plain SimPy model of the same job, timed side by side in one run.

For each replica count: alternating runs of (a) the SimPy model in its own venv, (b) campaign's summary path
(`simulate_batch`, one process), (c) campaign's event-by-event reference model (`simulate`, with event log and
power series), and for the largest count (d) `campaign simulate CONFIG --replicas N --json` end to end through
the CLI (Prefect included, both cores). Prints medians and the agreement of mean interruptions and ETTR.

    SIMPY_PY=... .venv/bin/python benchmarks/simulate/bench_simulate.py --replicas 1,1000

SIMPY_PY (or --simpy) is the Python of a venv with SimPy and NumPy beside the project (benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from campaign.config import load_config
from campaign.sim import simulate, simulate_batch
from campaign.sim.compiled import warm
from campaign.sim.failures import NODE_LOSING_SCOPES, category_rate_per_s
from campaign.window import window_inputs

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def export(inputs, path: Path) -> None:
    """The window's inputs for the SimPy model (it never imports campaign)."""
    path.write_text(
        json.dumps(
            {
                "nodes": inputs.nodes,
                "spare_nodes": inputs.spare_nodes,
                "window_s": inputs.window_s,
                "interval_s": inputs.checkpoint_interval_s,
                "write_s": inputs.checkpoint_write_s,
                "planned_per_day": inputs.planned_per_day,
                "planned_duration_s": inputs.planned_duration_s,
                "categories": [
                    {
                        "kind": "failure",
                        "rate_per_s": category_rate_per_s(c, inputs),
                        "node": c.scope in NODE_LOSING_SCOPES,
                        "detect_s": c.detect_s,
                        "restart_s": c.restart_s,
                        "repair_s": c.repair_h * 3600.0,
                    }
                    for c in inputs.failures
                ],
            }
        )
    )


def run_simpy(python: str, params: Path, replicas: int) -> dict:
    out = subprocess.run(
        [python, str(HERE / "simpy_model.py"), str(params), str(replicas)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def run_campaign(inputs, replicas: int) -> dict:
    started = time.perf_counter()
    runs = simulate_batch(inputs, range(replicas))
    wall = time.perf_counter() - started
    return {
        "s_per_replica": wall / replicas,
        "interruptions_unexpected": float(np.mean([r.interruptions.unexpected for r in runs])),
        "interruptions_planned": float(np.mean([r.interruptions.planned for r in runs])),
        "ettr": float(np.mean([r.ettr for r in runs])),
    }


def run_reference(inputs, replicas: int) -> dict:
    started = time.perf_counter()
    for r in range(replicas):
        simulate(inputs, r)
    return {"s_per_replica": (time.perf_counter() - started) / replicas}


def run_cli(config: str, replicas: int) -> dict:
    started = time.perf_counter()
    out = subprocess.run(
        [str(ROOT / ".venv/bin/campaign"), "simulate", config, "--replicas", str(replicas), "--json"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    wall = time.perf_counter() - started
    return {"end_to_end_s": wall, "flow_wall_s": json.loads(out)["wall_s"]}


def memory_peaks(inputs, config: Path) -> None:
    """Memory of one replica at the window's length, twice and four times it: the tracemalloc peak (Python and
    NumPy allocations) in this process, and for the summary path the peak RSS of a fresh process (which also
    counts what tracemalloc cannot see: arrays the compiled kernels allocate through Numba's runtime)."""
    import dataclasses
    import tracemalloc

    from campaign.sim import simulate_summary

    simulate_summary(
        inputs, 100
    )  # first-call allocations (kernel loading, NumPy's caches) are not the replica's
    for factor in (1, 2, 4):
        days = factor * inputs.window_s / 86_400
        x = dataclasses.replace(inputs, window_s=days * 86_400)
        for name, run in (("summary", simulate_summary), ("event-by-event", simulate)):
            if name == "event-by-event" and factor > 2:
                continue  # minutes per run; the trend shows at 2x
            tracemalloc.start()
            run(x, 0)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"{days:g} days, {name}: tracemalloc peak {peak / 1e6:.1f} MB")
        print(
            f"{days:g} days, summary: peak RSS {_peak_rss_mb(days, config):.1f} MB (a fresh process: imports, kernels, "
            "3 replicas)"
        )


RSS_CODE = """
import dataclasses, resource, sys
sys.path.insert(0, {repo!r})
from campaign.config import load_config
from campaign.sim import compiled, simulate_summary
from campaign.window import window_inputs
compiled.warm()
x = window_inputs(load_config({config!r}).config)
x = dataclasses.replace(x, window_s={days!r} * 86400.0)
for r in range(3):
    simulate_summary(x, r)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def _peak_rss_mb(days: float, config: Path) -> float:
    code = RSS_CODE.format(repo=str(ROOT), config=str(config), days=days)
    return float(
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
        .stdout.strip()
        .splitlines()[-1]
    )


def jit_costs() -> dict:
    """Seconds to compile the Numba kernels from nothing (a fresh cache folder) and to load them from the cache,
    each in a fresh process (what a CLI worker pays on its first replica)."""
    code = "from campaign.sim.compiled import warm; print(warm())"
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for name in ("compile_s", "load_s"):  # the second run finds the first one's cache
            out[name] = float(
                subprocess.run(
                    [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
                ).stdout
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/campaigns/llama3-405b.yaml")
    ap.add_argument(
        "--simpy", default=os.environ.get("SIMPY_PY", ""), help="python of the SimPy venv (SIMPY_PY)"
    )
    ap.add_argument("--replicas", default="1,1000")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds for counts under 100")
    ap.add_argument(
        "--skip-reference-above", type=int, default=20, help="event-by-event model up to this count"
    )
    ap.add_argument("--memory", action="store_true", help="only print the memory peaks of one replica")
    args = ap.parse_args()
    inputs = window_inputs(load_config(ROOT / args.config).config)
    if args.memory:
        return memory_peaks(inputs, ROOT / args.config)
    if not args.simpy:
        ap.error(
            "set SIMPY_PY (or --simpy) to the Python of a venv with simpy and numpy: see benchmarks/README.md"
        )
    print(json.dumps({"numba": jit_costs()}), flush=True)
    warm()  # this process loads the compiled kernels once, as SimPy's process imports SimPy before its timer
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        params = Path(tmp) / "inputs.json"
        export(inputs, params)
        for n in (int(v) for v in args.replicas.split(",")):
            rounds = args.rounds if n < 100 else 1
            simpy_runs, camp_runs, ref_runs, cli_runs = [], [], [], []
            for _ in range(rounds):  # alternate, so load from other users hits every contender alike
                simpy_runs.append(run_simpy(args.simpy, params, n))
                camp_runs.append(run_campaign(inputs, n))
                if n <= args.skip_reference_above:
                    ref_runs.append(run_reference(inputs, n))
                if n >= 100:
                    cli_runs.append(run_cli(args.config, n))

            def med(runs, key):
                return statistics.median(r[key] for r in runs)

            row = {
                "replicas": n,
                "rounds": rounds,
                "simpy_s_per_replica": med(simpy_runs, "s_per_replica"),
                "campaign_s_per_replica": med(camp_runs, "s_per_replica"),
                "reference_s_per_replica": med(ref_runs, "s_per_replica") if ref_runs else None,
                "simpy_means": {
                    k: simpy_runs[-1][k]
                    for k in ("interruptions_unexpected", "interruptions_planned", "ettr")
                },
                "campaign_means": {
                    k: camp_runs[-1][k] for k in ("interruptions_unexpected", "interruptions_planned", "ettr")
                },
            }
            if cli_runs:
                row["cli_end_to_end_s"] = med(cli_runs, "end_to_end_s")
                row["cli_flow_wall_s"] = med(cli_runs, "flow_wall_s")
            row["speedup_vs_simpy"] = row["simpy_s_per_replica"] / row["campaign_s_per_replica"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(
        "\n| replicas | SimPy s/replica | campaign s/replica | ratio | event-by-event s/replica | CLI end to end |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        ref = f"{r['reference_s_per_replica']:.4f}" if r["reference_s_per_replica"] else "-"
        cli = (
            f"{r['cli_end_to_end_s']:.1f} s (flow {r['cli_flow_wall_s']:.1f} s)"
            if "cli_end_to_end_s" in r
            else "-"
        )
        print(
            f"| {r['replicas']} | {r['simpy_s_per_replica']:.4f} | {r['campaign_s_per_replica']:.4f} | "
            f"{r['speedup_vs_simpy']:.1f}x | {ref} | {cli} |"
        )
    print(
        "\n| replicas | mean unexpected SimPy / campaign | mean planned SimPy / campaign | mean ETTR SimPy / campaign |"
    )
    print("| ---: | ---: | ---: | ---: |")
    for r in rows:
        s, c = r["simpy_means"], r["campaign_means"]
        print(
            f"| {r['replicas']} | {s['interruptions_unexpected']:.1f} / {c['interruptions_unexpected']:.1f} | "
            f"{s['interruptions_planned']:.1f} / {c['interruptions_planned']:.1f} | {s['ettr']:.4f} / {c['ettr']:.4f} |"
        )
    return None


if __name__ == "__main__":
    sys.exit(main())

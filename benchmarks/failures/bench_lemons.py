"""What lemon nodes and quarantine cost the compiled replica: milliseconds per Llama 3 405B replica summary
(`simulate_summary`, one thread) without lemons, with 2 % lemons at 20x, and with quarantine on too.

    .venv/bin/python benchmarks/failures/bench_lemons.py --replicas 200 --rounds 3

Run it with PYTHONPATH at a checkout from before lemons existed (e.g. a `git archive` of the commit before) to
time the same replicas on the kernel without node identities: there only the first row is measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import campaign
from campaign.config import load_config
from campaign.sim.fast import compiled_inputs, simulate_summary
from campaign.window import window_inputs

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "campaigns" / "llama3-405b.yaml"


def ms_per_replica(inputs, replicas: int, rounds: int) -> list[float]:
    prepared = compiled_inputs(inputs)
    simulate_summary(inputs, 0, prepared)  # compile, or load from the cache
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        for r in range(replicas):
            simulate_summary(inputs, r, prepared)
        out.append((time.perf_counter() - started) / replicas * 1e3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = window_inputs(load_config(CONFIG).config)
    cases = {"no lemons": base}
    if hasattr(base, "lemon_nodes"):
        lemons = round(0.02 * (base.nodes + base.spare_nodes))
        cases["2 % lemons at 20x"] = dataclasses.replace(base, lemon_nodes=lemons, lemon_factor=20.0)
        cases["and quarantine at 2 in 30 days"] = dataclasses.replace(
            cases["2 % lemons at 20x"], quarantine_failures=2, quarantine_window_s=30 * 86_400.0
        )
    print(f"campaign from {Path(campaign.__file__).parent}")
    for name, inputs in cases.items():
        times = ms_per_replica(inputs, args.replicas, args.rounds)
        print(
            f"{name}: median {statistics.median(times):.3f} ms per replica ({', '.join(f'{t:.3f}' for t in times)})"
        )


if __name__ == "__main__":
    main()

"""Speed of the plan model: `make_plan`, `evaluate_layout` and `search_layouts` for Llama 3 405B on 16,384 GPUs.

Prints medians over repeats (alternating the three measurements, so machine load hits each alike) and the search's
top layouts next to the published one. Run: .venv/bin/python benchmarks/plan/bench_search.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from campaign.config import load_config
from campaign.plan import make_plan, search_layouts
from campaign.plan.layout import candidate_layouts

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    cfg = load_config(REPO / "configs/campaigns/llama3-405b.yaml").config
    search_layouts(cfg)  # warm-up
    times: dict[str, list[float]] = {"make_plan": [], "search_layouts": []}
    found = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        make_plan(cfg)
        times["make_plan"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        found = search_layouts(cfg, top=10)
        times["search_layouts"].append(time.perf_counter() - t0)
    n = len(candidate_layouts(cfg))
    search = statistics.median(times["search_layouts"])
    print(
        f"make_plan llama3-405b: {statistics.median(times['make_plan']) * 1e6:.0f} us median of {args.repeats}"
    )
    print(
        f"search_layouts llama3-405b, 16,384 GPUs: {search:.3f} s median of {args.repeats} "
        f"(min {min(times['search_layouts']):.3f}), {n:,} candidates, {search / n * 1e6:.1f} us per candidate"
    )
    published = make_plan(cfg)
    print(
        f"\npublished layout {published.layout}: {published.tokens_per_s:,.0f} tokens/s, MFU {published.mfu:.1%}"
    )
    for p in found[:5]:
        b = p.step_breakdown_s
        print(
            f"  {p.layout} mb={p.micro_batch}: {p.tokens_per_s:,.0f} tokens/s "
            f"({p.tokens_per_s / published.tokens_per_s - 1:+.1%}), {p.memory_gib_per_gpu:.1f} GiB; "
            f"tp comm {b['tp_comm']:.2f} s, bubble {b['pp_bubble']:.2f} s, cp exposed {b['cp_comm_exposed']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

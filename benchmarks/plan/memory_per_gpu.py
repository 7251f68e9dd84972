"""Per-GPU memory of every published production run, line by line, beside what the publication says.

Each run's config (tests/oracles/production_runs.py) as the plan sees it: the breakdown on the most-loaded GPU
(model states, activations, communication tensors, NCCL buffers, CUDA context, allocator), the total in GiB and GB,
and the published per-GPU figure where there is one (BLOOM: 60 GB). Then the demo's window: the band of targets its
schedule gate accepts, bisected (docs/plan-model.md#the-demos-target).

    .venv/bin/python benchmarks/plan/memory_per_gpu.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from campaign.calendar.window_length import judge_window
from campaign.config import load_config
from campaign.plan import make_plan
from campaign.plan.memory import GIB
from tests.oracles.production_runs import DEMO, all_production_runs

PUBLISHED_GB = {"bloom176b": 60.0}


def demo_verdict(target: float) -> str:
    config = load_config(DEMO, [f"plan.target_tokens={target!r}"]).config
    return judge_window(config, make_plan(config)).verdict


def edge(low: float, high: float, below: str) -> float:
    """The target where the verdict changes from `below` (at `low`) to anything else (at `high`), to 0.01 %."""
    while high / low > 1.0001:
        mid = (low * high) ** 0.5
        low, high = (mid, high) if demo_verdict(mid) == below else (low, mid)
    return high


def main() -> None:
    print(f"{'run':34} {'GiB':>6} {'GB':>6} {'published':>9}  breakdown (GiB)")
    for run in all_production_runs():
        plan = make_plan(run.config)
        parts = " ".join(f"{k}={v:.2f}" for k, v in plan.memory_breakdown_gib.items() if v)
        published = PUBLISHED_GB.get(run.family)
        shown = f"{published:.0f} GB" if published else "ran"
        gb = plan.memory_gib_per_gpu * GIB / 1e9
        print(f"{run.name:34} {plan.memory_gib_per_gpu:6.1f} {gb:6.1f} {shown:>9}  {parts}")
    target = load_config(DEMO).config.plan.target_tokens
    low = edge(target * 0.9, target, "too_long")
    high = edge(target, target * 1.1, "ok")
    print(
        f"demo: targets {low:.4g}-{high:.4g} pass its window; {target:.4g} is {target / low - 1:+.1%} from the "
        f"lower end and {high / target - 1:.1%} below the upper"
    )


if __name__ == "__main__":
    main()

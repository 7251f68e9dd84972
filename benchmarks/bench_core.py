"""Speed of the hot paths: one 54-day Llama 3 window, the layout search, and prepare on the demo corpus.

Prints medians over repeats. Run: .venv/bin/python benchmarks/bench_core.py [--repeats N]
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from campaign.config import load_config
from campaign.data import prepare_data, write_demo_corpus
from campaign.plan import make_plan, search_layouts
from campaign.sim import simulate
from campaign.window import window_inputs

REPO = Path(__file__).resolve().parents[1]


def _median_s(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats

    llama = load_config(REPO / "configs/campaigns/llama3-405b.yaml").config
    plan = make_plan(llama)
    inputs = window_inputs(llama, plan)
    simulate(inputs, 0)  # warm-up
    t, result = _median_s(lambda: simulate(inputs, 1), repeats)
    print(
        f"simulate llama3-405b 54-day window: {t:.3f} s median of {repeats} "
        f"({len(result.events):,} events, {result.summary.interruptions.unexpected} failures, "
        f"interval {plan.checkpoint.interval_s:.0f} s)"
    )

    t, found = _median_s(lambda: search_layouts(llama, top=10), repeats)
    print(
        f"search_layouts llama3-405b (16,384 GPUs): {t:.3f} s median of {repeats} (best "
        f"{found[0].layout} at {found[0].tokens_per_s:,.0f} tokens/s)"
    )

    with tempfile.TemporaryDirectory() as tmp:
        write_demo_corpus(Path(tmp), seed=7)
        demo = load_config(
            REPO / "configs/campaigns/demo.yaml",
            [f"data.sources.0.path={tmp}/web/*.jsonl", f"data.sources.1.path={tmp}/docs/*.parquet"],
        ).config
        t, manifest = _median_s(lambda: prepare_data(demo.data, Path(tmp) / "out"), repeats)
        chars = manifest["totals"]["chars_in"]
        print(
            f"prepare_data demo corpus: {t:.3f} s median of {repeats} ({chars / t / 1e6:.2f} M chars/s, "
            f"{manifest['tokenizer']})"
        )


if __name__ == "__main__":
    main()

"""When lean worker processes pay for their start: `campaign prepare` of the same input with the work in two worker
processes and in the command's own process, alternating, at each input size.

    .venv/bin/python benchmarks/prepare/bench_workers.py [--runs 3] [--demo] [CORPUS ...]

CORPUS is a folder of web-like JSONL (`make_corpus.py /tmp/corpus-8m --mb 8 --file-mb 2`); `--demo` adds the
shipped demo (its corpus generated into the workspace). Each run starts from an empty workspace through the CLI
(its private Prefect API included). The arms differ only in CAMPAIGN_PREPARE_WORKER_MIN_MB: 0 starts
`runtime.max_workers` (2) workers whatever the input, a huge value starts none. Wall time, the CPU-seconds of the
whole process tree and its peak PSS come from bench_prepare's sampler; medians per arm are printed, with the
ratio in-process / workers of the medians.
"""

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from benchmarks.prepare.bench_prepare import _measure, campaign_cmd, demo_prepare_cmd

ARMS = {"workers": "0", "in-process": "1000000"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpora", type=Path, nargs="*")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--demo", action="store_true", help="also the shipped demo (0.7 MB, generated at run time)"
    )
    args = ap.parse_args()
    cases: list[tuple[str, Path | None]] = [("demo", None)] if args.demo else []
    cases += [(str(c), c.resolve()) for c in args.corpora]
    base = {**os.environ, "PREFECT_LOGGING_LEVEL": "WARNING", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    print("| input | MB | arm | wall s (median) | CPU-s (median) | peak PSS MB (median) | runs (wall, CPU) |")
    print("| --- | ---: | --- | ---: | ---: | ---: | --- |")
    for name, corpus in cases:
        results: dict[str, list[dict]] = {arm: [] for arm in ARMS}
        mb = 0.7 if corpus is None else sum(p.stat().st_size for p in corpus.glob("*.jsonl")) / 1e6
        for _ in range(args.runs):
            for arm, value in ARMS.items():
                scratch = Path(tempfile.mkdtemp(prefix="bench-workers-"))
                ws = scratch / "w"
                cmd = (
                    demo_prepare_cmd(ws, ["runtime.max_workers=2"])
                    if corpus is None
                    else campaign_cmd(corpus, ws, 2, "cl100k_base", "threads", shards=True)
                )
                results[arm].append(_measure(cmd, {**base, "CAMPAIGN_PREPARE_WORKER_MIN_MB": value}))
                shutil.rmtree(scratch, ignore_errors=True)
        medians = {}
        for arm, runs in results.items():
            wall = statistics.median(r["wall_s"] for r in runs)
            cpu = statistics.median(r["cpu_s"] for r in runs)
            pss = statistics.median(r["peak_pss_mb"] for r in runs)
            medians[arm] = (wall, cpu)
            each = ", ".join(f"({r['wall_s']:.1f}, {r['cpu_s']:.1f})" for r in runs)
            print(f"| {name} | {mb:.1f} | {arm} | {wall:.2f} | {cpu:.2f} | {pss:.0f} | {each} |", flush=True)
        (w_wall, w_cpu), (p_wall, p_cpu) = medians["workers"], medians["in-process"]
        print(
            f"| {name} | {mb:.1f} | in-process / workers | {p_wall / w_wall:.2f} | {p_cpu / w_cpu:.2f} | | |"
        )


if __name__ == "__main__":
    main()

"""Wall time and CPU time of the demo's rehearsal (both runs, the kill, the restart and every compile).

Takes the clean data of a prepared workspace (`make run`, or `campaign prepare configs/campaigns/demo.yaml`), so it
measures exactly what validate runs. The target is under 60 s on 2 cores; on a shared machine read the trainer
processes' CPU seconds too (what the rehearsal costs when nothing else runs is at most about that).
Run: .venv/bin/python benchmarks/bench_rehearsal.py [--workspace workspace/demo] [--repeats 3] [--set k=v]...
"""

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from campaign.config import load_config
from campaign.data.tokenizer import load_tokenizer
from campaign.rehearsal.gate import run_rehearsal
from campaign.rehearsal.sample import Document, documents_from_tables, select_documents

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", default=str(REPO / "workspace" / "demo"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument(
        "--tokenizer", help="tokenizer spec instead of the config's data.tokenizer (cl100k_base)"
    )
    args = parser.parse_args()
    config = load_config(REPO / "configs/campaigns/demo.yaml", args.overrides).config
    tables = [pq.read_table(p) for p in sorted((Path(args.workspace) / "data" / "clean").glob("*.parquet"))]
    tokenizer = load_tokenizer(args.tokenizer or config.data.tokenizer)
    docs = documents_from_tables(tables, config.rehearsal.sample_tokens)
    if args.tokenizer:  # select by this tokenizer's counts, as prepare would have counted them with it
        everything = documents_from_tables(tables, 2**62)
        counts = tokenizer.count_many([d.text for d in everything])
        docs = select_documents(
            [Document(d.doc_id, d.text, d.text_sha256, n) for d, n in zip(everything, counts, strict=True)],
            config.rehearsal.sample_tokens,
        )
    walls, cpus = [], []
    for repeat in range(args.repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            result, sample = run_rehearsal(
                docs, tokenizer, config.rehearsal, config.model, config.seed, Path(tmp) / "rehearsal"
            )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        walls.append(wall)
        cpus.append(cpu)
        print(
            f"repeat {repeat + 1}: {wall:.1f} s wall, {cpu:.1f} s trainer CPU, load {os.getloadavg()[0]:.1f}; "
            f"passed={result.passed}; {result.summary()}; "
            + ", ".join(f"{k} {v:,.1f}" for k, v in result.timings.items())
        )
    print(
        f"demo rehearsal ({tokenizer.name}, vocab {sample.vocab}, {config.rehearsal.steps} steps): median "
        f"{statistics.median(walls):.1f} s wall, {statistics.median(cpus):.1f} s trainer CPU over {args.repeats} "
        f"repeats on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()

"""Memory and time of the global dedup pass against the number of kept documents (synthetic `sig` parts).

    .venv/bin/python benchmarks/prepare/bench_dedup_memory.py --rows 1000000,4000000 [--shards 64]

Writes `rows` synthetic signature rows over `shards` shard parts (5 % exact duplicates, 5 % sharing one band with
an earlier row), then runs `dedup_pass` in a fresh process and prints its peak RSS above the process's baseline
(ru_maxrss, after the imports and before the pass) and its CPU seconds. The pass holds no text, so this is what
it adds to a worker's memory at any corpus size: bytes per kept document x kept documents.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from campaign.config import CleaningConfig, DataConfig, SourceConfig
from campaign.data.pipeline import dedup_pass
from campaign.data.shards import ShardSummary
work, shards = Path(sys.argv[1]), int(sys.argv[2])
data = DataConfig(sources=(SourceConfig(name="web", path="/nonexistent/*.jsonl", format="jsonl", weight=1),),
                  cleaning=CleaningConfig())
summaries = [ShardSummary(key=f"s{i:04d}", index=i, source="web", path="", name="", part=i) for i in range(shards)]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu = time.process_time()
stats = dedup_pass(summaries, data, work)
print(json.dumps({"extra_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024,
                  "cpu_s": time.process_time() - cpu, "exact": stats.exact_removed, "near": stats.near_removed}))
"""


def write_parts(work: Path, rows: int, shards: int, bands: int) -> None:
    import numpy as np
    import pyarrow as pa

    from campaign.data.shards import SIG, PartWriter, band_column, sig_schema

    rng = np.random.default_rng(1)
    per = -(-rows // shards)
    done = 0
    for i in range(shards):
        n = min(per, rows - done)
        keys = rng.integers(0, 2**63, size=(n, 2), dtype=np.uint64)
        band = rng.integers(0, 2**63, size=(n, bands), dtype=np.uint64)
        if done:  # copies of rows of this shard: 5 % exact duplicates, 5 % sharing band 0 with an earlier row
            dup, near = rng.random(n) < 0.05, rng.random(n) < 0.05
            src = rng.integers(0, n, n)
            keys[dup] = keys[src[dup]]
            band[dup] = band[src[dup]]
            band[near, 0] = band[src[near], 0]
        folder = work / "shards" / f"s{i:04d}"
        folder.mkdir(parents=True)
        writer = PartWriter(folder / SIG, sig_schema(bands))
        writer.write_table(
            pa.table(
                {
                    "doc_id": [f"doc-{done + j:09d}" for j in range(n)],
                    "key_hi": keys[:, 0],
                    "key_lo": keys[:, 1],
                    "has_sig": np.ones(n, bool),
                    **{band_column(b): band[:, b] for b in range(bands)},
                },
                schema=sig_schema(bands),
            )
        )
        writer.close()
        done += n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1000000,4000000")
    ap.add_argument("--shards", type=int, default=64)
    args = ap.parse_args()
    print("| kept documents | extra memory of the pass | bytes per document | CPU s |")
    print("| ---: | ---: | ---: | ---: |")
    for rows in (int(r) for r in args.rows.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            write_parts(Path(tmp), rows, args.shards, bands=14)
            child = subprocess.run(
                [sys.executable, "-c", CHILD, tmp, str(args.shards)], capture_output=True, text=True, cwd=REPO
            )
            if child.returncode:
                sys.exit(f"the pass failed on {rows:,} rows:\n{child.stderr}")
            out = json.loads(child.stdout)
        print(
            f"| {rows:,} | {out['extra_mb']:.0f} MB | {out['extra_mb'] * 2**20 / rows:.0f} | {out['cpu_s']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

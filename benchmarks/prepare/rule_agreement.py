"""Keep/drop agreement with datatrove 0.10.1, each rule group alone, on the same normalised documents.

    DATATROVE_PY=... .venv/bin/python benchmarks/prepare/rule_agreement.py /tmp/corpus-32m [--max-docs 9000]

DATATROVE_PY is the Python of a venv with datatrove 0.10.1 beside the project (benchmarks/README.md).

Campaign normalises every document (campaign.data.normalise) and both tools then see that same text, so a
disagreement comes from how a rule is defined or counted, not from the input. For each group (Gopher
quality, Gopher repetition, C4, FineWeb) campaign runs with only that group enabled and datatrove runs only
that filter (datatrove_rules.py in its own venv). Prints a markdown table and the most common disagreement
pairs (campaign reason vs datatrove reason) with an example document id for each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from campaign.config import C4Config, CleaningConfig, FineWebConfig, GopherRepetitionConfig
from campaign.data.filters import filter_batch
from campaign.data.normalise import normalise_text

HERE = Path(__file__).resolve().parent
DATATROVE_PY = os.environ.get("DATATROVE_PY", "")  # the Python of datatrove's own venv

OFF = {
    "gopher_quality": False,
    "gopher_repetition": GopherRepetitionConfig(enabled=False),
    "c4": C4Config(enabled=False),
    "fineweb": FineWebConfig(enabled=False),
}
ON = {
    "gopher_quality": True,
    "gopher_repetition": GopherRepetitionConfig(),
    "c4": C4Config(enabled=True),
    "fineweb": FineWebConfig(enabled=True),
}


def alone(group: str) -> CleaningConfig:
    return CleaningConfig(**{**OFF, group: ON[group]}, max_doc_bytes=2**31 - 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--max-docs", type=int, default=9000)
    args = ap.parse_args()
    if not DATATROVE_PY:
        ap.error("set DATATROVE_PY to the Python of datatrove's venv (benchmarks/README.md)")
    records = []
    for path in sorted(args.corpus.glob("*.jsonl")):
        with open(path) as handle:
            for line in handle:
                rec = json.loads(line)
                records.append({"id": rec["id"], "text": normalise_text(rec["text"])})
                if len(records) >= args.max_docs:
                    break
        if len(records) >= args.max_docs:
            break
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs.jsonl"
        docs.write_text("".join(json.dumps(r) + "\n" for r in records))
        subprocess.run(
            [DATATROVE_PY, str(HERE / "datatrove_rules.py"), str(docs), str(Path(tmp) / "dt.json")],
            check=True,
        )
        theirs = json.loads((Path(tmp) / "dt.json").read_text())
    texts = [r["text"] for r in records]
    ids = [r["id"] for r in records]
    print(f"{len(records)} documents\n")
    print(
        "| rule group alone | campaign drops | datatrove drops | both drop | only campaign | only datatrove "
        "| agreement |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    details = {}
    for group in ("gopher_quality", "gopher_repetition", "c4", "fineweb"):
        cfg = alone(group)
        ours = {}
        for i in range(0, len(texts), 2048):
            for doc_id, res in zip(ids[i : i + 2048], filter_batch(texts[i : i + 2048], cfg), strict=True):
                if res.rejection is not None:
                    ours[doc_id] = res.rejection.reason
        dt = theirs[group]
        a, b = set(ours), set(dt)
        agree = len(ids) - len(a ^ b)
        print(
            f"| {group} | {len(a)} | {len(b)} | {len(a & b)} | {len(a - b)} | {len(b - a)} | "
            f"{agree / len(ids):.2%} |"
        )
        pairs: Counter[tuple[str, str]] = Counter()
        example: dict[tuple[str, str], str] = {}
        for d in a ^ b:
            key = (ours.get(d, "kept"), dt.get(d, "kept"))
            pairs[key] += 1
            example.setdefault(key, d)
        details[group] = [(k, n, example[k]) for k, n in pairs.most_common(8)]
    print()
    for group, rows in details.items():
        print(f"{group}: disagreements (campaign reason / datatrove reason: documents, example id)")
        for (mine, dts), n, ex in rows:
            print(f"  {mine} / {dts}: {n} ({ex})")


if __name__ == "__main__":
    main()

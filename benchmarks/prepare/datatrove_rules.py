"""Each datatrove 0.10.1 rule group alone on the same (already normalised) documents: drop decisions per document.

Run with the datatrove venv (outside the repository), never with campaign's; `rule_agreement.py` calls it:
    $DATATROVE_PY benchmarks/prepare/datatrove_rules.py DOCS.jsonl OUT.json

Thresholds are campaign's where datatrove's defaults differ (FineWeb char_duplicates_ratio 0.1; C4 without the
terminal-punctuation line rule), as in datatrove_pipeline.py. Output: {group: {doc_id: reason}} for dropped docs.
"""

import json
import sys

from datatrove.data import Document
from datatrove.pipeline.filters import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)

GROUPS = {
    "gopher_quality": lambda: GopherQualityFilter(),
    "gopher_repetition": lambda: GopherRepetitionFilter(),
    "c4": lambda: C4QualityFilter(filter_no_terminal_punct=False),
    "fineweb": lambda: FineWebQualityFilter(char_duplicates_ratio=0.1),
}


def main() -> None:
    docs_path, out_path = sys.argv[1], sys.argv[2]
    with open(docs_path) as handle:
        records = [json.loads(line) for line in handle]
    dropped: dict[str, dict[str, str]] = {}
    for group, make in GROUPS.items():
        rule = make()
        mine = dropped[group] = {}
        for rec in records:
            doc = Document(text=rec["text"], id=rec["id"])
            verdict = rule.filter(doc)
            keep, reason = (verdict, "") if isinstance(verdict, bool) else verdict
            if not keep:
                mine[rec["id"]] = reason or group
    with open(out_path, "w") as handle:
        json.dump(dropped, handle)


if __name__ == "__main__":
    main()

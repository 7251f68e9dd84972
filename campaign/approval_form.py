"""The approval request as the Prefect UI's resume form shows it: the form is a narrow modal whose Markdown tables do
not wrap (a long window or gate figure is cut off on the right), so each table row becomes a list item that wraps.

A digest (64 hex digits in one code span) does not wrap either: the form shows it in groups of 16, as key
fingerprints are shown. The artifact keeps the tables and whole digests (`ApprovalRequest.markdown`); this only
changes the layout, never a figure.
"""

from __future__ import annotations

import re

_SPLIT = re.compile(r"(?<!\\)\|")  # a cell boundary; `\|` is a pipe inside a cell
_DIGEST = re.compile(r"`([0-9a-f]{33,})`")  # a hex digest in a code span, longer than the modal is wide
_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$")  # | --- | --- |


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in _SPLIT.split(line.strip().strip("|"))]


def _is_row(line: str) -> bool:
    return line.lstrip().startswith("|")


def tables_as_lists(markdown: str) -> str:
    """Every Markdown table of `markdown` as a bullet list, one item per body row: `- **first**: second` (further
    columns joined by a dash: the first column names the row); every other line unchanged."""
    lines = markdown.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not (_is_row(lines[i]) and i + 1 < len(lines) and _RULE.match(lines[i + 1].strip())):
            out.append(lines[i])
            i += 1
            continue
        i += 2
        while i < len(lines) and _is_row(lines[i]):
            out.append(_item(_cells(lines[i])))
            i += 1
    return "\n".join(out)


def wrappable(markdown: str) -> str:
    """`markdown` laid out for a narrow column: its tables as lists (`tables_as_lists`) and each long hex digest in
    groups of 16 digits, so that nothing is cut off on the right."""
    return _DIGEST.sub(
        lambda m: "`" + " ".join(re.findall(".{1,16}", m.group(1))) + "`", tables_as_lists(markdown)
    )


def _item(cells: list[str]) -> str:
    first, rest = cells[0], [c for c in cells[1:] if c]
    return f"- **{first}**: " + " \u2014 ".join(rest) if rest else f"- **{first}**"

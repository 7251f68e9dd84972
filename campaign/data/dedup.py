"""Exact deduplication on the sha256 of the normalised text, first occurrence kept.

One `ExactDeduplicator` is shared by all sources of a prepare run, fed in a fixed order (sources in config
order, files sorted, records in file order), so which copy survives does not depend on scheduling. Only
documents that passed the quality rules are fed, so a rejection always names a kept document.
"""

from __future__ import annotations

import hashlib

from campaign.data.filters import Rejection

EXACT_DUPLICATE = "exact_duplicate"


def text_sha256(text: str) -> str:
    """Hex sha256 of the UTF-8 bytes of a (normalised) text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ExactDeduplicator:
    """Remembers the first document id seen for each text hash."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._first)

    def check(self, sha256: str, doc_id: str) -> Rejection | None:
        """None if this hash is new (and remember `doc_id` as its kept copy), else an exact_duplicate rejection."""
        kept = self._first.get(sha256)
        if kept is None:
            self._first[sha256] = doc_id
            return None
        return Rejection(EXACT_DUPLICATE, f"same text as kept doc {kept}")

"""One gate's verdict: its name, whether it passed, a line a person reads, and the figures it judged.

At the bottom of the package (it imports nothing of campaign), so the errors that carry failed gates can name it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class GateResult:
    gate: str
    passed: bool
    summary: str
    details: dict[str, Any] = field(default_factory=dict)  # the catalog's JSON details column, with `summary`

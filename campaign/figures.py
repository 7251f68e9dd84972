"""How a figure is written for a person, the same in the report, the artifacts and the terminal: thousands
separators, percentages, token counts in billions; n/a for a missing or non-finite value."""

from __future__ import annotations

import math
from typing import Any


def num(value: Any, digits: int = 0) -> str:
    """A number with thousands separators, or n/a."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def tokens_b(value: Any) -> str:
    """A token count in billions, as the report shows it everywhere ("550.0 B"), or n/a."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{num(value / 1e9, 1)} B"


def pct(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value * 100:.{digits}f}%"

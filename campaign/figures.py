"""How a figure is written for a person, the same in the report, the artifacts and the terminal: thousands
separators, percentages, token counts in billions (or the unit that shows a small count); n/a for a missing or non-finite value."""

from __future__ import annotations

import math
from typing import Any


def num(value: Any, digits: int = 0) -> str:
    """A number with thousands separators (two significant digits where it would round to zero), or n/a."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if value and abs(value) < 0.5 * 10.0**-digits:
        # a figure that is not zero is never shown as one (a small real run's hours or dollars): two significant
        # digits instead
        return f"{value:.2g}"
    return f"{value:,.{digits}f}"


def tokens_b(value: Any) -> str:
    """A token count in billions, as the report shows it everywhere ("550.0 B"), or n/a."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{num(value / 1e9, 1)} B"


_TOKEN_UNITS = ((1e9, "B"), (1e6, "M"), (1e3, "K"))


def tokens(value: Any) -> str:
    """A token count in the largest unit that keeps it at least one ("550.0 B", "81.9 K", "512 tokens"), so a
    small run's figure is shown rather than "0.0 B"; or n/a."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    for scale, unit in _TOKEN_UNITS:
        if abs(value) >= scale:
            return f"{num(value / scale, 1)} {unit}"
    return f"{num(value)} tokens"


def pct(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value * 100:.{digits}f}%"


_MARKDOWN_SPECIALS = "\\`*_[]<>|#"


def md_cell(text: Any) -> str:
    """Text as it may stand in a Markdown table cell: a `|` would end the cell (and break the table), a newline
    the row, and `*`, `_`, backticks, brackets or `<` would turn a name into formatting, a link or HTML; each is
    escaped with a backslash (`&`, `<`, `>` also as HTML entities), so the cell reads as the name was written."""
    out = str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    out = "".join("\\" + ch if ch in _MARKDOWN_SPECIALS else ch for ch in out)
    return out.replace("&", "&amp;").replace("\\<", "&lt;").replace("\\>", "&gt;")


def when_in_window(days: Any, window_days: Any) -> str:
    """When something happened in a window, at the window's own scale: "on day 1.42 of 2.00" for a window of a day
    or more, "after 3.50 h of 10.00 h" for one of hours, "after 5.4 min of 5.5 min" for a short real run."""
    if days is None or window_days is None:
        return "n/a"
    if window_days >= 1.0:
        return f"on day {num(days, 2)} of {num(window_days, 2)}"
    if window_days * 24.0 >= 1.0:
        return f"after {num(days * 24.0, 2)} h of {num(window_days * 24.0, 2)} h"
    return f"after {num(days * 1440.0, 1)} min of {num(window_days * 1440.0, 1)} min"


def token_unit(value: Any) -> tuple[float, str]:
    """The scale and unit a token axis of this size reads in (1e9 "B", 1e6 "M", 1e3 "K", or 1 "tokens"), so a small
    run's axis is not "0.00000 B"."""
    for scale, unit in _TOKEN_UNITS:
        if value is not None and abs(value) >= scale:
            return scale, unit
    return 1.0, "tokens"

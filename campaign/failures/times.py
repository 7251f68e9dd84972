"""Times in an incident log: ISO 8601 (no offset: UTC), epoch seconds (or milliseconds) since 1970, or a
day/month/year date whose order the column itself settles (a day above 12 says which is the day); a column whose
every date reads both ways, differently, is refused with both readings shown. A time before 1990 or more than a
year after today is refused as a typo in the year, not fitted."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

EPOCH = re.compile(r"^\d{9,13}(\.\d{1,9})?$")
SLASHED = re.compile(r"^\d{1,2}[/.\-]\d{1,2}[/.\-]\d{4}\b")
EARLIEST = pd.Timestamp("1990-01-01T00:00:00Z")
MS_ABOVE = 1e11  # epoch values this large are milliseconds (1e11 s is the year 5138)


@dataclass(frozen=True)
class ParsedTimes:
    values: pd.Series  # UTC timestamps (microseconds); NaT where a problem names the row
    problems: list[tuple[int, str]]  # (row, what and the fix)
    notes: list[str]  # what was read how, in words


def _utc(out: pd.Series) -> pd.Series:
    out = out.dt.tz_localize("UTC") if out.dt.tz is None else out.dt.tz_convert("UTC")
    return out.dt.as_unit("us")


def _absurd(times: pd.Series, column: str) -> list[tuple[int, str]]:
    latest = pd.Timestamp.now(tz="UTC") + pd.Timedelta(days=366)
    bad = times.notna() & ((times < EARLIEST) | (times > latest))
    return [
        (
            int(row),
            f"{column} {times.iloc[row].isoformat()} is in the year {times.iloc[row].year}: not a time a job ran "
            "(a typo in the year, or a wrong epoch unit?); correct it",
        )
        for row in np.flatnonzero(bad.to_numpy())
    ]


def day_month_order(columns: list[pd.Series]) -> str | None:
    """The order the d/m/y dates of several columns (both files of one export) settle together: "us" when some
    first field is above 12 nowhere but some second field is, "day" for the reverse, else None."""
    firsts, seconds = [], []
    for values in columns:
        if pd.api.types.is_datetime64_any_dtype(values):
            continue
        text = pd.Series([str(v).strip() for v in values], dtype=object)
        fields = text[text.map(lambda v: bool(SLASHED.match(v)))].str.extract(
            r"^(\d{1,2})[/.\-](\d{1,2})[/.\-]"
        )
        firsts += fields[0].astype(int).tolist()
        seconds += fields[1].astype(int).tolist()
    day_first = any(f > 12 for f in firsts)
    month_first = any(f > 12 for f in seconds)
    return "us" if month_first and not day_first else "day" if day_first and not month_first else None


def parse_times(values: pd.Series, column: str, order: str | None = None) -> ParsedTimes:
    """Parse one column (see the module docstring); `order` is what the other date columns of the same log
    settle ("us" or "day", `day_month_order`), used where this column's own dates read both ways."""
    n = len(values)
    problems: list[tuple[int, str]] = []
    notes: list[str] = []
    if pd.api.types.is_datetime64_any_dtype(values):
        out = _utc(pd.to_datetime(values))
        for row in np.flatnonzero(out.isna().to_numpy()):
            problems.append((int(row), f"{column} is empty (null); give every row its time"))
        return ParsedTimes(out, problems + _absurd(out, column), notes)
    text = pd.Series(
        ["" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v).strip() for v in values],
        index=values.index,
        dtype=object,
    )
    empty = (text == "").to_numpy()
    filled = text[~empty]
    if len(filled) and filled.map(lambda v: bool(EPOCH.match(v))).all():
        numbers = pd.to_numeric(text.where(~empty, None), errors="coerce")
        unit: Literal["ms", "s"] = "ms" if float(numbers.median()) >= MS_ABOVE else "s"
        out = _utc(pd.Series(pd.to_datetime(numbers, unit=unit, utc=True, errors="coerce")))
        notes.append(
            f"read {column} as epoch {'milliseconds' if unit == 'ms' else 'seconds'} since 1970-01-01 UTC"
        )
    else:
        out = _utc(pd.to_datetime(text.where(~empty, None), format="ISO8601", utc=True, errors="coerce"))
        slashed = (out.isna() & text.map(lambda v: bool(SLASHED.match(v)))).to_numpy()
        if slashed.any():
            out, problem, note = _day_month(text, slashed, out, column, order)
            problems += problem
            notes += note
    for row in np.flatnonzero(out.isna().to_numpy()):
        if any(r == row for r, _ in problems):
            continue
        problems.append(
            (
                int(row),
                f"{column} is empty; give every row its time"
                if empty[row]
                else f"{column} is not an ISO 8601 time ({text.iloc[row]!r}, nor epoch seconds); write e.g. "
                "2026-03-01T09:30:00Z",
            )
        )
    del n
    return ParsedTimes(out, sorted(problems + _absurd(out, column)), notes)


def _day_month(
    text: pd.Series, slashed: np.ndarray, out: pd.Series, column: str, order: str | None
) -> tuple[pd.Series, list[tuple[int, str]], list[str]]:
    """Dates written d/m/y or m/d/y: the reading every value allows, or a refusal showing both."""
    part = text[slashed].str.replace(r"[.\-]", "/", regex=True)
    us = pd.to_datetime(part, format="mixed", dayfirst=False, utc=True, errors="coerce")
    eu = pd.to_datetime(part, format="mixed", dayfirst=True, utc=True, errors="coerce")
    # dateutil falls back to the other order for a day above 12: a value is valid in a reading only if its first
    # (or second) field is a month.
    first = part.str.extract(r"^(\d{1,2})/(\d{1,2})/")[0].astype(int)
    second = part.str.extract(r"^(\d{1,2})/(\d{1,2})/")[1].astype(int)
    us_ok, eu_ok = (first <= 12) & us.notna(), (second <= 12) & eu.notna()
    problems: list[tuple[int, str]] = []
    rows = np.flatnonzero(slashed)
    if us_ok.all() and not eu_ok.all():
        chosen, name = us, "month first (US)"
    elif eu_ok.all() and not us_ok.all():
        chosen, name = eu, "day first"
    elif us_ok.all() and eu_ok.all() and order is not None:
        chosen = us if order == "us" else eu
        name = f"{'month first (US)' if order == 'us' else 'day first'}, as the log's other dates show"
    elif us_ok.all() and eu_ok.all():
        differ = (us != eu).to_numpy()
        if differ.any():
            i = int(np.flatnonzero(differ)[0])
            problems.append(
                (
                    int(rows[i]),
                    f"{column} {part.iloc[i]!r} is ambiguous, as is every d/m/y date in the log: month first (US) it "
                    f"is {us.iloc[i]:%Y-%m-%d}, day first {eu.iloc[i]:%Y-%m-%d}; write ISO 8601 (YYYY-MM-DD)",
                )
            )
            return out, problems, []
        chosen, name = us, "either order (day and month are equal)"
    else:
        for i in map(int, np.flatnonzero((~us_ok & ~eu_ok).to_numpy())):
            problems.append((int(rows[i]), f"{column} {part.iloc[i]!r} is not a date in either order"))
        chosen, name = (us, "month first (US)") if us_ok.sum() >= eu_ok.sum() else (eu, "day first")
        conflicting = (~(us_ok if chosen is us else eu_ok) & (us_ok | eu_ok)).to_numpy()
        for i in map(int, np.flatnonzero(conflicting)):
            problems.append(
                (
                    int(rows[i]),
                    f"{column} {part.iloc[i]!r} reads only {'day' if chosen is us else 'month'} first, where the column's "
                    f"other dates read {name}; write ISO 8601 (YYYY-MM-DD)",
                )
            )
        if problems:
            return out, problems, []
    out = out.copy()
    out.iloc[rows] = chosen.dt.as_unit("us").to_numpy()
    return out, problems, [f"read the {column} dates d/m/y as {name}, which every one of them allows"]

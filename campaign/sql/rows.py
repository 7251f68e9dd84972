"""Rows of a DuckDB query read by column name: a record is built from its columns' names (`Booking(**row)`), never
unpacked by position, so a reordered SELECT cannot shift a value into the wrong field."""

from __future__ import annotations

from typing import Any

import duckdb

Row = dict[str, Any]


def rows(con: duckdb.DuckDBPyConnection, query: str, params: Any = None) -> list[Row]:
    """Every row of `query` as a dict keyed by column name (the result fully consumed)."""
    cursor = con.execute(query, params or [])
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, values, strict=True)) for values in cursor.fetchall()]


def first_row(con: duckdb.DuckDBPyConnection, query: str, params: Any = None) -> Row | None:
    """The first row of `query` by column name, or None when it has none."""
    found = rows(con, query, params)
    return found[0] if found else None


def one_row(con: duckdb.DuckDBPyConnection, query: str, params: Any = None) -> Row:
    """The first row of a query that always returns one (an aggregate, a table of one row)."""
    row = first_row(con, query, params)
    assert row is not None, f"expected a row from: {query}"
    return row


def scalar(con: duckdb.DuckDBPyConnection, query: str, params: Any = None) -> Any:
    """The single value of a query that always returns one row of one column (`SELECT count(*) ...`)."""
    (value,) = one_row(con, query, params).values()
    return value

"""`campaign sql`: a query over a workspace catalog, opened read-only, with the documented views of views.sql.

The connection is read-only, and external access (files, URLs, other databases) is switched off and locked
before the query runs, so a query can read the catalog and nothing else, and write nothing anywhere.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from pathlib import Path
from typing import Any

import duckdb

from campaign.analysis.analysis import query as view_sql
from campaign.analysis.workspace import open_read_only
from campaign.errors import ConfigError
from campaign.store import Workspace, existing_workspace

MAX_ROWS = 10_000
DEFAULT_TIMEOUT_S = 60.0  # a query of the catalog takes well under a second; a runaway one is stopped


def run_query(
    workspace: str | Path | None, text: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows (at most MAX_ROWS) of one query; bad SQL is bad input (exit 2). A query still running
    after `timeout_s` seconds (0: no limit) is interrupted and reported (exit 2): while it reads the catalog,
    no stage can write it."""
    if not (timeout_s >= 0 and math.isfinite(timeout_s)):
        raise ConfigError(
            f"--timeout {timeout_s} is not a number of seconds",
            where="--timeout",
            fix="pass e.g. 60, or 0 for no limit",
        )
    if not text.strip():
        raise ConfigError(
            "empty query", where="campaign sql", fix='pass a query, e.g. "select * from gate_figures"'
        )
    ws = _workspace(workspace)
    con = open_read_only(ws)
    # everything on one cursor of its own: the query runs on it in another thread, and only a cursor can be
    # interrupted from this one while it executes (the connection refuses a second call while busy)
    cur = con.cursor()
    try:
        for statement in view_sql("views").split(";\n"):
            if statement.strip() and "CREATE" in statement:
                # an older catalog lacks a table a view needs: that view is simply absent
                with contextlib.suppress(duckdb.Error):
                    cur.execute(statement)
        cur.execute("SET enable_external_access = false")
        cur.execute("SET lock_configuration = true")
        try:
            columns, rows = _run_interruptibly(cur, text, timeout_s)
        except _TimedOut:
            raise ConfigError(
                f"the query was still running after {timeout_s:g} s and was stopped (while it runs, no stage can "
                "write the catalog)",
                where="campaign sql",
                fix="narrow it (a WHERE, a LIMIT, fewer joins), or give it longer with --timeout SECONDS "
                "(--timeout 0: no limit)",
            ) from None
        except duckdb.Error as exc:
            raise ConfigError(
                f"the query failed: {str(exc).splitlines()[0][:300]}",
                where="campaign sql",
                fix=query_fix(exc),
            ) from None
    finally:
        cur.close()
        con.close()
    return columns, rows


class _TimedOut(Exception):
    """The query outlived its --timeout and was interrupted."""


def _run_interruptibly(
    con: duckdb.DuckDBPyConnection, text: str, timeout_s: float
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run the query in a thread of its own while this (main) thread waits: Python handles Ctrl-C only between
    bytecodes, and DuckDB's execute is one long C call, so a query on the main thread would hear Ctrl-C only when
    it ended. On Ctrl-C or at the timeout the query is interrupted, and its thread has ended before anything else."""
    outcome: list[tuple[list[str], list[tuple[Any, ...]]]] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            cursor = con.execute(text)
            outcome.append(([d[0] for d in cursor.description or []], cursor.fetchmany(MAX_ROWS)))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            failure.append(exc)
        finally:
            done.set()

    # waits on an Event, never on Thread.join: a Ctrl-C landing inside join() can mark a running thread as ended
    threading.Thread(target=work, name="campaign-sql", daemon=True).start()
    deadline = time.monotonic() + timeout_s if timeout_s > 0 else math.inf
    try:
        while not done.is_set() and time.monotonic() < deadline:
            done.wait(min(0.1, max(deadline - time.monotonic(), 0.0)))
    except KeyboardInterrupt:
        con.interrupt()
        done.wait()
        raise
    if not done.is_set():
        con.interrupt()
        done.wait()
        raise _TimedOut
    if failure:
        raise failure[0]
    return outcome[0]


TABLES_HINT = 'see docs/report-and-sql.md for the tables and views (or run: campaign sql "show tables")'


def query_fix(exc: duckdb.Error) -> str:
    """What to do about a failed query, by what DuckDB said went wrong: a syntax error is fixed in the SQL, an
    unknown name against the tables and views, and only a write or a file access is refused by design."""
    if isinstance(exc, duckdb.ParserException):
        return "fix the SQL syntax at the place DuckDB names; " + TABLES_HINT
    if isinstance(exc, duckdb.CatalogException | duckdb.BinderException):
        return "use a table, view or column the catalog has; " + TABLES_HINT
    if isinstance(exc, duckdb.PermissionException | duckdb.InvalidInputException):
        return (
            "the catalog is read-only and files and extensions are off: query it with SELECT; " + TABLES_HINT
        )
    return "check the query's values and types; " + TABLES_HINT


def _workspace(path: str | Path | None) -> Workspace:
    if path is None:
        try:
            return existing_workspace(None)
        except Exception as err:  # a Refused here is bad input for sql
            raise ConfigError(str(getattr(err, "message", err)), fix="pass --workspace DIR") from None
    ws = Workspace(Path(path).resolve())
    if not ws.catalog_path.is_file():
        raise ConfigError(
            "no campaign catalog here (campaign.duckdb is missing)",
            where=str(ws.root),
            fix="pass --workspace DIR, the folder a campaign ran in",
        )
    return ws


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    text = str(value).replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."


def format_table(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    """A plain-text table: header, rule, numbers right-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    numeric = [
        all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) for r in rows if r[i] is not None)
        for i in range(len(columns))
    ]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric, strict=True)
        )

    out = [line(columns), "  ".join("-" * w for w in widths), *(line(r) for r in cells)]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(s.rstrip() for s in out)

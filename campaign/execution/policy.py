"""Decisions between the starts of a real run: whom a failure points at, how long to back off, when a run that
makes no progress stops, and how the run ended (its outcome and the exit code `campaign execute` returns).

A failure is classified before it is blamed. A start that passes no step beyond the run's furthest (it fails
before its first step, or at the step where the last one failed) points at the software, not at its node: the
same trainer fails the same way wherever it runs, and the run moves it to another node to be sure. Such failures
never count towards excluding a node, and `max_no_progress_restarts` of them in a row end the run, quoting the
trainer's last stderr lines. Only a lost node, or a hang or crash after progress, counts against the node it ran
on; an injected fault counts only when it is a node loss.
"""

from __future__ import annotations

from campaign.execution.journal import Journal
from campaign.execution.settings import (
    BLAME_INJECTED,
    BLAME_NODE,
    BLAME_NONE,
    BLAME_SOFTWARE,
    NODE_LOST,
    SUPERVISOR_LOST,
    RealRunSettings,
)

# How a run ended (the `outcome` of its window_end event) and the exit code `campaign execute` gives it.
TARGET, SHORT, STOPPED = "target", "short", "stopped"
EXIT_CODES = {TARGET: 0, SHORT: 5, STOPPED: 6}


def blame(category: str, injected: bool, progressed: bool) -> str:
    """Whom a failure points at: `node`, `software`, `injected` (a fault driven in on purpose) or `none`."""
    if category == NODE_LOST:
        return BLAME_NODE
    if injected:
        return BLAME_INJECTED
    if category == SUPERVISOR_LOST:
        return BLAME_NONE
    return BLAME_NODE if progressed else BLAME_SOFTWARE


def no_progress_streak(journal: Journal) -> int:
    """Failures in a row, newest last, whose start passed no new step (injected faults and a lost supervisor
    neither count nor break the streak)."""
    streak = 0
    for failure in reversed(journal.kinds("failure")):
        if failure.blame in (BLAME_INJECTED, BLAME_NONE):
            continue
        if failure.progressed is not False:  # a line without the key progressed
            break
        streak += 1
    return streak


def backoff_s(settings: RealRunSettings, journal: Journal) -> float:
    """The wait before the next restart: fixed, or doubling with each failure in a row that made no progress
    (the first after progress waits `backoff_s`), at most `backoff_max_s`."""
    if settings.restart_backoff != "exponential":
        return settings.backoff_s
    n = max(no_progress_streak(journal), 0)
    return float(min(settings.backoff_s * 2.0**n, settings.backoff_max_s))


def node_failures(journal: Journal, node: int) -> int:
    """The failures on `node` that point at it."""
    return sum(1 for e in journal.kinds("failure") if e.node == node and e.blame in (None, BLAME_NODE))


def outcome(journal: Journal) -> str:
    """TARGET when the run reached its target step, STOPPED when a person stopped it, SHORT otherwise (gave up,
    no node left, the window ended first); SHORT for a run that has not ended."""
    if journal.kinds("job_complete"):
        return TARGET
    ends = journal.kinds("window_end")
    said = ends[-1].outcome if ends else None
    if said is not None and said in EXIT_CODES:
        return said
    return SHORT


def quote_stderr(lines: list[str], most: int = 5) -> str:
    """The trainer's last stderr lines, quoted on one line each (empty when it wrote none)."""
    kept = [line.strip()[:300] for line in lines if line.strip()][-most:]
    return " | ".join(kept)

"""The errors campaign raises for unusable input or a refused action.

Every kind carries where (file, line, field), what went wrong and what to do, and maps to one CLI exit code.
Modelled outcomes (a layout that does not fit, a rejected document, a simulated GPU failure) are data,
never exceptions.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from campaign.gate_result import GateResult


class CampaignError(Exception):
    """Base of every error the user is meant to read. `exit_code` is what the CLI returns."""

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None, fix: str | None = None) -> None:
        self.message = message
        self.where = where
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


class ConfigError(CampaignError):
    """A config file is unreadable, has an unknown key, a wrong type or an impossible combination."""

    exit_code = 2


class DataError(CampaignError):
    """Input data is unusable as a whole (no files, unreadable file, wrong schema)."""

    exit_code = 2


class GateFailed(CampaignError):
    """One or more validation gates did not pass; `results` holds every gate's result (the CLI prints the table)."""

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        where: str | None = None,
        fix: str | None = None,
        results: Sequence[GateResult] = (),
    ) -> None:
        self.results: list[GateResult] = list(results)
        super().__init__(message, where=where, fix=fix)


class Refused(CampaignError):
    """An action (commit, execute) was refused because its preconditions do not hold."""

    exit_code = 3


class WorkspaceBusy(CampaignError):
    """Another process holds the workspace lock."""

    exit_code = 4


class DiskFull(CampaignError):
    """The disk (or the user's quota) is full: the environment, not the input, and not a bug in campaign."""

    exit_code = 74  # EX_IOERR of sysexits.h, as 70 is its EX_SOFTWARE

    RESUME_FIX = (
        "free space on that disk (`df -h` shows how much is left), then run the same command again: it resumes, "
        "keeping the work already finished (prepared shards, recorded gates); nothing half-written is trusted"
    )

    @classmethod
    def writing(cls, where: str | None, detail: str = "") -> DiskFull:
        place = " while writing this file" if where else ""  # `where` is printed before the message
        said = f" ({detail})" if detail else ""
        return cls(f"the disk is full{place}{said}", where=where, fix=cls.RESUME_FIX)


_NO_SPACE_TEXT = (
    "no space left on device",
    "disk quota exceeded",
    "not enough space on the disk",
    "database or disk is full",  # SQLite's words (the Prefect API's run history)
)
_QUOTED_PATH = re.compile(r"""["'](/[^"']+)["']""")


def disk_full(exc: BaseException) -> DiskFull | None:
    """The DiskFull an exception stands for, if it or one in its chain (cause or context) is a full disk: an
    OSError with ENOSPC or EDQUOT, or a library's own error saying so in its text (DuckDB, Arrow, Great
    Expectations wrap the OSError). None for anything else."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DiskFull):
            return current
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            where = current.filename if isinstance(current.filename, str) else None
            return DiskFull.writing(where, current.strerror or "")
        text = str(current)
        if any(phrase in text.lower() for phrase in _NO_SPACE_TEXT):
            path = _QUOTED_PATH.search(text)
            return DiskFull.writing(
                path.group(1) if path else None, text.splitlines()[0][:200] if text else ""
            )
        current = current.__cause__ or current.__context__
    return None


class InternalError(CampaignError):
    """A bug in campaign itself, not in the user's input; the Prefect log above has the detail."""

    exit_code = 70

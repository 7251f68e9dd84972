"""The errors campaign raises for unusable input or a refused action.

Every kind carries where (file, line, field), what went wrong and what to do, and maps to one CLI exit code.
Modelled outcomes (a layout that does not fit, a rejected document, a simulated GPU failure) are data,
never exceptions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from campaign.gates import GateResult


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


class InternalError(CampaignError):
    """A bug in campaign itself, not in the user's input; the Prefect log above has the detail."""

    exit_code = 70

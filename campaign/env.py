"""Settings read from environment variables, each checked with a message that names the variable and the fix."""

from __future__ import annotations

import os

from campaign.errors import ConfigError


def seconds_from_env(name: str, default: float, example: str) -> float:
    """`name` as a number of seconds from 0 to 86400, `default` when unset or blank; `example` is the fix's
    suggestion (e.g. "10")."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 86_400:  # NaN fails this too
        raise ConfigError(
            f"{name}={raw!r} is not a number of seconds from 0 to 86400",
            where=f"environment variable {name}",
            fix=f"set it to e.g. {example}, or unset it",
        )
    return value

"""What-if sweeps: the same replicas over a grid of config values, one row per grid point, the best marked.

`--sweep plan.checkpoint.interval_s=600,1200,1800` gives one axis; several axes make their product. Every grid
point runs the same replica seeds (common random numbers), so rows differ by the setting, not by luck.
Best: the highest probability of reaching the target inside the window (`p_target_in_window`, the figure
`campaign simulate` and the `schedule` gate read; a snapshot window never "finishes" but does reach its target),
then the highest mean ETTR, then the lowest cost, each only beyond the replicas' paired noise, else the points
are tied (campaign.sim.best).
Source: desmod/SimPy-style parameter sweeps; campaign.goodput for the figures in each row.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from campaign.config import load_config
from campaign.errors import ConfigError

SWEEP_COLUMNS = (
    "point",
    "values",
    "ettr_mean",
    "ettr_p10",
    "ettr_p90",
    "window_utilisation_mean",
    "completion_days_p10",
    "completion_days_p50",
    "completion_days_p90",
    "p_complete_in_window",
    "target_days_p90",
    "p_target_in_window",
    "window_suffices",
    "energy_mwh",
    "cost_usd",
    "is_best",
    "tied",
)


@dataclass(frozen=True)
class SweepAxis:
    key: str
    values: tuple[float, ...]


def parse_sweep(spec: str) -> SweepAxis:
    """`dotted.key=v1,v2,...` as an axis; a missing `=`, an empty or non-numeric value is a ConfigError."""
    key, sep, raw = spec.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(
            f"'{spec}' is not dotted.key=v1,v2,...",
            where="--sweep",
            fix="write e.g. --sweep plan.checkpoint.interval_s=600,1200,1800",
        )
    values = []
    for item in raw.split(","):
        item = item.strip()
        try:
            value = float(item)
        except ValueError:
            raise ConfigError(
                f"value '{item}' is not a number",
                where=f"--sweep {key}",
                fix="sweep numeric keys only, with values separated by commas",
            ) from None
        if not math.isfinite(value):
            raise ConfigError(
                f"value '{item}' is not finite", where=f"--sweep {key}", fix="use finite numbers"
            )
        values.append(int(value) if value.is_integer() else value)
    if len(set(values)) != len(values):
        raise ConfigError("a value is repeated", where=f"--sweep {key}", fix="list each value once")
    return SweepAxis(key, tuple(values))


def sweep_grid(axes: list[SweepAxis]) -> list[dict[str, float]]:
    """Every combination of the axes' values, first axis slowest; a key swept twice is a ConfigError."""
    keys = [a.key for a in axes]
    for key in keys:
        if keys.count(key) > 1:
            raise ConfigError("key swept twice", where=f"--sweep {key}", fix="give each key one --sweep")
    return [dict(zip(keys, combo, strict=False)) for combo in itertools.product(*(a.values for a in axes))]


def overrides_for(point: dict[str, float]) -> list[str]:
    """The `--set` overrides that apply one grid point."""
    return [f"{key}={value}" for key, value in point.items()]


def check_numeric_key(config_dump: dict, key: str) -> None:
    """The swept key must name a numeric field of the loaded config (an unknown key fails earlier, in the
    config loader, with its own message)."""
    node = config_dump
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(
                "no such key in the config",
                where=f"--sweep {key}",
                fix="sweep a numeric key the config has, e.g. plan.checkpoint.interval_s",
            )
        node = node[part]
    if node == "auto":  # a number-or-auto field (plan.checkpoint.interval_s): any number is a valid value
        return
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise ConfigError(
            f"the key holds {type(node).__name__} {node!r}, not a number",
            where=f"--sweep {key}",
            fix="sweep numeric keys only (intervals, spares, smoothing, window days, ...)",
        )


def sweep_row(index: int, point: dict[str, float], summary: dict) -> dict:
    """One table row from a grid point's replica summary (campaign.sim.summarise_replicas)."""
    days = summary["completion_days"]
    cost = summary["cost_usd"]
    return {
        "point": index,
        "values": dict(point),
        "ettr_mean": summary["ettr"]["mean"],
        "ettr_p10": summary["ettr"]["p10"],
        "ettr_p90": summary["ettr"]["p90"],
        "window_utilisation_mean": summary["window_utilisation"]["mean"],
        "completion_days_p10": days["p10"],
        "completion_days_p50": days["p50"],
        "completion_days_p90": days["p90"],
        "p_complete_in_window": summary["p_complete_in_window"],
        "target_days_p90": summary["target_days"]["p90"],
        "p_target_in_window": summary["p_target_in_window"],
        "window_suffices": summary["window_length"]["suffices"],
        "energy_mwh": summary["energy_mwh"],
        "cost_usd": cost["compute"] + cost["energy"],
        "is_best": False,
        "tied": False,
    }


def sweep_table_markdown(rows: list[dict]) -> str:
    """The rows as a Markdown table (the CLI prints it; the Prefect artifact holds the same rows)."""
    keys = list(rows[0]["values"]) if rows else []

    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)

    head = [
        *keys,
        "ETTR mean",
        "ETTR p10",
        "ETTR p90",
        "done day p10",
        "p50",
        "p90",
        "P(done)",
        "target day p90",
        "P(target)",
        "window",
        "energy MWh",
        "cost USD",
        "best",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    for r in rows:
        cells = [format(r["values"][k], "g") for k in keys]
        cells += [
            fmt(r["ettr_mean"], ".4f"),
            fmt(r["ettr_p10"], ".4f"),
            fmt(r["ettr_p90"], ".4f"),
            fmt(r["completion_days_p10"], ".2f"),
            fmt(r["completion_days_p50"], ".2f"),
            fmt(r["completion_days_p90"], ".2f"),
            fmt(r["p_complete_in_window"], ".2f"),
            fmt(r["target_days_p90"], ".2f"),
            fmt(r["p_target_in_window"], ".2f"),
            "suffices" if r["window_suffices"] else "too short",
            fmt(r["energy_mwh"], ",.1f"),
            fmt(r["cost_usd"], ",.0f"),
            "**best**" if r["is_best"] else ("tied" if r.get("tied") else ""),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_line(rows: list[dict]) -> str:
    """The sweep's verdict in words: the best point, or the values tied for it (no best beyond noise)."""

    def values(r: dict) -> str:
        return ", ".join(f"{k}={v:g}" for k, v in r["values"].items())

    best = [r for r in rows if r["is_best"]]
    if best:
        return f"best: {values(best[0])}"
    tied = [r for r in rows if r.get("tied")]
    return "no best beyond the replicas' noise: tied " + "; ".join(values(r) for r in tied)


def check_sweeps(config: str, overrides: list[str], sweeps: list[str]) -> list[list[str]]:
    """Parse the sweep axes and load the config at every grid point: bad input fails here, before any Prefect API
    starts. Returns each point's overrides."""
    loaded = load_config(config, overrides)
    axes = [parse_sweep(spec) for spec in sweeps]
    dump = loaded.config.model_dump(mode="json", by_alias=True)
    for axis in axes:
        check_numeric_key(dump, axis.key)
    grid = sweep_grid(axes)
    for point in grid:
        load_config(config, overrides + overrides_for(point))
    return [overrides_for(point) for point in grid]

"""A fitted failure profile as the YAML list a config's `cluster.failures` names, and the base it maps to.

Each category carries its rate in its fitted unit and the failures and exposure behind it (`observed`), so a
simulated replica can draw the rate from its posterior. Detect, restart and repair times, and what a failure
costs (its config scope), come from the base profile's category of the same name; a category the base does not
have takes the assumptions of the shipped Llama 3 profile (configs/failures/llama3-405b.yaml).
Source: docs/failures.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from campaign.config import FailureCategoryConfig
from campaign.errors import ConfigError, DataError
from campaign.failures.fit import (
    DEFAULT_SIZES,
    FailureFit,
    FittedRate,
    fit_failures,
    poisson_rate_interval,
)
from campaign.failures.log import category_key, read_incident_log
from campaign.failures.slurm import (
    read_events,
    read_jobcomp,
    read_sacct,
    read_slurm_mapping,
    slurm_incident_log,
)
from campaign.files import read_bounded

MAX_PROFILE_BYTES = 16 * 1024 * 1024  # a failure profile is a few kilobytes; anything this large is not one

# Not in any incident log: the shipped Llama 3 profile's assumptions, by what a failure costs.
DEFAULT_TIMES = {
    "gpu": {"detect_s": 60.0, "restart_s": 480.0, "repair_h": 48.0},
    "node": {"detect_s": 60.0, "restart_s": 480.0, "repair_h": 24.0},
    "job": {"detect_s": 300.0, "restart_s": 480.0, "repair_h": 0.0},
}


def read_base_profile(path: str | Path) -> tuple[tuple[FailureCategoryConfig, ...], int | None]:
    """The categories of a failure profile (a YAML list) or of a campaign config's cluster.failures, and the
    campaign's GPUs per node (None for a bare profile)."""
    path = Path(path)
    try:
        data = yaml.safe_load(read_bounded(path, MAX_PROFILE_BYTES))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"cannot read the base failure profile: {exc}",
            where=str(path),
            fix="pass a failure profile (e.g. configs/failures/llama3-405b.yaml) or a campaign config",
        ) from exc
    if isinstance(data, dict):
        from campaign.config import load_config

        config = load_config(path).config
        return tuple(config.cluster.failures), config.cluster.gpus_per_node
    try:
        return TypeAdapter(tuple[FailureCategoryConfig, ...]).validate_python(data), None
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ConfigError(
            f"{field}: {first['msg']}",
            where=str(path),
            fix="give a YAML list of failure categories, as configs/failures/llama3-405b.yaml does",
        ) from exc


def profile_categories(
    fit: FailureFit, base: Sequence[FailureCategoryConfig] = (), source: str = "campaign failures fit"
) -> list[dict[str, Any]]:
    """One config category per fitted category: its rate, its observed failures and exposure, and its times."""
    by_key = {category_key(c.name): c for c in base}
    for b in base:
        for alias in b.aliases:
            by_key.setdefault(category_key(alias), b)
    out = []
    for c in fit.categories:
        known = by_key.get(category_key(c.name))
        scope = known.scope if known is not None else c.scope
        times = (
            {"detect_s": known.detect_s, "restart_s": known.restart_s, "repair_h": known.repair_h}
            if known is not None
            else DEFAULT_TIMES[c.scope]
        )
        lo, hi = c.ci95
        aliases = {"aliases": list(known.aliases)} if known is not None and known.aliases else {}
        if c.count == 0:
            # Not seen: no rate, and no posterior to draw one from (a zero-count category adds no failures).
            out.append(
                {
                    "name": c.name,
                    "scope": scope,
                    c.unit: 0.0,
                    **times,
                    **aliases,
                    "source": f"{source}: not in the log over {c.exposure_h:,.0f} {_unit_hours(c.unit)} (rate 0; "
                    f"its 95% upper bound is {hi:.4g} {c.unit}: state a rate here to keep a prior)",
                }
            )
            continue
        out.append(
            {
                "name": c.name,
                "scope": scope,
                c.unit: c.rate,
                **times,
                **aliases,
                "observed": {"failures": c.count, "exposure_h": c.exposure_h},
                "source": f"{source}: {c.count} failures over {c.exposure_h:,.0f} {_unit_hours(c.unit)}; "
                f"95% interval {lo:.4g} to {hi:.4g} {c.unit}",
            }
        )
    return out


# Hours of its own exposure unit in one unit of a config rate: a GPU-year, 1,000 node-days, a job-hour.
UNIT_HOURS = {"per_gpu_year": 365.0 * 24.0, "per_1k_node_days": 24.0 * 1000.0, "per_job_hour": 1.0}


def observed_rates(categories: Sequence[FailureCategoryConfig]) -> list[FittedRate]:
    """The categories that carry the failures and exposure they were fitted from (`observed`), each with its rate
    and exact 95% interval in its config unit, in the shape of the fit's `categories` (for the report's table and
    `report.rates_figure`). Empty when no category was fitted."""
    rows = []
    for c in categories:
        if c.observed is None:
            continue
        unit = (
            "per_gpu_year"
            if c.per_gpu_year is not None
            else "per_1k_node_days"
            if c.per_1k_node_days is not None
            else "per_job_hour"
        )
        scale = UNIT_HOURS[unit]
        lo, hi = poisson_rate_interval(c.observed.failures, c.observed.exposure_h)
        rows.append(
            FittedRate(
                name=c.name,
                scope=c.scope,
                count=c.observed.failures,
                exposure_h=c.observed.exposure_h,
                rate=c.unit_rate_per_h * scale,
                ci95=(lo * scale, hi * scale),
                unit=unit,
            )
        )
    return rows


def _unit_hours(unit: str) -> str:
    return {"per_gpu_year": "GPU-hours", "per_1k_node_days": "node-hours", "per_job_hour": "job-hours"}[unit]


def profile_yaml(
    fit: FailureFit, base: Sequence[FailureCategoryConfig] = (), source: str = "campaign failures fit"
) -> str:
    """The profile as YAML, checked against the config's schema before it is returned."""
    categories = profile_categories(fit, base, source)
    try:
        TypeAdapter(tuple[FailureCategoryConfig, ...]).validate_python(categories)
    except ValidationError as exc:
        first = exc.errors()[0]
        row = first["loc"][0] if first["loc"] and isinstance(first["loc"][0], int) else None
        name = categories[row]["name"] if row is not None else "a category"
        raise DataError(
            f"the fitted profile is one a config refuses: {name}: {'.'.join(map(str, first['loc'][1:]))}: "
            f"{first['msg']} (the log's exposure, {fit.exposure.gpu_hours:,.3g} GPU-hours, is too short for "
            "a rate a plan can use)",
            where="--out",
            fix="fit a longer log (weeks of jobs), or leave --out away to read the fit alone",
        ) from None
    header = (
        "# Failure profile fitted from an incident log by `campaign failures fit` (docs/failures.md).\n"
        "# Name it from a campaign: cluster: {failures: path/to/this.yaml}. Each rate carries the failures and\n"
        "# exposure it was fitted from (observed), so each simulated replica draws it from its posterior.\n"
        f"# exposure: {fit.exposure.gpu_hours:,.0f} GPU-hours, {fit.exposure.job_hours:,.0f} job-hours over "
        f"{fit.jobs:,} jobs; {fit.incidents:,} incidents\n"
    )
    return header + yaml.safe_dump(categories, sort_keys=False, width=200)


def stated_scope(category: FailureCategoryConfig) -> str:
    """How a base category states its rate: per GPU (`gpu`), per node (`node`) or per job-hour (`job`)."""
    if category.per_job_hour is not None:
        return "job"
    return "node" if category.per_1k_node_days is not None else "gpu"


def fit_incident_log(
    jobs: str | Path,
    incidents: str | Path,
    *,
    base: str | Path | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
    sizes: Sequence[int] = DEFAULT_SIZES,
) -> tuple[FailureFit, str | None]:
    """Read and check the log, fit it against the base profile's categories, and return the fit with the profile
    YAML it gives (None, with a note, when a config would refuse it; nothing is written here)."""
    categories, base_gpn = read_base_profile(base) if base else ((), None)
    log = read_incident_log(jobs, incidents, gpus_per_node or base_gpn)
    fit = fit_failures(
        log,
        gpus_per_node=gpus_per_node or base_gpn or 8,
        nodes=nodes,
        base_scopes={c.name: stated_scope(c) for c in categories},
        aliases=base_aliases(categories),
        sizes=sizes,
    )
    return fit, _profile_or_note(fit, categories, f"campaign failures fit {Path(incidents).name}")


def _profile_or_note(fit: FailureFit, categories: Sequence[FailureCategoryConfig], source: str) -> str | None:
    try:
        return profile_yaml(fit, categories, source=source)
    except DataError as exc:
        fit.notes.append(f"no profile: {exc.message}")
        return None


def profile_to_write(fit: FailureFit, profile: str | None) -> str:
    """The profile for --out, or the DataError (exit 2) saying why there is none."""
    if profile is None:
        reason = next((n for n in fit.notes if n.startswith("no profile: ")), "no profile")
        raise DataError(
            reason.removeprefix("no profile: "), where="--out", fix="fit a longer log, or leave --out away"
        )
    return profile


def base_aliases(categories: Sequence[FailureCategoryConfig]) -> dict[str, str]:
    """Every alias of the base's categories -> the category's name."""
    return {alias: c.name for c in categories for alias in c.aliases}


def fit_slurm_log(
    *,
    sacct: str | Path | None = None,
    jobcomp: str | Path | None = None,
    events: str | Path | None = None,
    mapping: str | Path | None = None,
    base: str | Path | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
    sizes: Sequence[int] = DEFAULT_SIZES,
) -> tuple[FailureFit, str | None]:
    """Slurm's accounting (campaign.failures.slurm) fitted as `fit_incident_log` fits campaign's own log."""
    categories, base_gpn = read_base_profile(base) if base else ((), None)
    per_node = gpus_per_node or base_gpn or 8
    the_mapping = read_slurm_mapping(mapping)
    records = read_sacct(sacct, per_node) if sacct else read_jobcomp(jobcomp or "", per_node)
    log = slurm_incident_log(
        records, read_events(events) if events else [], the_mapping, str(events) if events else None
    )
    fit = fit_failures(
        log,
        gpus_per_node=per_node,
        nodes=nodes,
        base_scopes={c.name: stated_scope(c) for c in categories},
        aliases=base_aliases(categories),
        scope_hints=the_mapping.scopes,
        sizes=sizes,
    )
    return fit, _profile_or_note(fit, categories, f"campaign failures fit {records.path.name}")

"""The analysis of an executed window: DuckDB queries over the catalog, returned as one JSON-ready dict.

ETTR, window utilisation and the goodput buckets are campaign.goodput's definitions, computed once by the
simulator and read here from the replica's summary (productive, lost rework, checkpoint, restart, waiting,
idle = idle_spares + idle_released GPU-hours, summing to (job + spare GPUs) x window hours).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import duckdb

from campaign.errors import Refused
from campaign.goodput import ETTR_DEFINITION, UTILISATION_DEFINITION
from campaign.store import first_row


def query(name: str) -> str:
    return resources.files("campaign.analysis").joinpath(f"{name}.sql").read_text(encoding="utf-8")


def analyse_window(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Analyse the newest executed window in the catalog."""
    row = first_row(con, query("latest_replica"))
    if row is None:
        raise Refused("nothing to analyse: no executed window in this workspace",
                      fix="run `campaign execute CONFIG` (or `campaign run CONFIG`) first")
    commitment_id, replica, seed, summary_json, start, end, config_digest, data_digest = row
    summary = json.loads(summary_json)
    params = {"commitment_id": commitment_id, "replica": replica}

    by_category: dict[str, int] = {}
    unexpected = planned = 0
    for kind, category, n in con.execute(query("interruptions"), params).fetchall():
        if kind == "failure":
            unexpected += n
            by_category[category] = n
        else:
            planned += n
    power = dict(zip(("peak_mw", "mean_mw", "min_mw", "energy_mwh", "max_ramp", "n_samples"),
                     first_row(con, query("power"), params), strict=True))
    n_failures = first_row(con, query("failure_gaps"), params)[0]
    window_h = summary["window_s"] / 3600.0
    exposure_h = (summary.get("completion_s") or summary["window_s"]) / 3600.0
    one_second = summary["power_mw"]
    return {
        "commitment_id": commitment_id,
        "replica": replica,
        "seed": seed,
        "window": {"start": str(start), "end": str(end), "hours": window_h},
        "config_digest": config_digest,
        "data_digest": data_digest,
        "ettr": summary["ettr"],
        "ettr_definition": ETTR_DEFINITION,
        "window_utilisation": summary["window_utilisation"],
        "window_utilisation_definition": UTILISATION_DEFINITION,
        "planned": {"expected_ettr": summary.get("plan", {}).get("expected_ettr"),
                    "expected_days": summary.get("plan", {}).get("expected_days")},
        "goodput_breakdown_gpu_h": summary["goodput_breakdown_gpu_h"],
        "interruptions": {"unexpected": unexpected, "planned": planned, "by_category": by_category},
        # Over the time the job was exposed to failures (until it completed, else the whole window), as Llama 3
        # reported it (54 days / 419 interruptions).
        "observed_job_mtbf_h": exposure_h / n_failures if n_failures else None,
        "planned_job_mtbf_h": summary.get("plan", {}).get("job_mtbf_h"),
        "checkpoint_interval_s": {"used": summary["checkpoint_interval_s"],
                                  "optimal": summary.get("checkpoint_interval_optimal_s")},
        # Peak, min and ramp from the simulator's 1-second series; mean and energy from the stored samples.
        "power_mw": {"peak": one_second["peak"], "mean": power["mean_mw"], "min": one_second["min"],
                     "max_ramp_mw_per_s": one_second["max_ramp_mw_per_s"]},
        "energy_mwh": power["energy_mwh"],
        "cost_usd": summary["cost_usd"],
        "tokens_trained": summary["tokens_trained"],
        "tokens_target": summary["tokens_target"],
        "completed": summary["completed"],
        "completion_days": summary["completion_s"] / 86400.0 if summary.get("completion_s") else None,
    }


def series(con: duckdb.DuckDBPyConnection, name: str, commitment_id: str, replica: int) -> Any:
    """A plot series as a pandas DataFrame (power_series, tokens_over_time)."""
    return con.execute(query(name), {"commitment_id": commitment_id, "replica": replica}).df()

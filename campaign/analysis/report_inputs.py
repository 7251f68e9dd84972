"""Everything the window report is drawn from, gathered in one place: the analysis of the executed window, its event
log, the power band for the whole window (aggregated in DuckDB), the per-second series rebuilt for the zooms, the
smoothing comparison, and the rehearsal gate's result. The analyse task, the report tests and the benchmark all
read the report's inputs through `gather_report_inputs`."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pandas as pd

from campaign.analysis.analysis import analyse_window, query, with_recommendations
from campaign.analysis.power_detail import rebuild_one_second, smoothing_effect
from campaign.sim.summary import ReplicaSummary
from campaign.sql.rows import one_row
from campaign.store import Workspace, catalog

if TYPE_CHECKING:
    from campaign.analysis.result import WindowAnalysis

# The power band is drawn with this many bins across the window (about one per horizontal pixel of the figure);
# each bin holds the min, mean and max of the per-minute means inside it.
BAND_BINS = 720


@dataclass
class ReportInputs:
    """The report's inputs. `result` is the analysis (the report sets it to the drawn one, with `power_zoom`)."""

    result: WindowAnalysis
    events: pd.DataFrame
    power_band: pd.DataFrame  # day, min_mw, mean_mw, max_mw per bin
    one_second: np.ndarray | None  # MW per second of the window, or None (then `zoom_note` says why)
    zoom_note: str
    config_json: str | None
    summary: ReplicaSummary
    rehearsal: dict[str, Any] | None  # the rehearsal gate's result.json, if the workspace has one


def power_band(
    con: duckdb.DuckDBPyConnection, commitment_id: str, replica: int, window_s: float, bins: int = BAND_BINS
) -> pd.DataFrame:
    """Per-minute facility power over the window, aggregated in DuckDB into `bins` bins of whole minutes."""
    bin_s = 60.0 * max(1, int(np.ceil(window_s / 60.0 / bins)))
    return con.execute(
        query("power_band"), {"commitment_id": commitment_id, "replica": replica, "bin_s": bin_s}
    ).df()


def gather_report_inputs(ws: Workspace) -> ReportInputs:
    """Read the executed window of `ws` (catalog opened read-only) and rebuild what the catalog does not store."""
    with catalog(ws, read_only=True) as con:
        result = analyse_window(con, str(ws.catalog_path), ws.data_dir)
        events = con.execute("SELECT * FROM window_events ORDER BY event_id").df()
        window = one_row(con, "SELECT config_json, summary FROM executed_window")
        config_json = window["config_json"]
        summary = ReplicaSummary.from_json(json.loads(window["summary"]))
        band = power_band(con, result.commitment_id, result.replica, float(summary.window_s))
    one_second, note = rebuild_one_second(config_json, result.replica, summary, len(events))
    if note == "":  # the committed config simulates the recorded window again: ask what smoothing changed
        effect = smoothing_effect(config_json, result.replica, summary)
        result = with_recommendations(replace(result, smoothing_compared=True, smoothing_effect=effect))
    rehearsal_file = ws.root / "rehearsal" / "result.json"
    rehearsal = json.loads(rehearsal_file.read_text(encoding="utf-8")) if rehearsal_file.is_file() else None
    return ReportInputs(result, events, band, one_second, note, config_json, summary, rehearsal)

"""Analyse: read the executed window from the catalog (read-only), write the report and publish it as artifacts
keyed by campaign; compare several runs side by side."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

from campaign import store
from campaign.analysis.analysis import analyse_window, recommendations, series
from campaign.analysis.compare import load_run, render_compare, write_compare
from campaign.analysis.power_detail import rebuild_one_second, smoothing_effect
from campaign.analysis.report import BUCKETS, write_report
from campaign.files import atomic_write_json
from tasks.artifacts import artifact_key


@task(name="analyse-window", cache_policy=None)
def analyse(ws: store.Workspace) -> dict:
    with store.catalog(ws, read_only=True) as con:
        result = analyse_window(con, str(ws.catalog_path), ws.data_dir)
        events = con.execute("SELECT * FROM window_events ORDER BY event_id").df()
        power = series(con, "power_series", result["commitment_id"], result["replica"])
        config_json, summary_json = con.execute("SELECT config_json, summary FROM executed_window").fetchone()
    power = power.assign(t_s=power["day"] * 86400.0)
    summary = json.loads(summary_json)
    one_second, note = rebuild_one_second(config_json, result["replica"], summary, len(events))
    if note == "":  # the committed config simulates the recorded window again: ask what smoothing changed
        result["smoothing_effect"] = smoothing_effect(config_json, result["replica"], summary)
        result["recommendations"] = recommendations(result)
    rehearsal_file = ws.root / "rehearsal" / "result.json"
    rehearsal = json.loads(rehearsal_file.read_text()) if rehearsal_file.exists() else None
    html, md, markdown = write_report(ws.report_dir, result, events, power, one_second, note, rehearsal)
    campaign = json.loads(config_json).get("name", ws.root.name) if config_json else ws.root.name
    result = {**result, "campaign": campaign, "report": str(md), "report_html": str(html)}
    atomic_write_json(ws.report_dir / "analysis.json", result)
    create_markdown_artifact(key=artifact_key(campaign, "campaign-report"), markdown=markdown,
                             description=f"Window report of {campaign} ({result['commitment_id']})")
    create_table_artifact(key=artifact_key(campaign, "goodput"), description="GPU-hours by goodput bucket",
                          table=[{"bucket": label, "gpu_h": round(result["goodput_breakdown_gpu_h"][k], 1),
                                  "counts_as": kind} for k, label, kind in BUCKETS])
    create_table_artifact(key=artifact_key(campaign, "failures"), description="Failures observed against expected",
                          table=[{k: row[k] for k in ("category", "observed", "expected", "interval_lo",
                                                      "interval_hi")} for row in result["failures"]])
    create_link_artifact(key=artifact_key(campaign, "report-html"), link=html.as_uri(),
                         link_text=f"report.html of {campaign}", description="The self-contained window report")
    get_run_logger().info("report written to %s (ETTR while running %.3f, lost $%.0f)", html, result["ettr"],
                          result["cost_usd"]["lost"])
    return result


@task(name="compare-runs", cache_policy=None)
def compare(targets: list[str], out_dir: str) -> dict:
    runs = [load_run(t) for t in targets]
    comparison = render_compare(runs)
    html, path_json = write_compare(Path(out_dir), comparison)
    create_markdown_artifact(key="campaign-compare", markdown=comparison["markdown"],
                             description=f"{len(runs)} runs side by side")
    create_link_artifact(key="campaign-compare-html", link=html.as_uri(), link_text="compare.html")
    get_run_logger().info("comparison of %d runs written to %s", len(runs), html)
    return {**comparison["json"], "report_html": str(html), "json_path": str(path_json)}

"""Analyse: query the catalog for the executed window, write the report and publish it as artifacts."""

from __future__ import annotations

import json

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from campaign import store
from campaign.analysis.analysis import analyse_window, series
from campaign.analysis.report import write_report
from campaign.files import atomic_write_json


@task(name="analyse-window", cache_policy=None)
def analyse(ws: store.Workspace) -> dict:
    with store.catalog(ws) as con:
        result = analyse_window(con)
        power = series(con, "power_series", result["commitment_id"], result["replica"])
        tokens = series(con, "tokens_over_time", result["commitment_id"], result["replica"])
    rehearsal_file = ws.root / "rehearsal" / "result.json"
    rehearsal = json.loads(rehearsal_file.read_text()) if rehearsal_file.exists() else None
    report = write_report(ws.report_dir, result, power, tokens, rehearsal)
    result = {**result, "report": str(report)}
    atomic_write_json(ws.report_dir / "analysis.json", result)
    create_markdown_artifact(key="campaign-report", markdown=report.read_text(), description=str(report))
    create_table_artifact(key="goodput", table=[{"bucket": k, "gpu_h": round(v, 1)}
                                                for k, v in result["goodput_breakdown_gpu_h"].items()])
    get_run_logger().info("report written to %s (ETTR %.3f)", report, result["ettr"])
    return result

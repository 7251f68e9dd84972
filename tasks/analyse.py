"""Analyse: read the executed window from the catalog (read-only), write the report and publish it as artifacts
keyed by campaign; compare several runs side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from campaign import store
from campaign.errors import CampaignError
from campaign.files import atomic_write_json, atomic_write_text
from campaign.goodput import BUCKETS
from campaign.reuse import drawn_report, record_drawn, report_inputs_digest
from tasks.artifacts import COMPARE_HTML_KEY, COMPARE_KEY, artifact_key, local_file_markdown

if TYPE_CHECKING:
    from campaign.sim.summary import ReplicaSummary

# The analysis stack (pandas, matplotlib, the simulator) is imported by the task that draws a report, when it draws
# one: a report whose inputs are unchanged is read back instead (campaign/reuse.py).
REPORT_FILES = ("report.html", "report.md")


@task(name="analyse-window", cache_policy=None)
def analyse(ws: store.Workspace, report_dir: Path | None = None) -> dict:
    """The report of the executed window, written to `report_dir` (default the workspace's report/); not drawn
    again when the digest of its inputs (catalog rows, data files, rehearsal result, code version) is the one
    recorded beside it."""
    report_dir = report_dir or ws.report_dir
    inputs_digest = report_inputs_digest(ws)
    drawn = drawn_report(report_dir, inputs_digest, REPORT_FILES)
    if drawn is not None:
        get_run_logger().info(
            "report inputs unchanged since the report was drawn (digest %s): not redrawn", inputs_digest[:12]
        )
        html, md = report_dir / "report.html", report_dir / "report.md"
        return publish_report(drawn, md.read_text(encoding="utf-8"), html)
    from campaign.analysis.report import write_report
    from campaign.analysis.report_inputs import gather_report_inputs

    inputs = gather_report_inputs(ws)
    html, md, markdown = write_report(report_dir, inputs)
    config_json = inputs.config_json
    campaign = json.loads(config_json).get("name", ws.root.name) if config_json else ws.root.name
    result = {**inputs.result.to_json(), "campaign": campaign, "report": str(md), "report_html": str(html)}
    atomic_write_json(report_dir / "analysis.json", result)
    record_drawn(report_dir, inputs_digest)
    return publish_report(result, markdown, html)


def publish_report(result: dict, markdown: str, html: Path) -> dict:
    """The window report's artifacts (keyed by campaign) and its log line; returns `result`."""
    campaign = result["campaign"]
    create_markdown_artifact(
        key=artifact_key(campaign, "campaign-report"),
        markdown=markdown,
        description=f"Simulated window report of {campaign} ({result['commitment_id']}, replica "
        f"{result['replica']}, seed {result['seed']})",
    )
    create_table_artifact(
        key=artifact_key(campaign, "goodput"),
        description="GPU-hours by goodput bucket",
        table=[
            {"bucket": label, "gpu_h": round(result["goodput_breakdown_gpu_h"][k], 1), "counts_as": kind}
            for k, label, kind in BUCKETS
        ],
    )
    create_table_artifact(
        key=artifact_key(campaign, "failures"),
        description="Failures observed against expected",
        table=[
            {k: row[k] for k in ("category", "observed", "expected", "interval_lo", "interval_hi")}
            for row in result["failures"]
        ],
    )
    create_markdown_artifact(
        key=artifact_key(campaign, "report-html"),
        markdown=local_file_markdown(f"report.html of {campaign}", html),
        description="Where the self-contained window report is",
    )
    get_run_logger().info(
        "report written to %s (ETTR while running %.3f, lost $%.0f)",
        html,
        result["ettr"],
        result["cost_usd"]["lost"],
    )
    return result


@task(name="compare-runs", cache_policy=None)
def compare(targets: list[str], out_dir: str) -> dict:
    from campaign.analysis.compare import load_run, render_compare, write_compare

    runs = [load_run(t) for t in targets]
    comparison = render_compare(runs)
    html, path_json = write_compare(Path(out_dir), comparison)
    create_markdown_artifact(
        key=COMPARE_KEY, markdown=comparison.markdown, description=f"{len(runs)} runs side by side"
    )
    create_markdown_artifact(key=COMPARE_HTML_KEY, markdown=local_file_markdown("compare.html", html))
    get_run_logger().info("comparison of %d runs written to %s", len(runs), html)
    return {**comparison.to_json(), "report_html": str(html), "json_path": str(path_json)}


@task(name="simulate-report", cache_policy=None)
def simulate_report(
    result: dict, summaries: list[ReplicaSummary], campaign: str, workspace: str | None
) -> dict:
    """The distributions over a simulate run's replicas: `simulate/<stem>.html` and `.md` in the campaign's workspace,
    a markdown artifact and a link artifact; returns what the simulate result adds (`replica_values`,
    `p_target_interval`, `p_complete_interval`, `report_html`)."""
    from campaign.analysis.simulate_report import (
        completion_interval,
        render_simulate_report,
        replica_values,
        report_stem,
    )
    from campaign.analysis.simulate_run import SimulateRun

    run = SimulateRun.from_json(result)
    values = replica_values(summaries)
    html, markdown, facts = render_simulate_report(run, campaign, values)
    finish = facts.finish
    out: dict[str, Any] = {
        "replica_values": values.to_json() if values is not None else None,
        "report_html": None,
        "p_target_interval": [finish.interval_lo, finish.interval_hi] if finish else None,
        "p_complete_interval": completion_interval(summaries) if summaries else None,
    }
    logger = get_run_logger()
    try:  # a what-if run still answers when its workspace folder is not usable; the artifact has the same report
        ws = store.adopt_workspace(store.workspace_for(campaign, workspace), campaign)
    except CampaignError as err:
        logger.warning("simulate report not written to a file: %s (%s)", err.message, err.fix)
        out["report_note"] = f"not written: {err.message} ({err.where}); fix: {err.fix}"
    else:
        stem = report_stem(run)
        path = atomic_write_text(ws.root / "simulate" / f"{stem}.html", html)
        atomic_write_text(ws.root / "simulate" / f"{stem}.md", markdown)
        out["report_html"] = str(path)
        create_markdown_artifact(
            key=artifact_key(campaign, "simulate-report-html"),
            markdown=local_file_markdown(f"simulate report of {campaign}", path),
            description="Where the report of the distributions over replicas is",
        )
    create_markdown_artifact(
        key=artifact_key(campaign, "simulate-report"),
        markdown=markdown,
        description=f"{run.replicas} what-if replicas of {campaign}",
    )
    logger.info(
        "simulate report: P(target reached inside the window) %.3f%s",
        run.summary.p_target_in_window,
        f", written to {out['report_html']}" if out["report_html"] else "",
    )
    return out

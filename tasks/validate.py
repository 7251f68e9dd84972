"""Validate: the data gates (identity, Great Expectations, volume, mixture) and the configuration gates (plan)."""

from __future__ import annotations

import pyarrow as pa
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.states import Completed, Failed, State

from campaign import store
from campaign.config import CampaignConfig
from campaign.errors import Refused
from campaign.evidence import DataEvidence, gate_files, read_evidence
from campaign.files import atomic_write_json, atomic_write_text
from campaign.gate_report import GateRow, gate_rows, gates_markdown
from campaign.gates import (
    GateResult,
    data_figures,
    data_gates,
    identity_gate,
    plan_gates,
    schedule_with_window_length,
)
from campaign.plan import Plan, make_plan
from campaign.reuse import code_version, how_judged, reusable_gates, with_code_version
from campaign.window_judge import judge_window
from tasks.artifacts import artifact_key

# Great Expectations, the report's templates and the plan's simulator are imported by the task that runs its gate,
# so a validate that reuses a gate's recorded result (campaign/reuse.py) does not pay for them.
DATA_DOCS_DIR = "data_docs"  # Great Expectations' Data Docs site, under the workspace's checks/
GX_COLUMNS = ["doc_id", "source", "text", "n_words", "n_tokens", "n_bytes", "text_sha256"]


@task(name="read-prepared-data", cache_policy=None)
def load_evidence(config: CampaignConfig, ws: store.Workspace) -> DataEvidence:
    """Every file the manifest lists, read once, hashed and parsed from the same bytes."""
    evidence = read_evidence(
        ws.data_dir, config.data.in_workspace(ws.root), load_tables=True, files=gate_files(config)
    )
    if evidence is None:
        raise Refused(
            "no prepared data (data/manifest.json is missing)",
            where=str(ws.data_dir),
            fix="run `campaign prepare CONFIG` first",
        )
    get_run_logger().info(
        "prepared data: %d files, gate evidence digest %s (the prepared-data digest %s with %d file(s) the gates "
        "read)%s",
        len(evidence.files),
        evidence.digest[:12],
        str(evidence.manifest.get("data_digest", ""))[:12],
        len(evidence.gate_files),
        f", {len(evidence.problems)} problem(s)" if evidence.problems else "",
    )
    return evidence


@task(name="data-identity", cache_policy=None)
def data_identity_gate(evidence: DataEvidence) -> GateResult:
    return identity_gate(evidence)


@task(name="gx-clean-data", cache_policy=None)
def data_quality_gate(config: CampaignConfig, ws: store.Workspace, evidence: DataEvidence) -> GateResult:
    from campaign.analysis.data_quality_page import OFFLINE_PAGE
    from data_checks.runner import observed_text, summarise, validate_frame
    from data_checks.suites import suite_specs

    # GX has no working DuckDB source; the clean tables (parsed from the hashed bytes) go to GX as pandas.
    tables = [t.select([c for c in GX_COLUMNS if c in t.column_names]) for t in evidence.tables("clean")]
    frame = (
        pa.concat_tables(tables, promote_options="default")
        if tables
        else pa.table({c: pa.array([], pa.string()) for c in GX_COLUMNS})
    ).to_pandas()
    result = validate_frame(frame, suite_specs(config), docs_dir=ws.checks_dir / DATA_DOCS_DIR)
    atomic_write_json(ws.checks_dir / "clean_data.json", result)
    summary = summarise(result)
    rows = [
        {
            "expectation": r["expectation"],
            "column": r["column"],
            "bounds": r["bounds"],
            "observed": observed_text(r),
            "passed": r["success"],
        }
        for r in result["expectations"]
    ]
    offline = write_offline_page(ws, config.name, summary, rows, result, evidence.digest)
    create_table_artifact(
        key=artifact_key(config.name, "data-quality"),
        table=rows,
        description=f"{summary}; readable offline: {offline} (Great Expectations' Data Docs, "
        f"{ws.checks_dir / DATA_DOCS_DIR / 'index.html'}, need network for their CDN styles and scripts)",
    )
    get_run_logger().info("data_quality: %s", summary)
    n_passed = sum(1 for r in result["expectations"] if r["success"])
    return GateResult(
        "data_quality",
        result["success"],
        summary,
        {
            "checks_file": "checks/clean_data.json",
            "data_docs": f"checks/{DATA_DOCS_DIR}/index.html",
            "offline_page": f"checks/{OFFLINE_PAGE}",
            "n_rows": result["n_rows"],
            "n_expectations": len(result["expectations"]),
            "n_passed": n_passed,
        },
    )


def write_offline_page(
    ws: store.Workspace, campaign: str, summary: str, rows: list[dict], result: dict, data_digest: str
) -> str:
    """`checks/data_quality.html`: the expectations readable offline; the Data Docs index gets a note pointing
    to it (they load their CSS and JavaScript from public CDNs). Returns the page's path."""
    from campaign.analysis.data_quality_page import OFFLINE_PAGE, add_offline_banner, data_quality_html

    index = ws.checks_dir / DATA_DOCS_DIR / "index.html"
    page = atomic_write_text(
        ws.checks_dir / OFFLINE_PAGE,
        data_quality_html(
            campaign,
            summary,
            rows,
            str(result.get("great_expectations_version", "")),
            data_digest,
            f"{DATA_DOCS_DIR}/index.html",  # relative to the page, which sits in checks/
        ),
    )
    if index.exists():
        atomic_write_text(index, add_offline_banner(index.read_text(encoding="utf-8"), f"../{OFFLINE_PAGE}"))
    return str(page.resolve())


def data_docs_path(ws: store.Workspace) -> str:
    return str((ws.checks_dir / DATA_DOCS_DIR / "index.html").resolve())


@task(name="volume-and-mixture", cache_policy=None)
def volume_gates(config: CampaignConfig, evidence: DataEvidence) -> list[GateResult]:
    g = config.gates.data
    figures = data_figures(evidence, config.data.tokenizer)
    weights = {s.name: s.weight for s in config.data.sources}
    return data_gates(
        figures, weights, g.min_documents, g.min_tokens, g.max_rejected_fraction, g.mixture_tolerance
    )


@task(name="plan-gates", cache_policy=None)
def configuration_gates(config: CampaignConfig) -> tuple[list[GateResult], Plan]:
    plan = make_plan(config)
    results = plan_gates(plan, [(v.rule, v.message) for v in plan.violations])
    if config.gates.config.window_replicas and plan.fits:
        results = [
            schedule_with_window_length(r, judge_window(config, plan)) if r.gate == "schedule" else r
            for r in results
        ]
    get_run_logger().info(
        "plan: %.2f s/step, MFU %.1f%%, %.1f GiB/GPU, %.2f days expected",
        plan.step_time_s,
        plan.mfu * 100,
        plan.memory_gib_per_gpu,
        plan.expected_days,
    )
    return results, plan


@task(name="record-gates", cache_policy=None)
def record_gates(
    ws: store.Workspace,
    run_id: str,
    config: CampaignConfig,
    config_digest: str,
    data_digest: str,
    results: list[GateResult],
    plan: Plan,
) -> list[GateRow]:
    """Record this validate's verdicts and publish them: the `gates` table and the `gates-detail` markdown table,
    each gate with its figure and threshold, linked to Great Expectations' Data Docs."""
    from campaign.analysis.data_quality_page import OFFLINE_PAGE

    store.record_gates(ws, run_id, config_digest, data_digest, results)
    rows = gate_rows(results, config, plan)
    create_table_artifact(
        key=artifact_key(config.name, "gates"),
        table=[
            {"gate": r.gate, "passed": r.passed, "figure": r.figure, "threshold": r.threshold} for r in rows
        ],
        description=f"config {config_digest[:12]} gate evidence {data_digest[:12]}",
    )
    links = (
        {
            "Data Docs (the data quality gate's page, readable offline)": str(
                (ws.checks_dir / OFFLINE_PAGE).resolve()
            ),
            "Great Expectations' own Data Docs (where online: CDN styles and scripts)": data_docs_path(ws),
        }
        if (ws.checks_dir / OFFLINE_PAGE).exists()
        else {}
    )
    create_markdown_artifact(
        key=artifact_key(config.name, "gates-detail"),
        markdown=gates_markdown(rows, config_digest, data_digest, config.name, links),
        description="each gate's figure against its threshold",
    )
    return rows


@task(name="gate", task_run_name="gate-{row.gate}", cache_policy=None)
def judge_gate(row: GateRow) -> State:
    """One run per gate, so the graph shows each gate: green when it passed, red (Failed) with its figure and
    threshold in the state message when it did not. An expected outcome: returned as a state, never raised."""
    if row.passed:
        return Completed(message=row.message(), data=True)
    get_run_logger().warning("%s", row.message())
    return Failed(message=row.message(), data=False)


@task(name="reuse-recorded-gates", cache_policy=None)
def reused_gates(
    ws: store.Workspace, config_digest: str, evidence: DataEvidence, rerun: list[str]
) -> dict[str, GateResult]:
    """The gates whose result recorded for exactly these digests, under this code version, stands
    (campaign/reuse.py); `rerun` names the gates to run whatever was recorded."""
    recorded = store.latest_gates(ws, config_digest, evidence.digest)
    kept = reusable_gates(recorded, ws.root, code_version(), rerun, evidence.problems)
    log = get_run_logger()
    for gate in recorded:
        if gate in kept:
            log.info("%s: %s, evidence unchanged", gate, how_judged(kept[gate].details))
    return {gate: kept[gate].as_gate_result() for gate in kept}


def plan_of(config: CampaignConfig) -> Plan:
    """The plan, for the gates' figures when the plan gates' results are reused."""
    return make_plan(config)


def stamped(results: list[GateResult]) -> list[GateResult]:
    """Each result with the code version it was judged under (a reused one keeps the run that judged it)."""
    return [with_code_version(r, code_version()) for r in results]

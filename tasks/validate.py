"""Validate: the data gates (Great Expectations, volume, mixture) and the configuration gates (plan)."""

from __future__ import annotations

import json

import duckdb
from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from campaign import store
from campaign.config import CampaignConfig
from campaign.data import read_manifest
from campaign.errors import Refused
from campaign.files import atomic_write_json
from campaign.gates import GateResult, data_gates, plan_gates
from campaign.plan import make_plan
from data_checks.runner import summarise, validate_frame
from data_checks.suites import suite_specs


@task(name="read-manifest", cache_policy=None)
def load_manifest(ws: store.Workspace) -> dict:
    manifest = read_manifest(ws.data_dir)
    if manifest is None:
        raise Refused("no prepared data (data/manifest.json is missing)", where=str(ws.data_dir),
                      fix="run `campaign prepare CONFIG` first")
    return manifest


@task(name="gx-clean-data", cache_policy=None)
def data_quality_gate(config: CampaignConfig, ws: store.Workspace) -> GateResult:
    clean = str(ws.data_dir / "clean" / "*.parquet")
    # GX has no working DuckDB source; DuckDB reads the Parquet into pandas and GX validates that.
    frame = duckdb.sql(
        "SELECT doc_id, source, text, n_words, n_tokens, n_bytes, text_sha256 FROM read_parquet(?)", params=[clean]
    ).df()
    result = validate_frame(frame, suite_specs(config))
    atomic_write_json(ws.checks_dir / "clean_data.json", result)
    summary = summarise(result)
    create_table_artifact(key="data-quality", table=result["expectations"], description=summary)
    get_run_logger().info("data_quality: %s", summary)
    return GateResult("data_quality", result["success"], summary, {"checks_file": "checks/clean_data.json"})


@task(name="volume-and-mixture", cache_policy=None)
def volume_gates(config: CampaignConfig, manifest: dict) -> list[GateResult]:
    g = config.gates.data
    return data_gates(manifest, g.min_documents, g.min_tokens, g.max_rejected_fraction, g.mixture_tolerance)


@task(name="plan-gates", cache_policy=None)
def configuration_gates(config: CampaignConfig) -> tuple[list[GateResult], dict]:
    plan = make_plan(config)
    plan_json = plan.to_json()
    results = plan_gates(plan_json, [(v.rule, v.message) for v in plan.violations])
    get_run_logger().info("plan: %.2f s/step, MFU %.1f%%, %.1f GiB/GPU, %.2f days expected",
                          plan.step_time_s, plan.mfu * 100, plan.memory_gib_per_gpu, plan.expected_days)
    return results, plan_json


@task(name="record-gates", cache_policy=None)
def record_gates(ws: store.Workspace, run_id: str, config_digest: str, data_digest: str,
                 results: list[GateResult]) -> int:
    inserted = store.record_gates(ws, run_id, config_digest, data_digest, [r.as_row() for r in results])
    rows = [{"gate": r.gate, "passed": r.passed, "summary": r.summary} for r in results]
    create_table_artifact(key="gates", table=rows, description=f"config {config_digest[:12]} data {data_digest[:12]}")
    create_markdown_artifact(key="gates-detail", markdown="```json\n" + json.dumps(
        [r.as_row() for r in results], indent=1, default=str)[:20000] + "\n```")
    return inserted


"""Prepare: plan shards, clean each shard (mapped), dedup globally, write one file per source and the manifest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact

from campaign.config import DataConfig
from campaign.data.inputs import InputPlan, InputProblem, Shard
from campaign.data.manifest import Manifest
from campaign.data.pipeline import (
    DedupStats,
    SourceResult,
    check_problems,
    dedup_pass,
    finalise_source,
    finish_run,
    plan_run,
    prepare_data,
    start_run,
    work_dir_of,
    write_run_manifest,
)
from campaign.data.shards import ShardSummary, run_shard
from campaign.data.workers import in_worker
from tasks.artifacts import artifact_key, workspace_campaign

if TYPE_CHECKING:  # the shard tasks run in Dask worker processes: keep the store (DuckDB, pandas) out of them
    from campaign import store


@dataclass(frozen=True)
class PrepareRecord:
    data_digest: str
    n_input: int
    n_kept: int
    n_rejected: int
    n_tokens: int
    manifest_path: str


@task(name="ensure-demo-inputs", cache_policy=None)
def ensure_demo_inputs(data: DataConfig, seed: int) -> int:
    """Write the synthetic demo corpus where `data.demo_corpus_dir` says (demo campaigns only)."""
    if data.demo_corpus_dir is None:
        return 0
    from campaign.data import write_demo_corpus

    corpus = write_demo_corpus(Path(data.demo_corpus_dir), seed=seed)
    get_run_logger().info("demo corpus written to %s", data.demo_corpus_dir)
    return len(corpus.files)


@task(name="plan-shards", cache_policy=None)
def plan_shards_task(data: DataConfig, data_dir: Path) -> InputPlan:
    start_run(data_dir)
    plan = plan_run(data)
    get_run_logger().info(
        "%d shards from %d files%s",
        len(plan.shards),
        len({s.path for s in plan.shards}),
        f"; {len(plan.problems)} unusable, named after the shards ran" if plan.problems else "",
    )
    return plan


@task(name="clean-shard", cache_policy=None, task_run_name="clean-shard-{shard.key}")
def clean_shard(shard: Shard, data: DataConfig, data_dir: Path) -> ShardSummary:
    summary = in_worker(run_shard, shard, data, work_dir_of(data_dir))
    if summary.problem:
        get_run_logger().warning("%s: %s", summary.problem["where"], summary.problem["message"])
    elif summary.reused:
        get_run_logger().info("shard %s already finished; reused", shard.key)
    return summary


@task(name="dedup", cache_policy=None)
def dedup_task(
    summaries: list[ShardSummary], data: DataConfig, data_dir: Path, planned: list[InputProblem]
) -> DedupStats:
    check_problems(summaries, planned)
    stats = in_worker(dedup_pass, summaries, data, work_dir_of(data_dir))
    get_run_logger().info(
        "dedup: %d exact duplicates, %d near duplicates in %d clusters (largest %d)",
        stats.exact_removed,
        stats.near_removed,
        stats.near_clusters,
        stats.largest_cluster,
    )
    return stats


@task(name="finalise-source", cache_policy=None, task_run_name="finalise-{name}")
def finalise_task(name: str, summaries: list[ShardSummary], data_dir: Path) -> SourceResult:
    return in_worker(finalise_source, name, summaries, data_dir)


@task(name="write-manifest", cache_policy=None)
def write_manifest_task(
    data: DataConfig,
    ws: store.Workspace,
    summaries: list[ShardSummary],
    results: list[SourceResult],
    stats: DedupStats,
) -> PrepareRecord:
    manifest = write_run_manifest(data, ws.data_dir, summaries, results, stats)
    finish_run(ws.data_dir)
    return _publish(manifest, ws)


@task(name="clean-sources", cache_policy=None)
def clean_sources(data: DataConfig, ws: store.Workspace) -> PrepareRecord:
    """The whole prepare in this one task, shards one after another (no task runner needed)."""
    return _publish(prepare_data(data, ws.data_dir), ws)


def _publish(manifest: Manifest, ws: store.Workspace) -> PrepareRecord:
    """The small record the flow passes on, the sources and removals table artifacts, one log line."""
    record = PrepareRecord(
        data_digest=manifest["data_digest"],
        n_input=manifest["totals"]["n_input"],
        n_kept=manifest["totals"]["n_kept"],
        n_rejected=manifest["totals"]["n_rejected"],
        n_tokens=manifest["totals"]["tokens_kept"],
        manifest_path=str(ws.data_dir / "manifest.json"),
    )
    create_table_artifact(
        key=artifact_key(workspace_campaign(ws.root), "prepare-sources"),
        description=f"prepared-data digest {record.data_digest[:12]}",
        table=[
            {
                "source": s["name"],
                "input": s["n_input"],
                "kept": s["n_kept"],
                "rejected": s["n_rejected"],
                "tokens": s["tokens_kept"],
                "top_reasons": ", ".join(
                    f"{r} {n}" for r, n in sorted(s["by_reason"].items(), key=lambda kv: -kv[1])[:4]
                ),
                "pii_replaced": ", ".join(f"{k} {n}" for k, n in s.get("pii_by_kind", {}).items()),
            }
            for s in manifest["sources"]
        ],
    )
    create_table_artifact(
        key=artifact_key(workspace_campaign(ws.root), "prepare-removals"),
        description=f"removed per source and reason in pipeline order ({manifest['tokenizer']}; "
        "tokens estimated where tokens_exact is false)",
        table=[dict(r) for r in manifest["removals"]]
        or [{"source": "", "step": "", "reason": "nothing removed", "docs": 0}],
    )
    get_run_logger().info(
        "prepared %s documents in, %s kept, %s rejected, %s tokens (%s); prepared-data digest %s",
        record.n_input,
        record.n_kept,
        record.n_rejected,
        record.n_tokens,
        manifest["tokenizer"],
        record.data_digest[:12],
    )
    return record


@task(name="record-dataset", cache_policy=None)
def record_dataset(ws: store.Workspace, run_id: str, manifest: Manifest) -> int:
    from campaign import store

    return store.record_dataset(ws, run_id, manifest)

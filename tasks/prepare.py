"""Prepare: clean every source, write clean and rejected Parquet and the manifest, record the dataset."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact

from campaign import store
from campaign.config import DataConfig
from campaign.data import prepare_sources, write_demo_corpus, write_prepared
from campaign.evidence import input_identities


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
    counts = write_demo_corpus(Path(data.demo_corpus_dir), seed=seed)
    get_run_logger().info("demo corpus written to %s", data.demo_corpus_dir)
    return len(counts)


@task(name="clean-sources", cache_policy=None)
def clean_sources(data: DataConfig, ws: store.Workspace) -> PrepareRecord:
    """`data` is the config's section placed in the workspace (`DataConfig.in_workspace`)."""
    inputs = input_identities(data)  # the inputs' identities go into the manifest and so into the data digest
    prepared = prepare_sources(data)
    manifest = write_prepared(prepared, ws.data_dir, data.production_digest(), inputs)
    stats = manifest["sources"]
    record = PrepareRecord(
        data_digest=manifest["data_digest"],
        n_input=manifest["totals"]["n_input"],
        n_kept=manifest["totals"]["n_kept"],
        n_rejected=manifest["totals"]["n_rejected"],
        n_tokens=manifest["totals"]["tokens_kept"],
        manifest_path=str(ws.data_dir / "manifest.json"),
    )
    create_table_artifact(key="prepare-sources", description=f"data digest {record.data_digest[:12]}", table=[
        {"source": s["name"], "input": s["n_input"], "kept": s["n_kept"], "rejected": s["n_rejected"],
         "tokens": s["tokens_kept"], "top_reasons": ", ".join(f"{r} {n}" for r, n in sorted(
             s["by_reason"].items(), key=lambda kv: -kv[1])[:4])} for s in stats])
    get_run_logger().info("prepared %s documents in, %s kept, %s rejected, %s tokens; data digest %s",
                          record.n_input, record.n_kept, record.n_rejected, record.n_tokens, record.data_digest[:12])
    return record


@task(name="record-dataset", cache_policy=None)
def record_dataset(ws: store.Workspace, run_id: str, manifest: dict) -> int:
    return store.record_dataset(ws, run_id, manifest)

"""Prepare training data: read, normalise, filter, deduplicate and count every source; write it atomically.

`prepare_sources` is pure (config in, Arrow tables and stats out). Every input record ends up in exactly
one of `clean` or `rejected` (with a reason code), so per source n_input = n_kept + n_rejected.
`write_prepared` writes clean/ and rejected/ Parquet files, then manifest.json last. Equal input gives
byte-identical files and the same data digest.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from campaign.config import CleaningConfig, DataConfig, SourceConfig
from campaign.data.dedup import EXACT_DUPLICATE, ExactDeduplicator, text_sha256
from campaign.data.filters import FILTER_REASONS, TextStats, check_document
from campaign.data.manifest import (
    CLEAN_DIR,
    MANIFEST_NAME,
    MANIFEST_VERSION,
    REJECTED_DIR,
    Manifest,
    manifest_data_digest,
    record_written,
    write_manifest,
    written_files,
)
from campaign.data.mixture import mixture_report
from campaign.data.normalise import normalise_text
from campaign.data.readers import READER_REASONS, read_source
from campaign.data.tokens import TOKENIZER_BACKEND, count_tokens_many
from campaign.files import atomic_write_parquet, sha256_file

log = logging.getLogger(__name__)

# Every reason a document can be rejected for, in the order the pipeline applies them.
REASONS: tuple[str, ...] = READER_REASONS + FILTER_REASONS + (EXACT_DUPLICATE,)

CLEAN_SCHEMA = pa.schema([
    ("doc_id", pa.string()),
    ("source", pa.string()),
    ("text", pa.string()),          # normalised text
    ("n_words", pa.int64()),        # str.split() words
    ("n_tokens", pa.int64()),       # under DataConfig.tokenizer
    ("n_bytes", pa.int64()),        # UTF-8 bytes of text
    ("text_sha256", pa.string()),
    ("file", pa.string()),          # relative to the source glob's fixed prefix
    ("line", pa.int64()),           # 1-based line (JSONL) or row (Parquet)
])

REJECTED_SCHEMA = pa.schema([
    ("doc_id", pa.string()),
    ("source", pa.string()),
    ("file", pa.string()),
    ("line", pa.int64()),
    ("reason", pa.string()),
    ("detail", pa.string()),
    ("text", pa.string()),          # as read (not normalised); "" when there was none
])


@dataclass(frozen=True)
class PreparedData:
    """Per-source clean and rejected tables and stats, in config order."""

    clean: dict[str, pa.Table]
    rejected: dict[str, pa.Table]
    stats: dict[str, dict[str, Any]]
    tokenizer: str
    weights: dict[str, float]

    def token_counts(self) -> dict[str, int]:
        return {name: int(s["tokens_kept"]) for name, s in self.stats.items()}

    def mixture(self) -> list[dict]:
        return mixture_report({k: float(v) for k, v in self.token_counts().items()}, self.weights)


def prepare_sources(data: DataConfig) -> PreparedData:
    """Read and clean every source in config order, with exact dedup across all of them.

    Raises DataError for a source whose glob matches nothing or a file that cannot be read as a whole.
    """
    dedup = ExactDeduplicator()
    clean: dict[str, pa.Table] = {}
    rejected: dict[str, pa.Table] = {}
    stats: dict[str, dict[str, Any]] = {}
    for index, source in enumerate(data.sources):
        clean[source.name], rejected[source.name], stats[source.name] = prepare_source(
            source, data.cleaning, data.tokenizer, dedup, index=index)
        s = stats[source.name]
        log.info("prepared source %s: %d in, %d kept, %d rejected %s, %d %s tokens kept", source.name,
                 s["n_input"], s["n_kept"], s["n_rejected"], s["by_reason"], s["tokens_kept"], data.tokenizer)
    return PreparedData(clean=clean, rejected=rejected, stats=stats, tokenizer=data.tokenizer,
                        weights={s.name: s.weight for s in data.sources})


def prepare_source(source: SourceConfig, cleaning: CleaningConfig, tokenizer: str,
                   dedup: ExactDeduplicator | None = None, *, index: int = 0
                   ) -> tuple[pa.Table, pa.Table, dict[str, Any]]:
    """One source: (clean table, rejected table, stats). Pass a shared `dedup` to dedup across sources."""
    dedup = dedup if dedup is not None else ExactDeduplicator()
    kept: dict[str, list] = {name: [] for name in CLEAN_SCHEMA.names if name != "n_tokens"}
    rej: dict[str, list] = {name: [] for name in REJECTED_SCHEMA.names}
    n_input = chars_in = 0
    for doc in read_source(source, index):
        n_input += 1
        chars_in += len(doc.text)
        reason, detail, text = doc.reason, doc.detail, doc.text
        if reason is None:
            text = normalise_text(doc.text)
            text_stats = TextStats(text)
            rejection = check_document(text, cleaning, text_stats)
            sha = text_sha256(text)
            if rejection is None and cleaning.exact_dedup:
                rejection = dedup.check(sha, doc.doc_id)
            if rejection is None:
                for name, value in (("doc_id", doc.doc_id), ("source", doc.source), ("text", text),
                                    ("n_words", text_stats.n_words), ("n_bytes", text_stats.n_bytes),
                                    ("text_sha256", sha), ("file", doc.file), ("line", doc.line)):
                    kept[name].append(value)
                continue
            reason, detail, text = rejection.reason, rejection.detail, doc.text
        for name, value in (("doc_id", doc.doc_id), ("source", doc.source), ("file", doc.file),
                            ("line", doc.line), ("reason", reason), ("detail", detail), ("text", text)):
            rej[name].append(value)

    kept_tokens = count_tokens_many(kept["text"], tokenizer)
    rejected_tokens = count_tokens_many(rej["text"], tokenizer)
    clean_table = pa.table({**kept, "n_tokens": kept_tokens}, schema=CLEAN_SCHEMA)
    rejected_table = pa.table(rej, schema=REJECTED_SCHEMA)

    by_reason = Counter(rej["reason"])
    tokens_by_reason: Counter[str] = Counter()
    chars_by_reason: Counter[str] = Counter()
    for reason, text, n_tokens in zip(rej["reason"], rej["text"], rejected_tokens.tolist(), strict=True):
        tokens_by_reason[reason] += n_tokens
        chars_by_reason[reason] += len(text)
    order = {reason: i for i, reason in enumerate(REASONS)}

    def ordered(counter: Counter[str]) -> dict[str, int]:
        return {r: int(counter[r]) for r in sorted(counter, key=lambda r: (order.get(r, len(order)), r))}

    stats = {
        "n_input": n_input,
        "n_kept": clean_table.num_rows,
        "n_rejected": rejected_table.num_rows,
        "by_reason": ordered(by_reason),
        "tokens_kept": int(np.sum(kept_tokens)),
        "tokens_rejected": int(np.sum(rejected_tokens)),
        "tokens_by_reason": ordered(tokens_by_reason),
        "chars_in": chars_in,
        "chars_kept": int(sum(map(len, kept["text"]))),
        "chars_by_reason": ordered(chars_by_reason),
        "bytes_kept": int(sum(kept["n_bytes"])),
        "tokenizer": tokenizer,
    }
    if stats["n_input"] != stats["n_kept"] + stats["n_rejected"]:  # a bug, not bad input
        raise AssertionError(f"source {source.name}: {n_input} in != {stats['n_kept']} kept + {stats['n_rejected']} rejected")
    return clean_table, rejected_table, stats


def write_prepared(prepared: PreparedData, data_dir: Path, production_digest: str,
                   inputs: list[dict[str, Any]] | None = None) -> Manifest:
    """Write data_dir/clean/<source>.parquet and rejected/<source>.parquet, then manifest.json last.

    An existing manifest is removed first, so a run killed part-way leaves no manifest and is redone.
    Parquet files that campaign wrote earlier for sources no longer configured (and temp files of killed
    writes) are removed, so the data digest covers exactly this run's sources; a file campaign did not write
    is never removed (the evidence check names it instead). `production_digest` is `DataConfig.production_digest()`
    and `inputs` the identities of the files read (`input_identities`); both go into the manifest and the digest.
    """
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / MANIFEST_NAME).unlink(missing_ok=True)
    owned = written_files(data_dir)
    files: list[dict[str, Any]] = []
    hashes: dict[str, str] = {}
    for kind, tables in ((CLEAN_DIR, prepared.clean), (REJECTED_DIR, prepared.rejected)):
        folder = data_dir / kind
        folder.mkdir(parents=True, exist_ok=True)
        wanted = {f"{name}.parquet" for name in tables}
        for stale in sorted(folder.iterdir()):
            name = stale.name
            if name.startswith(".") and name.endswith(".tmp"):  # a killed atomic write: ".<file>.<random>.tmp"
                name = name[1:].rsplit(".", 2)[0]
                ours = f"{kind}/{name}" in owned or name in wanted
            else:
                ours = f"{kind}/{name}" in owned and name not in wanted
            if stale.is_file() and ours:
                log.info("removing stale %s", stale)
                stale.unlink()
        record_written(data_dir, [f"{kind}/{name}" for name in sorted(wanted)])
        for name, table in tables.items():
            path = atomic_write_parquet(folder / f"{name}.parquet", table)
            sha = sha256_file(path)
            hashes[f"{kind}/{path.name}"] = sha
            files.append({"path": f"{kind}/{path.name}", "kind": kind, "source": name, "rows": table.num_rows,
                          "bytes": path.stat().st_size, "sha256": sha})
    by_path = {entry["path"]: entry for entry in files}
    mixture = prepared.mixture()
    sources = []
    for row, (name, stats) in zip(mixture, prepared.stats.items(), strict=True):
        clean_file, rejected_file = f"{CLEAN_DIR}/{name}.parquet", f"{REJECTED_DIR}/{name}.parquet"
        sources.append({"name": name, "weight": prepared.weights[name],
                        "clean_file": clean_file, "clean_sha256": by_path[clean_file]["sha256"],
                        "rejected_file": rejected_file, "rejected_sha256": by_path[rejected_file]["sha256"],
                        **stats, "share": row["share"], "planned_share": row["planned_share"],
                        "relative_gap": row["relative_gap"]})
    totals = {key: int(sum(s[key] for s in sources))
              for key in ("n_input", "n_kept", "n_rejected", "tokens_kept", "tokens_rejected", "chars_in",
                          "chars_kept")}
    manifest = Manifest(version=MANIFEST_VERSION, data_digest="", tokenizer=prepared.tokenizer,
                        tokenizer_backend=TOKENIZER_BACKEND, sources=sources, files=files, mixture=mixture,
                        totals=totals, data_config_digest=production_digest, inputs=list(inputs or []))
    manifest["data_digest"] = digest = manifest_data_digest(dict(manifest), hashes, production_digest)
    write_manifest(data_dir, manifest)
    log.info("wrote %d clean documents (%d tokens) to %s, data digest %s", totals["n_kept"],
             totals["tokens_kept"], data_dir, digest[:12])
    return manifest

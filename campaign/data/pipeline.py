"""Prepare training data at any size: shards in parallel, then global dedup passes, then one file per source.

Stages (each a plain function; `tasks/prepare.py` runs the same ones as Prefect tasks, the shard stage
mapped over shards on threads or Dask):
1. `plan_run`: find the inputs and cut them into shards; every unreadable input is reported at once.
2. `run_shard` (campaign.data.shards) per shard: read, normalise, filter, count tokens, sign; parts + marker.
   A shard that hits a file-level failure returns it; `check_problems` then reports all of them together.
3. `dedup_pass` (campaign.data.global_dedup): exact dedup on the 128-bit prefix of each kept text's sha256
   across all shards and sources (first occurrence kept, in run order: sources in config order, files sorted,
   lines in order), then MinHash LSH near-dedup (campaign.data.minhash) on DuckDB. Reads only the `sig` parts.
4. `finalise_source` per source: stream the source's shard parts into clean/<source>.parquet and
   rejected/<source>.parquet (zstd, one row group per batch), dropping what dedup removed into rejected
   with the kept document's id.
5. `write_run_manifest`: manifest.json last (its presence marks a finished prepare), with the inputs
   read (path, bytes, sha256), per-source and per-shard counts, and the removal table.

Conservation: for every shard and every source, input documents = kept + rejected (asserted; a failure
is a bug). Memory is bounded by the batch size in stages 2 and 4, and by DuckDB's memory limit in stage 3
(its per-row tables live on disk), so it does not grow with the corpus.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from campaign.config import DataConfig
from campaign.data.dedup import EXACT_DUPLICATE
from campaign.data.filters import TOO_LARGE, filter_reasons
from campaign.data.filters.decontaminate import BENCHMARK_OVERLAP_PREFIX, check_benchmarks
from campaign.data.filters.language import LANGUAGE_NOT_KEPT, known_languages
from campaign.data.filters.url_filter import URL_REASONS, load_url_rules
from campaign.data.global_dedup import DEDUP_FILE, NEAR_DUPLICATE, DedupStats, dedup_pass
from campaign.data.indexed import (
    BLEND_JSON,
    BLEND_TXT,
    TOKENIZED_DIR,
    BlendDetails,
    IndexedDatasetWriter,
    blend_entries,
    write_blend,
)
from campaign.data.inputs import InputPlan, InputProblem, Shard, plan_inputs, problems_error
from campaign.data.manifest import (
    CLEAN_DIR,
    MANIFEST_NAME,
    MANIFEST_VERSION,
    REJECTED_DIR,
    BlendEntry,
    FileEntry,
    InputEntry,
    Manifest,
    RemovalRow,
    ShardEntry,
    SourceEntry,
    TrainingShard,
    manifest_data_digest,
    record_written,
    write_manifest,
    written_files,
)
from campaign.data.mixture import mixture_report
from campaign.data.readers import READER_REASONS
from campaign.data.shards import (
    CLEAN_SCHEMA,
    KEPT,
    REJECTED,
    REJECTED_SCHEMA,
    TOKENS,
    ShardSummary,
    bound_heap_growth,
    part_batches,
    release_memory,
    run_shard,
    shard_dir,
)
from campaign.data.tokenizer import check_spec, is_estimate, load_tokenizer
from campaign.data.tokens import TOKENIZER_BACKEND
from campaign.errors import ConfigError, DataError
from campaign.files import sha256_file

log = logging.getLogger(__name__)

WORK_DIR = "_work"
# Every reason a document can be rejected for, in the order the pipeline applies them.
REASONS: tuple[str, ...] = (
    *READER_REASONS,
    TOO_LARGE,
    *URL_REASONS,
    LANGUAGE_NOT_KEPT,
    *filter_reasons()[1:],
    EXACT_DUPLICATE,
    NEAR_DUPLICATE,
)  # benchmark_overlap_<name> reasons come after the rule groups, before dedup (`_ordered`)

REMOVAL_STEPS = {
    **dict.fromkeys(READER_REASONS, "read"),
    **dict.fromkeys(URL_REASONS, "url_filter"),
    LANGUAGE_NOT_KEPT: "language",
    EXACT_DUPLICATE: "exact_dedup",
    NEAR_DUPLICATE: "near_dedup",
}


def step_of(reason: str) -> str:
    """The pipeline step a reason belongs to (read, size, gopher_repetition, gopher_quality, c4, fineweb...)."""
    if reason in REMOVAL_STEPS:
        return REMOVAL_STEPS[reason]
    if reason == "too_large":
        return "size"
    if reason.startswith("gopher_"):
        return "gopher_quality"
    if reason.startswith("c4_"):
        return "c4"
    if reason.startswith("fineweb_"):
        return "fineweb"
    if reason.startswith(BENCHMARK_OVERLAP_PREFIX):
        return "decontaminate"
    return "gopher_repetition"


def work_dir_of(data_dir: Path) -> Path:
    return Path(data_dir) / WORK_DIR


# ------------------------------------------------------------------------------------------------ stages


def plan_run(data: DataConfig) -> InputPlan:
    """The shards of every usable input and the problems of the others. Checks `data.tokenizer` first, so a
    bad one fails before any work (without building a vocabulary here: the workers do). Raises at once when a
    source matched nothing, or no input is usable: then no shard is worth running. Otherwise the usable shards
    run and `check_problems` names these problems with those found while reading, in one error."""
    check_spec(data.tokenizer)
    check_steps(data)
    plan = plan_inputs(data)
    if plan.problems and (plan.is_config_problem or not plan.shards):
        raise problems_error(plan.problems)
    return plan


def check_steps(data: DataConfig) -> None:
    """Read the block lists and evaluation files and check the language codes before any shard runs, so a bad
    one is one error naming file:line (each worker reads them again, once). Nothing here loads a model or a
    compiled kernel: the command's process stays as small as it was."""
    cleaning = data.cleaning
    if cleaning.languages.enabled:
        unknown = sorted(set(cleaning.languages.keep) - known_languages())
        if unknown:
            raise ConfigError(
                f"unknown language code(s) {', '.join(unknown)}",
                where="data.cleaning.languages.keep",
                fix=f"use ISO 639-1 codes py3langid knows: {', '.join(sorted(known_languages()))}",
            )
    if cleaning.url_filter.enabled:
        load_url_rules(cleaning.url_filter)
    if data.decontaminate.benchmarks:
        check_benchmarks(data.decontaminate)


def step_files(data: DataConfig) -> list[tuple[str, str]]:
    """(config key, path) of every block list and evaluation file the cleaning steps read."""
    url = data.cleaning.url_filter
    out = [
        (f"data.cleaning.url_filter.{key}", path)
        for key, path in (
            ("domains_file", url.domains_file),
            ("substrings_file", url.substrings_file),
            ("regexes_file", url.regexes_file),
        )
        if path
    ]
    return out + [
        (f"data.decontaminate.benchmarks[{i}].path", b.path)
        for i, b in enumerate(data.decontaminate.benchmarks)
    ]


def check_problems(summaries: Sequence[ShardSummary], planned: Sequence[InputProblem] = ()) -> None:
    """Raise one DataError listing every unusable input: those found when planning (`planned`) and every file
    that failed part-way through its shard."""
    problems = [*planned, *(InputProblem(**s.problem) for s in summaries if s.problem)]
    if problems:
        unique = list({(p.where, p.message): p for p in problems}.values())
        raise problems_error(unique)


@dataclass
class SourceResult:
    """What finalising one source produced: file entries and dedup removals by shard."""

    name: str
    files: list[FileEntry]
    dedup: dict[str, dict[str, int]]  # shard key -> {reason: docs}
    dedup_chars: dict[str, int]
    dedup_tokens: dict[str, int]
    tokens_kept: int
    chars_kept: int
    bytes_kept: int
    n_kept: int
    tokenized: TrainingShard | None = None


ROW_GROUP_ROWS = 2048
DICTIONARY_COLUMNS = ("source", "file", "reason")
ROW_GROUP_TEXT_BYTES = 8 * 2**20  # a flush holds about 4x this (concatenation, encoding, compression)


class RowGroupWriter:
    """A Parquet writer whose row groups depend only on the sequence of rows written, never on how the
    rows arrive (so the file is byte-identical however the input was sharded or batched). A row group
    closes at `ROW_GROUP_ROWS` rows or once its text reaches `ROW_GROUP_TEXT_BYTES`, bounding memory."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        # Dictionary encoding only for the columns that repeat (a distinct text or id per row would only grow
        # a dictionary until the writer falls back to plain encoding, holding the row group's pages meanwhile).
        self._writer = pq.ParquetWriter(
            path,
            schema,
            compression="zstd",
            use_dictionary=[c for c in DICTIONARY_COLUMNS if c in schema.names],
        )
        self._schema = schema
        self._pending: list[pa.Table] = []
        self._rows = 0
        self._bytes = 0

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        sizes = pc.binary_length(table.column("text")).to_numpy(zero_copy_only=False)
        start = 0
        for i, size in enumerate(sizes.tolist()):
            self._rows += 1
            self._bytes += size
            if self._rows >= ROW_GROUP_ROWS or self._bytes >= ROW_GROUP_TEXT_BYTES:
                self._pending.append(table.slice(start, i + 1 - start))
                self._flush()
                start = i + 1
        if start < table.num_rows:
            self._pending.append(table.slice(start))

    def _flush(self) -> None:
        if self._pending:
            group = pa.concat_tables(self._pending).combine_chunks()
            self._writer.write_table(group, row_group_size=group.num_rows)
        self._pending, self._rows, self._bytes = [], 0, 0

    def close(self) -> None:
        self._flush()
        self._writer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def finalise_source(source_name: str, summaries: Sequence[ShardSummary], data_dir: Path) -> SourceResult:
    """Write clean/<source>.parquet and rejected/<source>.parquet from the source's shard parts."""
    data_dir = Path(data_dir)
    work_dir = work_dir_of(data_dir)
    bound_heap_growth()
    mine = sorted((s for s in summaries if s.source == source_name), key=lambda s: s.index)
    clean_path = data_dir / CLEAN_DIR / f"{source_name}.parquet"
    rejected_path = data_dir / REJECTED_DIR / f"{source_name}.parquet"
    record_written(data_dir, [f"{CLEAN_DIR}/{clean_path.name}", f"{REJECTED_DIR}/{rejected_path.name}"])
    token_dtypes = {s.token_dtype for s in mine if s.token_dtype}
    shard_writer = None
    if token_dtypes:  # the source's training shard, from the shards' token parts in the same order
        if (
            len(token_dtypes) > 1
        ):  # shards tokenized by different vocabularies: a bug, the fingerprint holds data
            raise AssertionError(f"source {source_name}: shards wrote ids as {sorted(token_dtypes)}")
        prefix = data_dir / TOKENIZED_DIR / source_name
        record_written(data_dir, [f"{TOKENIZED_DIR}/{source_name}{ext}" for ext in (".bin", ".idx")])
        shard_writer = IndexedDatasetWriter(prefix, np.dtype(token_dtypes.pop()))
    clean_tmp = clean_path.with_name(f".{clean_path.name}.tmp")
    rejected_tmp = rejected_path.with_name(f".{rejected_path.name}.tmp")
    for p in (clean_tmp, rejected_tmp):
        p.parent.mkdir(parents=True, exist_ok=True)
    dedup_counts: dict[str, dict[str, int]] = {}
    dedup_chars: Counter[str] = Counter()
    dedup_tokens: Counter[str] = Counter()
    tokens_kept = chars_kept = bytes_kept = n_kept = 0
    with (
        RowGroupWriter(clean_tmp, CLEAN_SCHEMA) as clean_w,
        RowGroupWriter(rejected_tmp, REJECTED_SCHEMA) as rejected_w,
    ):
        for s in mine:
            folder = work_dir / "shards" / s.key
            for batch in part_batches(folder / REJECTED):
                rejected_w.write(pa.Table.from_batches([batch], REJECTED_SCHEMA))
                release_memory()
            # this shard's dedup removals, by row of its kept part (rows are unique: one removal each)
            gone = pq.read_table(work_dir / DEDUP_FILE, filters=[("shard", "=", s.index)]).sort_by("row")
            gone_rows = gone.column("row").to_numpy()
            counts: Counter[str] = Counter()
            offset = 0
            token_batches = part_batches(folder / TOKENS) if shard_writer is not None else None
            for batch in part_batches(folder / KEPT):
                table = pa.Table.from_batches([batch], CLEAN_SCHEMA)
                lo, hi = np.searchsorted(gone_rows, [offset, offset + table.num_rows])
                drop = np.zeros(table.num_rows, dtype=bool)
                drop[gone_rows[lo:hi] - offset] = True
                offset += table.num_rows
                keep_table = table.filter(pa.array(~drop)) if lo < hi else table
                if token_batches is not None and shard_writer is not None:
                    ids = next(token_batches).column(0)  # written batch by batch with the kept part
                    if len(ids) != table.num_rows:
                        raise AssertionError(f"shard {s.key}: token part out of step with the kept part")
                    if lo < hi:
                        ids = ids.filter(pa.array(~drop))
                    shard_writer.add_documents(
                        pc.list_flatten(ids).to_numpy(zero_copy_only=False),
                        pc.list_value_length(ids).to_numpy(zero_copy_only=False),
                    )
                if keep_table.num_rows:
                    clean_w.write(keep_table)
                    n_kept += keep_table.num_rows
                    tokens_kept += int(pc.sum(keep_table.column("n_tokens")).as_py() or 0)
                    bytes_kept += int(pc.sum(keep_table.column("n_bytes")).as_py() or 0)
                    chars_kept += int(pc.sum(pc.utf8_length(keep_table.column("text"))).as_py() or 0)
                if lo < hi:
                    dropped = table.filter(pa.array(drop))
                    why = gone.column("reason").slice(lo, hi - lo).combine_chunks()
                    kept_id = gone.column("kept_doc_id").slice(lo, hi - lo).combine_chunks()
                    exact = pc.equal(why, EXACT_DUPLICATE)
                    prefix = pc.if_else(exact, "same text as kept doc ", "near-duplicate of kept doc ")
                    detail = pc.binary_join_element_wise(prefix, kept_id, "")
                    text_chars = pc.utf8_length(dropped.column("text")).to_numpy(zero_copy_only=False)
                    tokens = dropped.column("n_tokens").to_numpy()
                    for reason in (EXACT_DUPLICATE, NEAR_DUPLICATE):
                        mask = pc.equal(why, reason).to_numpy(zero_copy_only=False)
                        if mask.any():
                            counts[reason] += int(mask.sum())
                            dedup_chars[reason] += int(text_chars[mask].sum())
                            dedup_tokens[reason] += int(tokens[mask].sum())
                    rejected_w.write(
                        pa.table(
                            {
                                "doc_id": dropped.column("doc_id"),
                                "source": dropped.column("source"),
                                "file": dropped.column("file"),
                                "line": dropped.column("line"),
                                "reason": why,
                                "detail": detail,
                                "text": dropped.column("text"),
                                "language": dropped.column("language"),
                                "language_score": dropped.column("language_score"),
                                "url": dropped.column("url"),
                            },
                            schema=REJECTED_SCHEMA,
                        )
                    )
                release_memory()
            dedup_counts[s.key] = dict(counts)
    files: list[FileEntry] = []
    tokenized: TrainingShard | None = None
    if shard_writer is not None:
        shard_writer.close()
        tokenized = {
            "prefix": f"{TOKENIZED_DIR}/{source_name}",
            "dtype": shard_writer.dtype.name,
            "n_documents": shard_writer.n_documents,
            "n_tokens": shard_writer.n_tokens,
        }
        for path in (shard_writer.bin_path, shard_writer.idx_path):
            files.append(
                {
                    "path": f"{TOKENIZED_DIR}/{path.name}",
                    "kind": TOKENIZED_DIR,
                    "source": source_name,
                    "rows": shard_writer.n_documents,
                    "bytes": path.stat().st_size,
                    "sha256": sha256_file(path),
                }
            )
    for kind, tmp, final in ((CLEAN_DIR, clean_tmp, clean_path), (REJECTED_DIR, rejected_tmp, rejected_path)):
        tmp.replace(final)
        files.append(
            {
                "path": f"{kind}/{final.name}",
                "kind": kind,
                "source": source_name,
                "rows": pq.ParquetFile(final).metadata.num_rows,
                "bytes": final.stat().st_size,
                "sha256": sha256_file(final),
            }
        )
    return SourceResult(
        name=source_name,
        files=files,
        dedup=dedup_counts,
        dedup_chars=dict(dedup_chars),
        dedup_tokens=dict(dedup_tokens),
        tokens_kept=tokens_kept,
        chars_kept=chars_kept,
        bytes_kept=bytes_kept,
        n_kept=n_kept,
        tokenized=tokenized,
    )


def _summed(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return dict(sorted(total.items()))


def _ordered(counter: dict[str, int]) -> dict[str, int]:
    order = {reason: i for i, reason in enumerate(REASONS)}
    overlap = order[EXACT_DUPLICATE] - 0.5  # decontamination runs after the rule groups, before dedup

    def rank(reason: str) -> tuple[float, str]:
        if reason.startswith(BENCHMARK_OVERLAP_PREFIX):
            return overlap, reason
        return order.get(reason, len(order)), reason

    return {r: int(counter[r]) for r in sorted(counter, key=rank) if counter[r]}


def write_run_manifest(
    data: DataConfig,
    data_dir: Path,
    summaries: Sequence[ShardSummary],
    results: Sequence[SourceResult],
    dedup: DedupStats,
) -> Manifest:
    """Assemble per-source stats and the removal table, check conservation, write manifest.json last."""
    data_dir = Path(data_dir)
    names = sorted({s.tokenizer for s in summaries if s.tokenizer})
    if len(names) > 1:  # workers with different library versions: the counts are not comparable
        raise DataError(
            f"shards were counted with different tokenizers: {', '.join(names)}",
            fix="install the same bpe-openai / tokenizers version on every worker, then prepare again",
        )
    tokenizer_name = names[0] if names else load_tokenizer(data.tokenizer).name
    by_source = {r.name: r for r in results}
    wanted = {f"{s.name}.parquet" for s in data.sources}
    owned = written_files(data_dir)
    for kind in (
        CLEAN_DIR,
        REJECTED_DIR,
    ):  # files of sources no longer configured, temp files of killed writes
        for stale in sorted((data_dir / kind).iterdir()):
            name = stale.name
            if name.startswith(".") and name.endswith(".tmp"):  # a killed write: ".<file>[.<random>].tmp"
                target = name[1:].split(".parquet", 1)[0] + ".parquet"
                ours = f"{kind}/{target}" in owned or target in wanted
            else:
                # campaign removes only what it wrote (data/.written.json); anything else stays, and the gates
                # name it as a file that is not in the manifest
                ours = f"{kind}/{name}" in owned and name not in wanted
            if stale.is_file() and ours:
                log.info("removing stale %s", stale)
                stale.unlink()
    _remove_stale_tokenized(data_dir, owned, results)
    sources: list[SourceEntry] = []
    files: list[FileEntry] = []
    removals: list[RemovalRow] = []
    for source in data.sources:
        result = by_source[source.name]
        mine = sorted((s for s in summaries if s.source == source.name), key=lambda s: s.index)
        by_reason: Counter[str] = Counter()
        chars_by_reason: Counter[str] = Counter()
        for s in mine:
            by_reason.update(s.by_reason)
            chars_by_reason.update(s.chars_by_reason)
        for s_key in result.dedup:
            by_reason.update(result.dedup[s_key])
        chars_by_reason.update(result.dedup_chars)
        n_input = sum(s.n_input for s in mine)
        chars_in = sum(s.chars_in for s in mine)
        # Rejected documents are not tokenized: estimated from this source's kept tokens per character;
        # dedup removals passed every rule and carry an exact count.
        per_char = (
            sum(s.tokens_kept for s in mine) / sum(s.chars_kept for s in mine)
            if sum(s.chars_kept for s in mine)
            else 0.25
        )
        tokens_by_reason = {
            r: (
                int(result.dedup_tokens.get(r, 0))
                if r in (EXACT_DUPLICATE, NEAR_DUPLICATE)
                else round(chars_by_reason[r] * per_char)
            )
            for r in by_reason
        }
        shards: list[ShardEntry] = []
        for s in mine:
            dedup_removed = sum(result.dedup.get(s.key, {}).values())
            rejected = sum(s.by_reason.values()) + dedup_removed
            kept = s.n_kept - dedup_removed
            if s.n_input != kept + rejected:  # a bug, not bad input
                raise AssertionError(f"shard {s.key}: {s.n_input} in != {kept} kept + {rejected} rejected")
            shards.append(
                {
                    "key": s.key,
                    "file": s.name,
                    "part": s.part,
                    "n_input": s.n_input,
                    "n_kept": kept,
                    "n_rejected": rejected,
                    "reused": s.reused,
                }
            )
        n_rejected = sum(by_reason.values())
        if n_input != result.n_kept + n_rejected:
            raise AssertionError(
                f"source {source.name}: {n_input} in != {result.n_kept} kept + {n_rejected} rejected"
            )
        ordered = _ordered(by_reason)
        entries = {f["kind"]: f for f in result.files}
        files += result.files
        entry: SourceEntry = {
            "name": source.name,
            "weight": source.weight,
            "clean_file": entries[CLEAN_DIR]["path"],
            "clean_sha256": entries[CLEAN_DIR]["sha256"],
            "rejected_file": entries[REJECTED_DIR]["path"],
            "rejected_sha256": entries[REJECTED_DIR]["sha256"],
            "n_input": n_input,
            "n_kept": result.n_kept,
            "n_rejected": n_rejected,
            "by_reason": ordered,
            "tokens_kept": result.tokens_kept,
            "tokens_rejected": int(sum(tokens_by_reason.values())),
            "tokens_by_reason": {r: int(tokens_by_reason[r]) for r in ordered},
            "chars_in": chars_in,
            "chars_kept": result.chars_kept,
            "chars_edited": sum(s.chars_edited for s in mine),
            "chars_by_reason": {r: int(chars_by_reason[r]) for r in ordered},
            "pii_by_kind": dict(sum((Counter(s.pii_by_kind) for s in mine), Counter())),
            "bytes_kept": result.bytes_kept,
            "tokenizer": tokenizer_name,
            "shards": shards,
        }
        skipped = _summed(s.records_skipped for s in mine)
        if skipped:  # WARC records that are not pages (warcinfo, request, metadata, revisit), by type
            entry["records_skipped"] = skipped
        if result.tokenized is not None:
            entry["tokenized"] = result.tokenized
        sources.append(entry)
        for r in ordered:
            removals.append(
                {
                    "source": source.name,
                    "step": step_of(r),
                    "reason": r,
                    "docs": ordered[r],
                    "chars": entry["chars_by_reason"][r],
                    "tokens": entry["tokens_by_reason"][r],
                    "tokens_exact": r in (EXACT_DUPLICATE, NEAR_DUPLICATE),
                }
            )
    mixture = mixture_report(
        {s["name"]: float(s["tokens_kept"]) for s in sources}, {s.name: s.weight for s in data.sources}
    )
    for row, src in zip(mixture, sources, strict=True):
        src["share"] = row["share"]
        src["planned_share"] = row["planned_share"]
        src["relative_gap"] = row["relative_gap"]
    totals = {
        "n_input": int(sum(s["n_input"] for s in sources)),
        "n_kept": int(sum(s["n_kept"] for s in sources)),
        "n_rejected": int(sum(s["n_rejected"] for s in sources)),
        "tokens_kept": int(sum(s["tokens_kept"] for s in sources)),
        "tokens_rejected": int(sum(s["tokens_rejected"] for s in sources)),
        "chars_in": int(sum(s["chars_in"] for s in sources)),
        "chars_kept": int(sum(s["chars_kept"] for s in sources)),
    }
    inputs = sorted(
        (
            InputEntry(path=s.path, source=s.source, bytes=s.file_bytes or 0, sha256=s.file_sha256)
            for s in summaries
            if s.file_sha256
        ),
        key=lambda e: (e["source"], e["path"]),
    )
    tokenized = _write_blend(data, data_dir, results, tokenizer_name, files)
    production = data.production_digest()
    near = data.cleaning.near_dedup
    manifest: Manifest = {
        "version": MANIFEST_VERSION,
        "data_digest": "",
        "data_config_digest": production,
        "tokenizer": tokenizer_name,
        "tokenizer_spec": data.tokenizer,
        "tokenizer_backend": TOKENIZER_BACKEND,
        "tokens_estimated": is_estimate(data.tokenizer),
        "rejected_tokens": "estimated for documents rejected by a reader or rule (their characters x the "
        "source's kept tokens per character); exact for exact and near duplicates",
        "inputs": inputs,
        "sources": sources,
        "files": files,
        "mixture": mixture,
        "totals": totals,
        "removals": removals,
        "near_dedup": {
            # the settings as configured (the keys of NearDedupConfig, in its order), then what they found
            "enabled": near.enabled,
            "ngram": near.ngram,
            "bands": near.bands,
            "rows": near.rows,
            "seed": near.seed,
            "source": near.source,
            "candidates": dedup.candidates,
            "removed": dedup.near_removed,
            "clusters": dedup.near_clusters,
            "largest_cluster": dedup.largest_cluster,
            "library": "rensa RMinHash",
        },
        "shards": len(summaries),
        "step_files": [
            {"key": key, "path": path, "sha256": sha256_file(Path(path))} for key, path in step_files(data)
        ],
    }
    if tokenized is not None:
        manifest["tokenized"] = tokenized
    # The data digest covers the manifest, every file it lists and the data: section (campaign/evidence.py).
    manifest["data_digest"] = digest = manifest_data_digest(
        manifest, {f["path"]: f["sha256"] for f in files}, production
    )
    write_manifest(data_dir, manifest)
    log.info(
        "wrote %d clean documents (%d tokens) to %s, prepared-data digest %s",
        totals["n_kept"],
        totals["tokens_kept"],
        data_dir,
        digest[:12],
    )
    return manifest


def _write_blend(
    data: DataConfig,
    data_dir: Path,
    results: Sequence[SourceResult],
    tokenizer_name: str,
    files: list[FileEntry],
) -> BlendEntry | None:
    """With training shards: the blend files (weights as configured), listed in `files`; their summary."""
    shards = {r.name: r.tokenized for r in results if r.tokenized is not None}
    if not shards:
        return None
    entries = blend_entries([(s.name, s.weight) for s in data.sources])
    tokenizer = load_tokenizer(data.tokenizer)
    details: BlendDetails = {
        "append_eod": True,
        "eod_id": int(tokenizer.eot_id),
        "n_vocab": int(tokenizer.n_vocab),
        "tokenizer": tokenizer_name,
        "sources": [
            {
                "name": s.name,
                "weight": s.weight,
                "prefix": shards[s.name]["prefix"],
                "dtype": shards[s.name]["dtype"],
                "n_documents": shards[s.name]["n_documents"],
                "n_tokens": shards[s.name]["n_tokens"],
            }
            for s in data.sources
        ],
    }
    record_written(data_dir, [f"{TOKENIZED_DIR}/{BLEND_TXT}", f"{TOKENIZED_DIR}/{BLEND_JSON}"])
    for path in write_blend(data_dir, entries, details):
        files.append(
            {
                "path": f"{TOKENIZED_DIR}/{path.name}",
                "kind": TOKENIZED_DIR,
                "source": "",
                "rows": len(entries),
                "bytes": path.stat().st_size,
                "sha256": sha256_file(path),
            }
        )
    return {
        "blend": f"{TOKENIZED_DIR}/{BLEND_TXT}",
        "blend_json": f"{TOKENIZED_DIR}/{BLEND_JSON}",
        "format": "megatron-core IndexedDataset",
        "append_eod": True,
        "eod_id": details["eod_id"],
        "data_path": [x for weight, prefix in entries for x in (weight, prefix)],
    }


def _remove_stale_tokenized(data_dir: Path, owned: set[str], results: Sequence[SourceResult]) -> None:
    """Remove what campaign wrote in tokenized/ earlier and this run does not list (a source no longer configured,
    shards turned off, a killed write's temporary file); anything else there stays."""
    folder = data_dir / TOKENIZED_DIR
    if not folder.is_dir():
        return
    keep = {f["path"] for r in results for f in r.files if f["kind"] == TOKENIZED_DIR}
    if any(r.tokenized is not None for r in results):
        keep |= {f"{TOKENIZED_DIR}/{BLEND_TXT}", f"{TOKENIZED_DIR}/{BLEND_JSON}"}
    for stale in sorted(folder.iterdir()):
        rel = f"{TOKENIZED_DIR}/{stale.name}"
        target = rel
        if stale.name.startswith(".") and stale.name.endswith(".tmp"):  # ".<file>[.<random>].tmp"
            base = stale.name[1:-4]
            target = f"{TOKENIZED_DIR}/" + next(
                (
                    base[: base.index(ext) + len(ext)]
                    for ext in (".bin", ".idx", ".txt", ".json")
                    if ext in base
                ),
                base,
            )
        if stale.is_file() and target in owned and (rel != target or rel not in keep):
            log.info("removing stale %s", stale)
            stale.unlink()


def start_run(data_dir: Path) -> None:
    """Remove the manifest first, so a run killed part-way leaves no manifest and is redone."""
    (Path(data_dir) / MANIFEST_NAME).unlink(missing_ok=True)


def finish_run(data_dir: Path) -> None:
    """Remove the shard work folder after a finished run (its parts are now in clean/ and rejected/)."""
    shutil.rmtree(work_dir_of(data_dir), ignore_errors=True)


MapFn = Callable[[Callable[[Shard], ShardSummary], Iterable[Shard]], Iterable[ShardSummary]]


def prepare_data(
    data: DataConfig, data_dir: Path, *, map_shards: MapFn = map, keep_work: bool = False
) -> Manifest:
    """All stages in one process (tests, benchmarks): plan, shards, dedup, finalise, manifest."""
    data_dir = Path(data_dir)
    start_run(data_dir)
    plan = plan_run(data)
    work_dir = work_dir_of(data_dir)
    summaries = list(map_shards(lambda shard: run_shard(shard, data, work_dir), plan.shards))
    check_problems(summaries, plan.problems)
    stats = dedup_pass(summaries, data, work_dir)
    results = [finalise_source(s.name, summaries, data_dir) for s in data.sources]
    manifest = write_run_manifest(data, data_dir, summaries, results, stats)
    if not keep_work:
        finish_run(data_dir)
    return manifest


def removal_table(manifest: Manifest) -> list[RemovalRow]:
    """The removal rows of a manifest (source, step, reason, docs, chars, tokens) in pipeline order."""
    return list(manifest.get("removals", []))


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


__all__ = [
    "CLEAN_SCHEMA",
    "EXACT_DUPLICATE",
    "NEAR_DUPLICATE",
    "REASONS",
    "REJECTED_SCHEMA",
    "DedupStats",
    "SourceResult",
    "check_problems",
    "dedup_pass",
    "finalise_source",
    "finish_run",
    "plan_run",
    "prepare_data",
    "removal_table",
    "shard_dir",
    "start_run",
    "step_of",
    "write_run_manifest",
]

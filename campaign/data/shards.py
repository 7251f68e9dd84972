"""Process one shard: read in bounded batches, normalise, filter, count tokens, sign; write parts and a marker.

A shard writes into its own folder of the run's work directory:
- `kept.arrow`: documents that passed every rule (CLEAN_SCHEMA), one record batch per batch;
- `rejected.arrow`: documents a reader or rule rejected (REJECTED_SCHEMA);
- `tokens.arrow` (with `data.training_shards`): per kept row, its token ids closed by the end-of-document id,
  for the training shards (campaign.data.indexed);
- `sig.arrow`: per kept row, what the global dedup passes need (doc id, 128-bit text hash, one column per
  LSH band);
- `done.json`, written last: the completion marker, holding the shard's counts and a fingerprint of
  everything its output depends on (the `data:` config, the shard's place in its file, the file's size and
  modification time, `PIPELINE_VERSION`). A shard whose marker matches is not run again, so a killed
  prepare redoes only unfinished shards; the parts are deterministic, so the end result is byte-identical.

Memory is bounded by the batch, `data.batch_docs` documents or `BATCH_CHARS` characters of text, whichever
comes first (plus the Parquet writers' row-group buffers), not by the size of the shard or corpus; after each
batch the C heap's free memory goes back to the system (`release_memory`). Tokens are counted exactly for
every document that passed the rules (so also for those dedup removes later); rejected documents are not
tokenized (the manifest estimates them).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from campaign.config import DataConfig
from campaign.data.filters import GOPHER_SHORT_DOC, TOO_LARGE, Rejection, TextStats, filter_batch
from campaign.data.filters.decontaminate import BenchmarkIndex, find_overlaps, load_benchmarks
from campaign.data.filters.language import check_language, identify_prefixes
from campaign.data.filters.pii import PII_KINDS, redact_pii
from campaign.data.filters.url_filter import UrlRules, check_url, load_url_rules
from campaign.data.indexed import token_dtype
from campaign.data.inputs import Shard
from campaign.data.minhash import band_keys, signatures
from campaign.data.normalise import normalise_texts
from campaign.data.readers import FileDigest, RawDocument, read_shard
from campaign.data.tokenizer import load_tokenizer
from campaign.errors import DataError
from campaign.files import atomic_write_json

# A batch also ends at this many characters of text: its temporaries (Arrow copies, word and n-gram ids, the
# tokenizer's and Parquet writer's buffers) take 5-10 bytes per character at their peak.
BATCH_CHARS = 1_000_000
PIPELINE_VERSION = 7  # bump when a change alters what a shard writes for the same input and config
# The parts are temporary (read once by the dedup pass and finalise, then deleted), so they are Arrow IPC files
# without compression: writing and reading one back is a copy (a 45 MB part: 0.03 CPU-seconds, against 0.20-0.26 s
# as LZ4 Parquet and more as zstd; measured). Their size on disk is about the text's. The final files stay zstd
# Parquet.
MARKER = "done.json"
KEPT = "kept.arrow"
REJECTED = "rejected.arrow"
SIG = "sig.arrow"
TOKENS = "tokens.arrow"
TOKENS_SCHEMA = pa.schema([("ids", pa.list_(pa.uint32()))])  # a document's ids, end-of-document id last

CLEAN_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("text", pa.string()),  # normalised text (after C4 line edits when C4 is on)
        ("n_words", pa.int64()),  # str.split() words
        ("n_tokens", pa.int64()),  # under DataConfig.tokenizer
        ("n_bytes", pa.int64()),  # UTF-8 bytes of text
        ("text_sha256", pa.string()),
        ("file", pa.string()),  # relative to the source glob's fixed prefix
        ("line", pa.int64()),  # 1-based line (JSONL), row (Parquet) or record (WARC)
        ("language", pa.string()),  # most likely language (null when cleaning.languages is off)
        ("language_score", pa.float32()),  # its probability
        ("url", pa.string()),  # the page's URL (WARC, or the source's url_field), else null
    ]
)

REJECTED_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("file", pa.string()),
        ("line", pa.int64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("text", pa.string()),  # as read for reader and rule rejections ("" when there was none);
        # normalised for duplicates (what was compared)
        ("language", pa.string()),  # null when not identified (language ID off, rejected before it)
        ("language_score", pa.float32()),
        ("url", pa.string()),
    ]
)


def sig_schema(bands: int) -> pa.Schema:
    """One column per LSH band, so the dedup pass can read one band of every shard at a time."""
    return pa.schema(
        [
            ("doc_id", pa.string()),
            ("key_hi", pa.uint64()),  # first 16 bytes of the text's sha256: the exact-dedup key
            ("key_lo", pa.uint64()),
            ("has_sig", pa.bool_()),
            *[(band_column(b), pa.uint64()) for b in range(bands)],
        ]
    )


def band_column(band: int) -> str:
    return f"band_{band}"


@dataclass
class ShardSummary:
    """What a finished shard reports (also stored in its marker)."""

    key: str
    index: int
    source: str
    path: str
    name: str
    part: int
    n_input: int = 0
    n_kept: int = 0
    chars_in: int = 0
    chars_kept: int = 0
    chars_edited: int = 0
    tokens_kept: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    chars_by_reason: dict[str, int] = field(default_factory=dict)
    pii_by_kind: dict[str, int] = field(default_factory=dict)  # PII replacements in kept text
    file_bytes: int | None = None  # raw bytes of the whole file, when this shard hashed it
    file_sha256: str | None = None
    problem: dict[str, str] | None = None  # a whole-file failure: where, message, fix
    tokenizer: str = ""  # the tokenizer's name with its library version, as the worker loaded it
    records_skipped: dict[str, int] = field(default_factory=dict)  # WARC records that are not pages, by type
    token_dtype: str = ""  # the training shards' id dtype, when this shard wrote token ids (`TOKENS`)
    reused: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "reused"}


def shard_fingerprint(shard: Shard, data: DataConfig) -> str:
    """What a shard's output depends on: the data config (minus the demo folder), the shard, the file's stat."""
    try:
        st = os.stat(shard.path)
        stat = [st.st_size, st.st_mtime_ns]
    except OSError:
        stat = None
    cfg = data.model_dump(mode="json", exclude={"demo_corpus_dir"})
    blob = json.dumps(
        {
            "v": PIPELINE_VERSION,
            "data": cfg,
            "shard": shard.to_dict(),
            "stat": stat,
            "rule_files": rule_file_stamps(data),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def rule_file_stamps(data: DataConfig) -> list[tuple[str, list[int] | None]]:
    """(path, [size, mtime]) of the block lists and evaluation files: a changed file redoes every shard."""
    url = data.cleaning.url_filter
    paths = [p for p in (url.domains_file, url.substrings_file, url.regexes_file) if p]
    paths += [b.path for b in data.decontaminate.benchmarks]
    stamps: list[tuple[str, list[int] | None]] = []
    for path in paths:
        try:
            st = os.stat(path)
            stamps.append((path, [st.st_size, st.st_mtime_ns]))
        except OSError:
            stamps.append((path, None))
    return stamps


def shard_dir(work_dir: Path, shard: Shard) -> Path:
    return Path(work_dir) / "shards" / shard.key


def finished_summary(shard: Shard, data: DataConfig, work_dir: Path) -> ShardSummary | None:
    """The summary of a shard finished earlier with the same fingerprint, or None."""
    folder = shard_dir(work_dir, shard)
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if marker.get("fingerprint") != shard_fingerprint(shard, data):
        return None
    if not all((folder / name).is_file() for name in part_names(data)):
        return None
    summary = ShardSummary(**marker["summary"])
    summary.reused = True
    return summary


def part_names(data: DataConfig) -> tuple[str, ...]:
    """The parts a shard writes under this config."""
    return (KEPT, REJECTED, SIG, TOKENS) if data.training_shards else (KEPT, REJECTED, SIG)


def run_shard(shard: Shard, data: DataConfig, work_dir: Path) -> ShardSummary:
    """Process one shard (or reuse its finished output). A whole-file failure is returned as `problem`."""
    done = finished_summary(shard, data, work_dir)
    if done is not None:
        return done
    folder = shard_dir(work_dir, shard)
    if folder.exists():
        shutil.rmtree(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    summary = ShardSummary(
        key=shard.key,
        index=shard.index,
        source=shard.source,
        path=shard.path,
        name=shard.name,
        part=shard.part,
    )
    try:
        _process(shard, data, tmp, summary)
    except DataError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        summary.problem = {"where": err.where or shard.path, "message": err.message, "fix": err.fix or ""}
        return summary
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_json(
        tmp / MARKER, {"fingerprint": shard_fingerprint(shard, data), "summary": summary.to_dict()}
    )
    os.replace(tmp, folder)
    return summary


def _process(shard: Shard, data: DataConfig, out: Path, summary: ShardSummary) -> None:
    source = data.sources[shard.source_index]
    cleaning = data.cleaning
    near = cleaning.near_dedup
    tokenizer = load_tokenizer(data.tokenizer)
    summary.tokenizer = tokenizer.name
    digest = FileDigest()
    by_reason: Counter[str] = Counter()
    chars_by_reason: Counter[str] = Counter()
    pii: Counter[str] = Counter()
    steps = Steps.load(data)
    writers = {
        KEPT: PartWriter(out / KEPT, CLEAN_SCHEMA),
        REJECTED: PartWriter(out / REJECTED, REJECTED_SCHEMA),
        SIG: PartWriter(out / SIG, sig_schema(near.bands)),
    }
    if data.training_shards:
        writers[TOKENS] = PartWriter(out / TOKENS, TOKENS_SCHEMA)
        summary.token_dtype = token_dtype(tokenizer.n_vocab).name
    try:
        batch: list[RawDocument] = []
        chars = 0
        records = read_shard(
            shard, source, shard.source_index, max_record_bytes=cleaning.max_record_bytes, digest=digest
        )
        for doc in records:
            batch.append(doc)
            chars += len(doc.text)
            if len(batch) >= data.batch_docs or chars >= BATCH_CHARS:
                _batch(batch, data, steps, tokenizer, writers, summary, by_reason, chars_by_reason, pii)
                batch, chars = [], 0
                release_memory()
        if batch:
            _batch(batch, data, steps, tokenizer, writers, summary, by_reason, chars_by_reason, pii)
    finally:
        for writer in writers.values():
            writer.close()
    summary.by_reason = dict(sorted(by_reason.items()))
    summary.chars_by_reason = dict(sorted(chars_by_reason.items()))
    summary.pii_by_kind = {kind: pii[kind] for kind in PII_KINDS if pii[kind]}
    summary.records_skipped = dict(sorted(digest.skipped.items()))
    if digest.sha256 is not None:
        summary.file_bytes, summary.file_sha256 = digest.bytes, digest.sha256


class PartWriter:
    """A shard part: an Arrow IPC file, one record batch per `write_table` chunk, uncompressed."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self._sink = pa.OSFile(str(path), "wb")
        self._writer = pa.ipc.new_file(self._sink, schema)

    def write_table(self, table: pa.Table) -> None:
        self._writer.write_table(table)

    def close(self) -> None:
        self._writer.close()
        self._sink.close()


def part_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """The record batches of a part, one at a time (read into memory, not mapped: a batch is freed once used)."""
    with pa.OSFile(str(path), "rb") as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


def part_column(path: Path, name: str) -> np.ndarray:
    """One column of a part as NumPy (memory-mapped: only that column's pages are read)."""
    with pa.memory_map(str(path), "r") as source:
        table = pa.ipc.open_file(source).read_all()
        return table.column(name).to_numpy().copy()


def part_select(path: Path, name: str, mask_of) -> tuple[np.ndarray, np.ndarray]:
    """(values, row numbers) of the rows of one column of a part that `mask_of(values)` selects, copied out of the
    memory map; the column is never copied whole."""
    with pa.memory_map(str(path), "r") as source:
        column = pa.ipc.open_file(source).read_all().column(name)
        values = column.to_numpy() if column.num_chunks != 1 else column.chunk(0).to_numpy()
        rows = np.flatnonzero(mask_of(values))
        return values[rows], rows


def part_take(path: Path, name: str, rows: np.ndarray) -> pa.Array:
    """Rows `rows` of one column of a part (a copy: `take` builds new buffers before the map is closed)."""
    with pa.memory_map(str(path), "r") as source:
        column = pa.ipc.open_file(source).read_all().column(name)
        return column.take(pa.array(rows, pa.int64())).combine_chunks()


def part_rows(path: Path) -> int:
    with pa.memory_map(str(path), "r") as source:
        reader = pa.ipc.open_file(source)
        return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))


RELEASE_FREE_BYTES = (
    32 * 2**20
)  # free heap a process may keep between batches (64 MB: ~35 MB more peak per tree)


def release_memory(keep: int = RELEASE_FREE_BYTES) -> None:
    """Give the C heap's free memory back to the system after a batch once it exceeds `keep` bytes (glibc's
    `mallinfo2` and `malloc_trim`; nothing elsewhere): a batch's NumPy and Arrow temporaries would otherwise stay
    in the process's resident memory. Not after every batch: trimming returns pages the next batch faults back in
    (on 256 MB, trimming every batch cost ~1.1 of ~25 CPU-seconds, mostly system time)."""
    libc = _libc()
    if libc is None:
        return
    if keep > 0 and _heap_free(libc) <= keep:
        return
    libc.malloc_trim(0)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _heap_free(libc) -> int:
    """Free bytes held in the heap (glibc >= 2.33's mallinfo2; without it, as if always over the limit)."""
    try:
        info = libc.mallinfo2
    except AttributeError:
        return 1 << 62
    info.restype = _MallInfo2
    return int(info().fordblks)


def bound_heap_growth(threshold: int = 4 * 2**20) -> None:
    """Serve allocations of `threshold` bytes or more with their own memory maps, returned when freed (glibc's
    `mallopt(M_MMAP_THRESHOLD)`; nothing elsewhere). glibc raises that threshold after each large free, so a
    step that allocates and frees many multi-megabyte buffers (finalise's row groups) otherwise keeps them in
    its heap: measured on a 256 MB corpus, finalise's peak fell from 341 to 292 MB at the same CPU time. Not
    used for the shards, where it cost CPU (page faults) and saved nothing."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(-3, threshold)  # M_MMAP_THRESHOLD


@functools.cache
def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - glibc only
        return libc
    except (OSError, AttributeError):
        return None


def utf8_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class Steps:
    """The block lists and evaluation n-grams a shard's steps read, loaded once per worker process."""

    url_rules: UrlRules | None
    benchmarks: BenchmarkIndex | None

    @classmethod
    def load(cls, data: DataConfig) -> Steps:
        cleaning = data.cleaning
        return cls(
            url_rules=load_url_rules(cleaning.url_filter) if cleaning.url_filter.enabled else None,
            benchmarks=load_benchmarks(data.decontaminate) if data.decontaminate.benchmarks else None,
        )


def _batch(
    batch: list[RawDocument],
    data: DataConfig,
    steps: Steps,
    tokenizer,
    writers: dict[str, PartWriter],
    summary: ShardSummary,
    by_reason: Counter[str],
    chars_by_reason: Counter[str],
    pii: Counter[str],
) -> None:
    """The steps in pipeline order: reader reasons, size cap, URL block lists, language, the quality rule groups,
    benchmark decontamination; then PII redaction of the kept text. A document stops at its first rejection."""
    cleaning = data.cleaning
    kept: dict[str, list] = {name: [] for name in CLEAN_SCHEMA.names if name != "n_tokens"}
    rej: dict[str, list] = {name: [] for name in REJECTED_SCHEMA.names}
    # The size cap applies to the document as read (its UTF-8 bytes), before normalisation: an oversized record
    # (megabytes of one changelog) costs neither normalising nor the rules, and never sits in a batch's copies.
    cap = cleaning.max_doc_bytes
    early: dict[int, Rejection] = {}
    for i, doc in enumerate(batch):
        if doc.reason is None and len(doc.text) * 4 > cap and (size := utf8_bytes(doc.text)) > cap:
            early[i] = Rejection(TOO_LARGE, f"{size:,} bytes as read > max_doc_bytes {cap:,}")
        elif doc.reason is None and steps.url_rules is not None:
            rejection = check_url(doc.url, steps.url_rules)
            if rejection is not None:
                early[i] = rejection
    readable = [i for i, doc in enumerate(batch) if doc.reason is None and i not in early]
    texts = normalise_texts([batch[i].text for i in readable])
    outcome: dict[int, tuple[str, Rejection | None, TextStats | None, int]] = {}
    language: dict[int, tuple[str, float]] = {}
    if cleaning.languages.enabled:
        langs, scores = identify_prefixes(texts, cleaning.languages.prefix_chars)
        alive = []
        for k, i in enumerate(readable):
            language[i] = (langs[k], float(scores[k]))
            rejection = check_language(langs[k], float(scores[k]), cleaning.languages)
            if rejection is not None:
                outcome[i] = (texts[k], rejection, None, 0)
            else:
                alive.append(k)
    else:
        alive = list(range(len(readable)))
    results = filter_batch([texts[k] for k in alive], cleaning)
    passed = [(readable[k], r) for k, r in zip(alive, results, strict=True) if r.rejection is None]
    for k, r in zip(alive, results, strict=True):
        if r.rejection is not None:
            outcome[readable[k]] = (r.text, r.rejection, r.stats, 0)
    overlaps: list[Rejection | None] = (
        find_overlaps([r.text for _, r in passed], steps.benchmarks)
        if steps.benchmarks is not None
        else [None] * len(passed)
    )
    for (i, r), overlap in zip(passed, overlaps, strict=True):
        text, stats = r.text, r.stats
        if overlap is None and cleaning.pii.enabled:
            redacted, found = redact_pii(text, cleaning.pii)
            if found:
                pii.update(found)
                text, stats = redacted, TextStats(redacted)
                # a placeholder can stand for several words: the kept text must still meet Gopher's length bound
                if cleaning.gopher_quality and stats.n_words < cleaning.min_words:
                    overlap = Rejection(
                        GOPHER_SHORT_DOC,
                        f"{stats.n_words} words after PII redaction < min_words {cleaning.min_words}",
                    )
        outcome[i] = (text, overlap, stats, r.chars_edited)
    for i, doc in enumerate(batch):
        summary.n_input += 1
        summary.chars_in += len(doc.text)
        reason, detail = doc.reason, doc.detail
        lang, score = language.get(i, (None, None))
        if i in early:
            reason, detail = early[i]
        elif reason is None:
            text, rejection, kept_stats, chars_edited = outcome[i]
            if rejection is None:
                assert kept_stats is not None  # a kept document went through the rule groups
                summary.chars_edited += chars_edited
                for name, value in (
                    ("doc_id", doc.doc_id),
                    ("source", doc.source),
                    ("text", text),
                    ("n_words", kept_stats.n_words),
                    ("n_bytes", kept_stats.n_bytes),
                    ("text_sha256", hashlib.sha256(text.encode("utf-8")).hexdigest()),
                    ("file", doc.file),
                    ("line", doc.line),
                    ("language", lang),
                    ("language_score", score),
                    ("url", doc.url if isinstance(doc.url, str) else None),
                ):
                    kept[name].append(value)
                continue
            reason, detail = rejection
        by_reason[reason] += 1
        chars_by_reason[reason] += len(doc.text)
        for name, value in (
            ("doc_id", doc.doc_id),
            ("source", doc.source),
            ("file", doc.file),
            ("line", doc.line),
            ("reason", reason),
            ("detail", detail),
            ("text", doc.text),
            ("language", lang),
            ("language_score", score),
            ("url", doc.url if isinstance(doc.url, str) else None),
        ):
            rej[name].append(value)
    if rej["doc_id"]:
        writers[REJECTED].write_table(pa.table(rej, schema=REJECTED_SCHEMA))
    texts = kept["text"]
    if not texts:
        return
    if TOKENS in writers:  # ids for the training shards; their lengths are the counts
        encoded = tokenizer.encode_many(texts)
        n_tokens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
        np.cumsum(n_tokens + 1, out=offsets[1:])
        eot = (tokenizer.eot_id,)
        flat = np.fromiter(
            chain.from_iterable(chain(ids, eot) for ids in encoded), dtype=np.uint32, count=int(offsets[-1])
        )
        del encoded
        ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))
        writers[TOKENS].write_table(pa.table({"ids": ids}, schema=TOKENS_SCHEMA))
    else:
        n_tokens = np.asarray(tokenizer.count_many(texts), dtype=np.int64)
    writers[KEPT].write_table(pa.table({**kept, "n_tokens": n_tokens}, schema=CLEAN_SCHEMA))
    summary.n_kept += len(texts)
    summary.chars_kept += sum(map(len, texts))
    summary.tokens_kept += int(n_tokens.sum())
    keys = (
        np.array([bytes.fromhex(h[:32]) for h in kept["text_sha256"]], dtype="S16").view(">u8").reshape(-1, 2)
    )
    near = cleaning.near_dedup
    if near.enabled:
        sig, has = signatures(texts, ngram=near.ngram, num_perm=near.bands * near.rows, seed=near.seed)
        bands = band_keys(sig, near.bands, near.rows)
    else:
        has = np.zeros(len(texts), dtype=bool)
        bands = np.zeros((len(texts), near.bands), dtype=np.uint64)
    writers[SIG].write_table(
        pa.table(
            {
                "doc_id": kept["doc_id"],
                "key_hi": keys[:, 0].astype(np.uint64),
                "key_lo": keys[:, 1].astype(np.uint64),
                "has_sig": has,
                **{band_column(b): bands[:, b] for b in range(near.bands)},
            },
            schema=sig_schema(near.bands),
        )
    )

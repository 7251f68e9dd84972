"""The data manifest: which files a prepare run wrote, their hashes, its inputs, and the data digest.

`manifest.json` is written last by `write_run_manifest`, so its presence marks a finished prepare. The data digest
(`manifest_data_digest`) covers everything a data gate reads: the manifest itself (its inputs with their sha256,
the production digest of the `data:` section, the per-source figures), every clean and rejected file it lists,
and the `data:` section of the config that judges it. `.written.json` lists every file campaign ever wrote in the
data folder, so a cleanup removes only those.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import NotRequired, TypedDict, cast

from campaign.errors import DataError
from campaign.files import atomic_write_json

MANIFEST_NAME = "manifest.json"
CLEAN_DIR = "clean"
REJECTED_DIR = "rejected"
MANIFEST_VERSION = 2


class FileEntry(TypedDict):
    """One file prepare wrote, relative to the data folder: a source's clean or rejected Parquet, a training
    shard's .bin/.idx (kind "tokenized"), or the blend files (source "")."""

    path: str
    kind: str
    source: str
    rows: int
    bytes: int
    sha256: str


class InputEntry(TypedDict):
    """One input file read: its absolute path, its source, and the size and sha256 of its raw bytes."""

    path: str
    source: str
    bytes: int
    sha256: str


class RemovalRow(TypedDict):
    """Documents one rule removed from one source, in pipeline order; `tokens_exact` is False where the rejected
    documents' tokens were estimated."""

    source: str
    step: str
    reason: str
    docs: int
    chars: int
    tokens: int
    tokens_exact: bool


class StepFileEntry(TypedDict):
    """A file a cleaning step read (a URL block list, an evaluation set): its config key, path and sha256."""

    key: str
    path: str
    sha256: str


class ShardEntry(TypedDict):
    """One shard of a source: its documents in, kept and rejected (`reused`: a resumed prepare kept its parts)."""

    key: str
    file: str
    part: int
    n_input: int
    n_kept: int
    n_rejected: int
    reused: bool


class TrainingShard(TypedDict):
    """A source's training shard (`data.training_shards`): its .bin/.idx prefix, id dtype, documents and tokens
    (with the end-of-document ids)."""

    prefix: str
    dtype: str
    n_documents: int
    n_tokens: int


class SourceEntry(TypedDict):
    """One source as prepared: its files, the stats of its shards summed, and its token share against its weight."""

    name: str
    weight: float
    clean_file: str
    clean_sha256: str
    rejected_file: str
    rejected_sha256: str
    n_input: int
    n_kept: int
    n_rejected: int
    by_reason: dict[str, int]  # documents rejected per reason, in pipeline order
    tokens_kept: int
    tokens_rejected: int
    tokens_by_reason: dict[str, int]
    chars_in: int
    chars_kept: int
    chars_edited: int
    chars_by_reason: dict[str, int]
    pii_by_kind: dict[str, int]
    bytes_kept: int
    tokenizer: str
    shards: list[ShardEntry]
    records_skipped: NotRequired[dict[str, int]]  # WARC records that are not pages, by type
    tokenized: NotRequired[TrainingShard]
    # `mixture_report`'s figures for this source, added once every source is counted
    share: NotRequired[float]
    planned_share: NotRequired[float]
    relative_gap: NotRequired[float | None]


class MixtureEntry(TypedDict):
    """A `mixture_report` row: a source's tokens, its share of all tokens and its planned share (the weights
    normalised); `relative_gap` is None where the planned share is 0."""

    source: str
    tokens: float
    share: float
    planned_share: float
    relative_gap: float | None


class NearDedupEntry(TypedDict):
    """The near-dedup settings (`data.cleaning.near_dedup`, as configured) and what they found."""

    enabled: bool
    ngram: int
    bands: int
    rows: int
    seed: int
    source: str | None
    candidates: int
    removed: int
    clusters: int
    largest_cluster: int
    library: str


class BlendEntry(TypedDict):
    """The training shards' blend: its files and Megatron's `--data-path` list (weight, prefix, ...)."""

    blend: str
    blend_json: str
    format: str
    append_eod: bool
    eod_id: int
    data_path: list[float | str]


class Manifest(TypedDict):
    """What `data/manifest.json` holds (a plain dict at run time, as JSON gives it back).

    sources: one dict per source in config order: name, weight, clean_file / rejected_file (relative to the
    data folder), clean_sha256 / rejected_sha256, and the stats of `prepare_source` (n_input, n_kept,
    n_rejected, by_reason, tokens_kept, tokens_rejected, tokens_by_reason, chars_in, chars_kept,
    chars_by_reason, bytes_kept), plus share / planned_share / relative_gap of tokens against weights.
    files: one dict per Parquet file: path, kind ("clean" or "rejected"), source, rows, bytes, sha256.
    mixture: `mixture_report` rows. totals: sums over sources.
    inputs: one dict per input file read: absolute path, source, bytes, sha256 of the raw bytes (hashed while
    reading). tokenizer: the tokenizer's name with its library version; tokens_estimated says whether the
    counts come from an estimate; rejected_tokens says how rejected documents' tokens were obtained.
    removals: per source and reason in pipeline order (step, reason, docs, chars, tokens, tokens_exact).
    tokenized (with `data.training_shards`): the blend file and Megatron's `--data-path` list; each source then
    has `tokenized` (prefix, dtype, n_documents, n_tokens) and `files` lists its .bin/.idx (kind "tokenized").
    Each source also lists its shards with n_input = n_kept + n_rejected. No timestamps, so equal inputs
    in the same place give an identical manifest.
    """

    version: int
    data_digest: str
    tokenizer: str
    tokenizer_backend: str
    sources: list[SourceEntry]
    files: list[FileEntry]
    mixture: list[MixtureEntry]
    totals: dict[str, int]
    data_config_digest: str  # DataConfig.production_digest() of the section that produced this data
    inputs: list[InputEntry]
    tokenizer_spec: str  # the config's data.tokenizer
    tokens_estimated: bool
    rejected_tokens: str  # how rejected documents' tokens were obtained
    removals: list[RemovalRow]
    near_dedup: NearDedupEntry
    shards: int
    # the URL block lists and evaluation files the steps read: config key, absolute path, sha256 (in the digest)
    step_files: NotRequired[list[StepFileEntry]]
    tokenized: NotRequired[BlendEntry]  # the training shards' blend (data.training_shards)


WRITTEN_LEDGER = ".written.json"


def manifest_data_digest(manifest: Manifest, file_hashes: dict[str, str], production_digest: str) -> str:
    """The data digest: sha256 over the canonical manifest (without its own `data_digest`), the sha256 of every
    file it lists as read now ({relative path: sha256}) and the production digest of the judging `data:` section."""
    body = {k: v for k, v in manifest.items() if k != "data_digest"}
    # Run history is not data: whether a shard was reused by a resumed prepare must not change the digest.
    body["sources"] = [
        {
            **src,
            "shards": [{k: v for k, v in shard.items() if k != "reused"} for shard in src.get("shards", [])],
        }
        if isinstance(src, dict)
        else src
        for src in manifest.get("sources", [])
    ]
    digest = hashlib.sha256()
    digest.update(b"campaign-data-digest/2\n")
    digest.update(json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode())
    digest.update(b"\n")
    for rel in sorted(file_hashes):
        digest.update(f"{rel}\t{file_hashes[rel]}\n".encode())
    digest.update(f"data-config\t{production_digest}\n".encode())
    return digest.hexdigest()


def written_files(data_dir: Path) -> set[str]:
    """Relative paths of every file campaign has written in this data folder (the cleanup may remove only these)."""
    try:
        listed = json.loads((Path(data_dir) / WRITTEN_LEDGER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return {p for p in listed if isinstance(p, str)} if isinstance(listed, list) else set()


def record_written(data_dir: Path, rel_paths: list[str]) -> None:
    """Add paths to the ledger before writing them (write-ahead, so a killed write is still ours to clean up)."""
    known = written_files(data_dir)
    if set(rel_paths) <= known:
        return
    atomic_write_json(Path(data_dir) / WRITTEN_LEDGER, sorted(known | set(rel_paths)))


def write_manifest(data_dir: Path, manifest: Manifest) -> Path:
    return atomic_write_json(Path(data_dir) / MANIFEST_NAME, manifest)


def read_manifest(data_dir: Path) -> Manifest | None:
    """The manifest of a prepared data folder, or None if there is none (never prepared, or a prepare that
    did not finish). Raises DataError if it exists but cannot be read."""
    path = Path(data_dir) / MANIFEST_NAME
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        raise DataError(
            f"unreadable data manifest ({type(exc).__name__})",
            where=str(path),
            fix="run `campaign prepare CONFIG` again: it rewrites the manifest",
        ) from None
    missing = (
        [key for key in ("data_digest", "tokenizer", "sources", "files") if key not in obj]
        if isinstance(obj, dict)
        else []
    )
    if not isinstance(obj, dict) or missing:
        raise DataError(
            f"data manifest lacks {', '.join(missing) or 'an object'}",
            where=str(path),
            fix="delete it and run `campaign prepare CONFIG` again",
        )
    return cast(Manifest, obj)  # its required keys checked above

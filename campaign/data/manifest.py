"""The data manifest: which clean files a prepare run wrote, their hashes, and the data digest.

`manifest.json` is written last by `write_run_manifest`, so its presence marks a finished prepare. The data
digest identifies the clean data: sha256 over the sorted (file name, file sha256) pairs of clean/*.parquet.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, TypedDict

from campaign.errors import DataError
from campaign.files import atomic_write_json, sha256_file

MANIFEST_NAME = "manifest.json"
CLEAN_DIR = "clean"
REJECTED_DIR = "rejected"
MANIFEST_VERSION = 2


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
    Each source also lists its shards with n_input = n_kept + n_rejected. No timestamps, so equal inputs
    in the same place give an identical manifest.
    """

    version: int
    data_digest: str
    tokenizer: str
    tokenizer_backend: str
    sources: list[dict[str, Any]]
    files: list[dict[str, Any]]
    mixture: list[dict[str, Any]]
    totals: dict[str, int]


def clean_file_hashes(clean_dir: Path) -> dict[str, str]:
    """{file name: sha256} of every clean/*.parquet file, read once so digest and verification can share it."""
    return {p.name: sha256_file(p) for p in sorted(Path(clean_dir).glob("*.parquet"), key=lambda p: p.name)}


def digest_of_hashes(hashes: dict[str, str]) -> str:
    """sha256 over the sorted "name<TAB>sha256<LF>" lines."""
    digest = hashlib.sha256()
    for name in sorted(hashes):
        digest.update(f"{name}\t{hashes[name]}\n".encode())
    return digest.hexdigest()


def data_digest(clean_dir: Path) -> str:
    """sha256 over the sorted "name<TAB>sha256<LF>" lines of every clean/*.parquet file."""
    return digest_of_hashes(clean_file_hashes(clean_dir))


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
    except (OSError, ValueError) as exc:
        raise DataError(f"unreadable data manifest ({type(exc).__name__}: {exc})", where=str(path),
                        fix="delete it and run `campaign prepare CONFIG` again") from None
    missing = [key for key in ("data_digest", "tokenizer", "sources", "files") if key not in obj]
    if not isinstance(obj, dict) or missing:
        raise DataError(f"data manifest lacks {', '.join(missing) or 'an object'}", where=str(path),
                        fix="delete it and run `campaign prepare CONFIG` again")
    return obj  # type: ignore[return-value]


def verify_clean_files(data_dir: Path, hashes: dict[str, str] | None = None) -> list[str]:
    """Messages for each clean file that changed, vanished or appeared since prepare (empty if all match).

    `hashes` ({file name: sha256}, from `clean_file_hashes`) saves hashing the files a second time."""
    data_dir = Path(data_dir)
    label = data_dir.name
    try:
        manifest = read_manifest(data_dir)
    except DataError:
        manifest = None
    if manifest is None:
        return [f"{label}/{MANIFEST_NAME} is missing or unreadable; run `campaign prepare` first"]
    listed = {entry["path"]: entry for entry in manifest["files"] if entry.get("kind") == CLEAN_DIR}
    present = {f"{CLEAN_DIR}/{p.name}": p for p in sorted((data_dir / CLEAN_DIR).glob("*.parquet"))}
    if hashes is None:
        hashes = clean_file_hashes(data_dir / CLEAN_DIR)
    messages = []
    for rel, entry in sorted(listed.items()):
        path = present.get(rel)
        if path is None:
            messages.append(f"{label}/{rel} is missing (listed in {MANIFEST_NAME}); run `campaign prepare` again")
            continue
        actual = hashes.get(path.name) or sha256_file(path)
        if actual != entry["sha256"]:
            messages.append(f"{label}/{rel} changed since prepare (sha256 {entry['sha256'][:8]}… → {actual[:8]}…)")
    for rel in sorted(set(present) - set(listed)):
        messages.append(f"{label}/{rel} is not in {MANIFEST_NAME} (added since prepare); remove it or prepare again")
    return messages

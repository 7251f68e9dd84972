"""Gate evidence: exactly which prepared data a gate judged, read once and hashed as it was read.

A gate result is evidence about exact inputs. The data digest (`campaign.data.manifest.manifest_data_digest`)
covers everything the data gates read: the manifest (which names the prepare inputs with their sha256 and the
production digest of the `data:` section that made the data), every clean and rejected Parquet file it lists,
and the production digest of the current `data:` section. Files are found by the names the manifest lists, never
by a glob over the workspace path, and each is read into memory once, hashed and parsed from those same bytes, so
a file swapped while validate runs cannot be judged in place of the one that is recorded. The catalog is the
trust root: a digest recorded there is compared with one recomputed from the files, never with a file's claim.

The digest also covers every other file a gate reads or a run executes that the config names (`gate_files`): a
tokenizer.json given as `data.tokenizer`, every file the rehearsal's and the execution's trainer commands run,
import or name from outside the Python environment (`campaign.command_files`), and `execute.command` itself.
Replacing one after validate changes the digest, and commit and execute name the file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from campaign.command_files import module_file as module_file  # re-exported
from campaign.command_files import trainer_files
from campaign.config import CampaignConfig, DataConfig
from campaign.data.indexed import TOKENIZED_DIR
from campaign.data.inputs import source_files
from campaign.data.manifest import (
    CLEAN_DIR,
    MANIFEST_NAME,
    REJECTED_DIR,
    InputEntry,
    Manifest,
    manifest_data_digest,
)
from campaign.errors import CampaignError, DataError
from campaign.files import sha256_file

# A listed file is a plain name inside clean/ or rejected/ (Parquet) or tokenized/ (the training shards and their
# blend): no '..', no absolute path, no glob characters.
_LISTED_PATH = re.compile(
    r"^((clean|rejected)/[A-Za-z0-9][A-Za-z0-9._-]*\.parquet|tokenized/[A-Za-z0-9][A-Za-z0-9._-]*\.(bin|idx|txt|json))$"
)
_KINDS = (CLEAN_DIR, REJECTED_DIR, TOKENIZED_DIR)


@dataclass(frozen=True)
class DataFile:
    """One file the manifest lists, as read now."""

    path: str  # relative to the data folder, e.g. clean/web.parquet
    kind: str  # clean, rejected or tokenized
    source: str
    sha256: str | None  # of the bytes read now; None if the file is missing
    table: pa.Table | None = None


@dataclass(frozen=True)
class GateFile:
    """A file the config names and a gate reads, as read now."""

    key: str  # the config key that names it, e.g. data.tokenizer or rehearsal.command[1]
    path: str  # absolute (EXECUTE_COMMAND for the execute command's arguments)
    sha256: str  # of the bytes read now; "missing" or "unreadable" when they cannot be read
    text: str = ""  # the execute command's arguments, as JSON


@dataclass(frozen=True)
class DataEvidence:
    """The prepared data of a workspace as a gate sees it."""

    digest: str
    manifest: Manifest
    files: tuple[DataFile, ...]
    problems: tuple[str, ...] = field(default_factory=tuple)  # why the data does not stand for this config
    gate_files: tuple[GateFile, ...] = field(default_factory=tuple)  # covered by the digest too

    def tables(self, kind: str) -> list[pa.Table]:
        return [f.table for f in self.files if f.kind == kind and f.table is not None]

    def gate_files_record(self) -> dict[str, dict[str, str]]:
        """{path: {key, sha256}}: what the data_identity gate records, for commit and execute to compare."""
        return {
            f.path: {"key": f.key, "sha256": f.sha256, **({"text": f.text} if f.text else {})}
            for f in self.gate_files
        }


# The execute command's arguments as an entry of the evidence (not a file): a change to them is named as such.
EXECUTE_COMMAND = "/execute.command"


@dataclass(frozen=True)
class CommandArgs:
    """A trainer command's arguments, an entry of the evidence beside the files."""

    argv: tuple[str, ...]


# Config keys that name files, and whether a gate reads them. A new key that names a file goes here: a test walks
# the config models and fails on a path-like field in neither set.
GATE_READ_KEYS = ("data.tokenizer", "rehearsal.command", "execute.command")
NOT_GATE_READ_KEYS = {
    "data.sources.path": "prepare's inputs: the manifest lists each with its sha256, judged by data_identity",
    "data.demo_corpus_dir": "read by prepare only, to write the demo corpus",
    **dict.fromkeys(
        (
            "data.cleaning.url_filter.domains_file",
            "data.cleaning.url_filter.substrings_file",
            "data.cleaning.url_filter.regexes_file",
            "data.decontaminate.benchmarks.path",
        ),
        "read by prepare's cleaning steps: the manifest lists each with its sha256 (step_files), in the data digest",
    ),
}


def gate_files(config: CampaignConfig, cwd: Path | None = None) -> list[tuple[str, Path | CommandArgs]]:
    """Every file the config names that a gate reads or a run executes, with the key that names it: a
    tokenizer.json path (`data.tokenizer`, made absolute by the loader), the files the rehearsal's trainer command
    runs, and those of `execute.command` when it is set (`command_files`; relative paths are relative to `cwd`,
    where the trainer is started). The execute command's arguments themselves are one more entry
    (`EXECUTE_COMMAND`), so a run commits to the exact trainer it will start."""
    here = Path.cwd() if cwd is None else cwd
    out: list[tuple[str, Path | CommandArgs]] = []
    if config.data.tokenizer.endswith(".json"):
        out.append(("data.tokenizer", Path(config.data.tokenizer)))
    out += command_files(config.rehearsal.command, here)
    if config.execute.command is not None:
        out.append(("execute.command", CommandArgs(config.execute.command)))
        seen = {path for _, path in out}
        out += [
            (k, p) for k, p in command_files(config.execute.command, here, "execute.command") if p not in seen
        ]
    return out


def command_files(
    command: Sequence[str], cwd: Path, key: str = "rehearsal.command"
) -> list[tuple[str, Path]]:
    """The files a trainer command runs (`campaign.command_files.trainer_files`): the files it names (a script, a
    config it reads, the module of `-m`), what they import from outside the Python environment, and the files
    those name, followed to the end."""
    return trainer_files(command, cwd, key)


def hash_gate_files(files: Iterable[tuple[str, Path | CommandArgs]]) -> tuple[GateFile, ...]:
    out = []
    for key, path in files:
        if isinstance(path, CommandArgs):
            argv = json.dumps(list(path.argv))
            out.append(GateFile(key, EXECUTE_COMMAND, hashlib.sha256(argv.encode()).hexdigest(), argv))
            continue
        try:
            # never open a FIFO or a device: only a regular file is read
            sha = sha256_file(path) if path.is_file() else ("missing" if not path.exists() else "not a file")
        except FileNotFoundError:
            sha = "missing"
        except OSError:
            sha = "unreadable"
        out.append(GateFile(key, str(path), sha))
    return tuple(out)


def gate_file_changes(recorded: Any, now: Sequence[GateFile], since: str) -> list[str]:
    """Each file a gate read whose bytes differ from what `recorded` (a data_identity gate's `gate_files`) says,
    named with the key that names it."""
    if not isinstance(recorded, dict):
        return []
    changes = []
    for f in now:
        entry = recorded.get(f.path)
        before = entry.get("sha256") if isinstance(entry, dict) else None
        if f.path == EXECUTE_COMMAND and before != f.sha256:
            then = entry.get("text", "absent") if isinstance(entry, dict) else "absent (rehearsal.command)"
            changes.append(
                f"execute.command is now {f.text}, not {then} as at {since}: the trainer a run starts is part of "
                "what was validated; restore it, or run `campaign validate` and `campaign commit` again"
            )
        elif before is None:
            changes.append(f"{f.key} names {f.path}, which no gate read {since}: run `campaign validate`")
        elif before != f.sha256:
            changes.append(
                f"{f.key}: {f.path} changed since {since} (sha256 {before[:8]}… is now {f.sha256[:8]}…); "
                "restore the file, or run `campaign validate` again"
            )
    return changes


def read_evidence(
    data_dir: Path,
    data: DataConfig,
    load_tables: bool = False,
    files: Iterable[tuple[str, Path | CommandArgs]] = (),
) -> DataEvidence | None:
    """The prepared data of `data_dir` checked against the config's `data:` section (already placed in its
    workspace with `DataConfig.in_workspace`), or None when nothing was prepared.

    With `load_tables`, every listed file is parsed from the bytes that were hashed. `files` (from `gate_files`)
    are hashed into the digest too. Raises DataError for a manifest that cannot be used at all; anything else
    that is off is listed in `problems`.
    """
    data_dir = Path(data_dir)
    manifest_path = data_dir / MANIFEST_NAME
    try:
        manifest_bytes = manifest_path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _bad_manifest(manifest_path, f"cannot be read ({exc})") from None
    manifest = _parse_manifest(manifest_bytes, manifest_path)
    problems: list[str] = []
    files_read: list[DataFile] = []
    hashes: dict[str, str] = {}
    for entry in manifest["files"]:
        rel = entry["path"]
        if entry["kind"] == TOKENIZED_DIR:  # not a table, and a .bin can be large: hashed as a stream
            try:
                sha = sha256_file(data_dir / rel)
            except FileNotFoundError:
                sha = "missing"
                problems.append(
                    f"data/{rel} is missing (listed in {MANIFEST_NAME}); run `campaign prepare` again"
                )
            except OSError as exc:
                raise DataError(
                    f"cannot read a prepared file ({exc})",
                    where=str(data_dir / rel),
                    fix="check its permissions, or run `campaign prepare` again",
                ) from None
            if sha not in ("missing", entry["sha256"]):
                problems.append(
                    f"data/{rel} changed since prepare (sha256 {entry['sha256'][:8]}… is now {sha[:8]}…); "
                    "run `campaign prepare` again, or restore the file"
                )
            hashes[rel] = sha
            files_read.append(DataFile(rel, entry["kind"], str(entry.get("source", "")), sha))
            continue
        try:
            raw = (data_dir / rel).read_bytes()
        except FileNotFoundError:
            problems.append(
                f"data/{rel} is missing (listed in {MANIFEST_NAME}); run `campaign prepare` again"
            )
            hashes[rel] = "missing"
            files_read.append(DataFile(rel, entry["kind"], str(entry.get("source", "")), None))
            continue
        except OSError as exc:
            raise DataError(
                f"cannot read a prepared file ({exc})",
                where=str(data_dir / rel),
                fix="check its permissions, or run `campaign prepare` again",
            ) from None
        sha = hashlib.sha256(raw).hexdigest()
        hashes[rel] = sha
        if sha != entry["sha256"]:
            problems.append(
                f"data/{rel} changed since prepare (sha256 {entry['sha256'][:8]}… is now {sha[:8]}…); "
                "run `campaign prepare` again, or restore the file"
            )
        table = None
        if load_tables:
            try:
                table = pq.read_table(pa.BufferReader(raw))
            except (pa.ArrowException, OSError, ValueError) as exc:
                problems.append(
                    f"data/{rel} is not readable Parquet ({type(exc).__name__}); run `campaign prepare` again"
                )
        files_read.append(DataFile(rel, entry["kind"], str(entry.get("source", "")), sha, table))
    listed = set(hashes)
    for kind in (CLEAN_DIR, REJECTED_DIR):
        folder = data_dir / kind
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                rel = f"{kind}/{path.name}"
                if (
                    path.is_file()
                    and path.suffix == ".parquet"
                    and not path.name.startswith(".")
                    and rel not in listed
                ):
                    problems.append(
                        f"data/{rel} is not in {MANIFEST_NAME} (campaign did not write it in this "
                        "prepare); move it out of the workspace, or run `campaign prepare` again"
                    )
    problems += _input_problems(manifest)
    production = data.production_digest()
    if manifest.get("data_config_digest") != production:
        problems.append(
            "the `data:` section (sources, cleaning or tokenizer) changed since this data was prepared; "
            "run `campaign prepare` again"
        )
    names_now = [s.name for s in data.sources]
    names_then = [s.get("name") for s in manifest["sources"]]
    if names_now != names_then:
        problems.append(
            f"the prepared sources {names_then} are not the configured sources {names_now}; run "
            "`campaign prepare` again"
        )
    digest = manifest_data_digest(manifest, hashes, production)
    read = hash_gate_files(files)
    if read:
        combined = hashlib.sha256(f"campaign-gate-evidence/1\n{digest}\n".encode())
        for f in sorted(read, key=lambda f: (f.key, f.path)):
            combined.update(f"{f.key}\t{f.path}\t{f.sha256}\n".encode())
        digest = combined.hexdigest()
    return DataEvidence(
        digest=digest, manifest=manifest, files=tuple(files_read), problems=tuple(problems), gate_files=read
    )


def input_identities(data: DataConfig) -> list[InputEntry]:
    """Path, size and sha256 of every file the sources' globs match (the identities of prepare's inputs)."""
    out: list[InputEntry] = []
    for index, source in enumerate(data.sources):
        for path, _ in source_files(source, index):
            out.append(
                {
                    "source": source.name,
                    "path": str(path),
                    "bytes": path.stat().st_size,
                    "sha256": sha256_file(path),
                }
            )
    return out


def _input_problems(manifest: Manifest) -> list[str]:
    problems = []
    for entry in manifest.get("inputs", []):
        path = Path(entry["path"])
        try:
            sha = sha256_file(path)
        except FileNotFoundError:
            problems.append(
                f"input {path} was read by prepare and is gone; restore it or run `campaign prepare` again"
            )
            continue
        except OSError as exc:
            problems.append(
                f"input {path} cannot be read ({exc}); fix its permissions or run `campaign prepare`"
            )
            continue
        if sha != entry["sha256"]:
            problems.append(f"input {path} changed since prepare; run `campaign prepare` again")
    return problems


def _parse_manifest(raw: bytes, path: Path) -> Manifest:
    """The manifest as JSON, its shape checked field by field (it may have been edited by hand)."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _bad_manifest(path, f"is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise _bad_manifest(path, "is not a JSON object")
    for key, kind in (("files", list), ("sources", list), ("tokenizer", str)):
        if not isinstance(obj.get(key), kind):
            raise _bad_manifest(
                path, f"field '{key}' should be a {kind.__name__}, found {type(obj.get(key)).__name__}"
            )
    for i, entry in enumerate(obj["files"]):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("sha256"), str)
            and entry.get("kind") in _KINDS
        ):
            raise _bad_manifest(
                path, f"files[{i}] needs a path, a sha256 and a kind (clean, rejected or tokenized)"
            )
        if not _LISTED_PATH.match(entry["path"]) or not entry["path"].startswith(entry["kind"] + "/"):
            raise _bad_manifest(
                path,
                f"files[{i}].path {entry['path']!r} is not a file inside clean/, rejected/ or tokenized/",
            )
    paths = [entry["path"] for entry in obj["files"]]
    repeated = sorted({p for p in paths if paths.count(p) > 1})
    if repeated:
        raise _bad_manifest(path, f"files lists {', '.join(repeated)} more than once")
    for i, entry in enumerate(obj["sources"]):
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str)):
            raise _bad_manifest(path, f"sources[{i}] needs a name")
    inputs = obj.get("inputs", [])
    if not isinstance(inputs, list) or not all(
        isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("sha256"), str)
        for e in inputs
    ):
        raise _bad_manifest(path, "field 'inputs' should be a list of {path, sha256}")
    return cast(Manifest, obj)  # the fields the gates read, checked above


def _bad_manifest(path: Path, what: str) -> CampaignError:
    return DataError(
        f"the data manifest {what}",
        where=str(path),
        fix="run `campaign prepare CONFIG` again: it rewrites the manifest from the data",
    )

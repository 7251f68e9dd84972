"""Find a run's input files and split them into shards: the unit of work of a prepare run.

Globs: `expand_glob` walks the directory tree itself instead of `glob.glob(recursive=True)`, which follows a
symlink that points at one of its own ancestors until the path grows too long (and reads files reachable
through two links twice). Here `**` follows symlinked directories, but every directory is entered at most
once (by device and inode), so a loop ends, and every file is returned once (the first path in sorted
order), however many links lead to it. As with `glob`, wildcards do not match names starting with ".".

Shards: a JSONL file larger than `shard_bytes` is split into byte ranges (each range owns the lines that
*start* inside it), a Parquet file into runs of row groups of about `shard_bytes` compressed bytes; a gzip
file is one shard (a gzip stream cannot be entered in the middle). Shards are numbered in the order that
defines "first occurrence" for dedup: sources in config order, files sorted by path, parts in file order.

Unreadable inputs: `plan_inputs` checks every matched file (a regular file, readable, Parquet footer and
columns) and returns the problems beside the shards of the usable files; prepare runs those shards, then reports
these problems with the ones found reading (a truncated gzip, a corrupt page) in one DataError, each with its
fix, instead of one class of problem per run. Only a regular file is an input: a FIFO matched by a glob would
block `open()` forever and a link to `/dev/zero` never ends, so each is named as a problem and never opened.
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from campaign.config import DataConfig, SourceConfig
from campaign.errors import DataError
from campaign.files import NotRegularFile, check_regular, open_regular

_GLOB_CHARS = set("*?[")


@dataclass(frozen=True, slots=True)
class Shard:
    """One unit of work: a byte range of a JSONL file, or a run of row groups of a Parquet file."""

    index: int  # position in the run's global order
    source_index: int
    source: str
    path: str  # absolute path as matched (a symlink is not resolved, so messages show what the user wrote)
    name: str  # path relative to the glob's fixed prefix: used in doc ids and outputs
    file_index: int  # position of the file within its source
    part: int
    n_parts: int
    start: int  # JSONL: first byte; Parquet: first row group
    stop: int  # JSONL: byte after the range; Parquet: row group after the run
    file_bytes: int
    kind: str  # "jsonl", "jsonl.gz", "parquet" or "warc"

    @property
    def key(self) -> str:
        return f"{self.source_index:03d}-{self.file_index:06d}-{self.part:05d}"

    def to_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------------------------ globs


_ESCAPED = re.compile(r"\[([\[\]*?])\]")


def glob_root(pattern: str) -> Path:
    """The fixed directory prefix of a glob: the parts before the first one with a wildcard."""
    parts = Path(pattern).parts
    fixed: list[str] = []
    for part in parts:
        # glob.escape() writes a literal '[' as '[[]' (a workspace folder `ws[1]`): such a part is fixed, not a
        # wildcard, so file names stay relative to the real folder
        if _GLOB_CHARS & set(_ESCAPED.sub("", part)):
            return Path(*fixed) if fixed else Path(".")
        fixed.append(_ESCAPED.sub(r"\1", part))
    return Path(*fixed).parent  # no wildcard: a single file


def expand_glob(pattern: str) -> list[Path]:
    """Files matching `pattern` (with `**` for any depth), sorted, each real file once, symlink loops cut."""
    parts = Path(pattern).parts
    if not _GLOB_CHARS & set(pattern):
        path = Path(pattern)
        return [path] if _is_file_like(path) else []
    root = glob_root(pattern)
    rest = parts[len(root.parts) :]
    seen_dirs: set[tuple[int, int, tuple[str, ...]]] = set()
    found: list[Path] = []
    _walk(root, tuple(rest), seen_dirs, found)
    unique: dict[tuple[int, int], Path] = {}
    for path in sorted(found):
        try:
            st = path.stat()
        except OSError:
            # a dangling symlink or a file that vanished: keep it so the read check reports it
            unique.setdefault((-1, hash(str(path))), path)
            continue
        unique.setdefault((st.st_dev, st.st_ino), path)
    return sorted(unique.values())


def _enter(directory: Path, parts: tuple[str, ...], seen_dirs: set) -> bool:
    """False when this directory was already walked for the same rest of the pattern (a loop or a 2nd link)."""
    try:
        st = directory.stat()
    except OSError:
        return False
    key = (st.st_dev, st.st_ino, parts)
    if key in seen_dirs:
        return False
    seen_dirs.add(key)
    return True


def _entries(directory: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=True)
    except OSError:
        return False


def _is_file_like(path: Path) -> bool:
    """Anything but a folder (a FIFO or a device too, so the read check names it), or a link (a dangling one too)."""
    return path.is_symlink() or (path.exists() and not path.is_dir())


def _walk(directory: Path, parts: tuple[str, ...], seen_dirs: set, found: list[Path]) -> None:
    if not parts:
        return
    head, tail = parts[0], parts[1:]
    if head == "**":
        if not _enter(directory, parts, seen_dirs):
            return
        _walk_no_enter(directory, tail, seen_dirs, found)
        for entry in _entries(directory):
            if not entry.name.startswith(".") and _is_dir(entry):
                _walk(Path(entry.path), parts, seen_dirs, found)
        return
    _walk_no_enter(directory, parts, seen_dirs, found)


def _walk_no_enter(directory: Path, parts: tuple[str, ...], seen_dirs: set, found: list[Path]) -> None:
    if not parts:
        return
    head, tail = parts[0], parts[1:]
    if head == "**":
        _walk(directory, parts, seen_dirs, found)
        return
    wildcard = bool(_GLOB_CHARS & set(head))
    if not wildcard:
        candidate = directory / head
        if not tail:
            if _is_file_like(candidate):
                found.append(candidate)
        elif candidate.is_dir():
            _walk_child(candidate, tail, seen_dirs, found)
        return
    for entry in _entries(directory):
        if entry.name.startswith(".") and not head.startswith("."):
            continue
        if not fnmatch.fnmatchcase(entry.name, head):
            continue
        if not tail:
            if not _is_dir(entry):
                found.append(Path(entry.path))
        elif _is_dir(entry):
            _walk_child(Path(entry.path), tail, seen_dirs, found)


def _walk_child(directory: Path, parts: tuple[str, ...], seen_dirs: set, found: list[Path]) -> None:
    if parts and parts[0] == "**":
        _walk(directory, parts, seen_dirs, found)
    else:
        _walk_no_enter(directory, parts, seen_dirs, found)


def relative_name(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def source_files(source: SourceConfig, index: int = 0) -> list[tuple[Path, str]]:
    """The files a source's glob matches, sorted, each with its name relative to the glob's fixed prefix.

    Raises DataError when nothing matches.
    """
    matches = expand_glob(source.path)
    if not matches:
        fix = f"check data.sources[{index}].path (a glob, absolute or relative to the campaign file)"
        if "[" in str(source.path):  # a folder named with brackets: they are a character class in a glob
            fix += "; [ and ] are glob characters: write [[] and []] for literal brackets"
        raise DataError(
            f"source '{source.name}': path '{source.path}' matched no files",
            where=f"data.sources[{index}].path",
            fix=fix,
        )
    root = glob_root(source.path)
    return [(path, relative_name(path, root)) for path in matches]


# Web text compresses about 3-4x under gzip (a WARC file or a JSONL.gz of Common Crawl text).
GZIP_TEXT_RATIO = 4


def input_bytes(data: DataConfig) -> int:
    """The text the sources hold, estimated from their files' sizes: a gzip-compressed file counts
    GZIP_TEXT_RATIO times its size. Files that cannot be read count nothing (planning names them)."""
    total = 0
    for source in data.sources:
        for path in expand_glob(source.path):
            try:
                size = path.stat().st_size
            except OSError:
                continue
            total += size * GZIP_TEXT_RATIO if path.name.endswith(".gz") else size
    return total


# ----------------------------------------------------------------------------------------------- shards


@dataclass(frozen=True)
class InputProblem:
    """A file that cannot be read, with what to do about it."""

    where: str
    message: str
    fix: str

    def render(self) -> str:
        return f"{self.where}: {self.message}\n    fix: {self.fix}"


def problems_error(problems: list[InputProblem]) -> DataError:
    """One DataError listing every unreadable input of the run."""
    lines = "\n".join(f"  - {p.render()}" for p in problems)
    return DataError(
        f"{len(problems)} input file(s) cannot be read:\n{lines}",
        fix="fix or remove each file listed above, then run prepare again "
        "(finished shards of the other files are kept)",
    )


def _kind(source: SourceConfig, path: Path) -> str:
    if source.format in ("parquet", "warc"):
        return source.format
    return "jsonl.gz" if path.name.endswith(".gz") else "jsonl"


@dataclass(frozen=True)
class InputPlan:
    """The shards of every usable input, in global order, and a problem for each input that is not usable.

    `is_config_problem`: a source matched nothing (the config is wrong, so no shard is worth running)."""

    shards: list[Shard]
    problems: list[InputProblem]
    is_config_problem: bool = False


def plan_shards(data: DataConfig) -> list[Shard]:
    """Every shard of the run in global order. Raises one DataError naming every unusable input."""
    plan = plan_inputs(data)
    if plan.problems:
        raise problems_error(plan.problems)
    return plan.shards


def plan_inputs(data: DataConfig) -> InputPlan:
    """The shards of the usable inputs and the problems of the others (each file checked, none opened unless
    it is a regular file). Shard indices are dense over the usable files."""
    shards: list[Shard] = []
    problems: list[InputProblem] = []
    no_match = False
    for s_index, source in enumerate(data.sources):
        try:
            files = source_files(source, s_index)
        except DataError as err:
            problems.append(
                InputProblem(err.where or f"data.sources[{s_index}].path", err.message, err.fix or "")
            )
            no_match = True
            continue
        for f_index, (path, name) in enumerate(files):
            kind = _kind(source, path)
            try:
                size = check_regular(path).st_size
                os.close(open_regular(path))
            except NotRegularFile as exc:
                problems.append(
                    InputProblem(
                        str(path),
                        f"{exc.strerror}: campaign reads only regular files (a FIFO would block, a device "
                        "may never end)",
                        f"remove it, or narrow data.sources[{s_index}].path so the glob does not match it",
                    )
                )
                continue
            except OSError as exc:
                problems.append(
                    InputProblem(
                        str(path),
                        f"cannot read ({exc.strerror or exc})",
                        "check the file exists and is readable (permissions), or remove it",
                    )
                )
                continue
            ranges: list[tuple[int, int]]
            if kind == "parquet":
                try:
                    ranges = _parquet_ranges(path, source, s_index, data.shard_bytes)
                except _Problem as problem:
                    problems.append(problem.problem)
                    continue
            elif kind in ("jsonl.gz", "warc") or size <= data.shard_bytes:  # compressed: read whole
                ranges = [(0, size)]
            else:
                n = -(-size // data.shard_bytes)
                bounds = [size * i // n for i in range(n + 1)]
                ranges = list(itertools.pairwise(bounds))
            for part, (start, stop) in enumerate(ranges):
                shards.append(
                    Shard(
                        index=len(shards),
                        source_index=s_index,
                        source=source.name,
                        path=str(path.absolute()),
                        name=name,
                        file_index=f_index,
                        part=part,
                        n_parts=len(ranges),
                        start=start,
                        stop=stop,
                        file_bytes=size,
                        kind=kind,
                    )
                )
    return InputPlan(shards=shards, problems=problems, is_config_problem=no_match)


class _Problem(Exception):
    def __init__(self, problem: InputProblem) -> None:
        self.problem = problem


def _parquet_ranges(path: Path, source: SourceConfig, index: int, shard_bytes: int) -> list[tuple[int, int]]:
    try:
        meta = pq.ParquetFile(path).metadata
        schema = meta.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as exc:
        raise _Problem(
            InputProblem(
                str(path),
                f"truncated or corrupt Parquet file ({type(exc).__name__}: {exc})",
                f"re-copy it or remove it (it matched data.sources[{index}].path)",
            )
        ) from None
    columns = schema.names
    if source.text_field not in columns:
        raise _Problem(
            InputProblem(
                str(path),
                f"source '{source.name}': no text column '{source.text_field}' "
                f"(columns: {', '.join(columns)})",
                f"set data.sources[{index}].text_field to the column that holds the text",
            )
        )
    if source.id_field and source.id_field not in columns:
        raise _Problem(
            InputProblem(
                str(path),
                f"source '{source.name}': no id column '{source.id_field}' (columns: {', '.join(columns)})",
                f"set data.sources[{index}].id_field to an id column, or remove it to use file:row ids",
            )
        )
    ranges: list[tuple[int, int]] = []
    start = acc = 0
    for g in range(meta.num_row_groups):
        acc += meta.row_group(g).total_byte_size
        if acc >= shard_bytes:
            ranges.append((start, g + 1))
            start, acc = g + 1, 0
    if start < meta.num_row_groups or not ranges:
        ranges.append((start, meta.num_row_groups))
    return ranges

"""Files hygiene: BOM, size and nesting rejections, symlink-safe globs, every unreadable file at once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from campaign.config import DataConfig, SourceConfig
from campaign.data.inputs import GZIP_TEXT_RATIO, expand_glob, input_bytes, plan_shards
from campaign.data.readers import MALFORMED_JSON, RECORD_TOO_LARGE, read_source
from campaign.errors import DataError

GOOD = "The cat sat on the mat and that was all there was to it."


def _source(path: Path | str, fmt: str = "jsonl", **kw) -> SourceConfig:
    return SourceConfig(name=kw.pop("name", "web"), path=str(path), format=fmt, weight=1.0, **kw)


def test_bom_belongs_to_the_file_not_the_first_record(tmp_path: Path) -> None:
    path = tmp_path / "web" / "bom.jsonl"
    path.parent.mkdir()
    path.write_bytes(
        b"\xef\xbb\xbf" + json.dumps({"text": GOOD}).encode() + b"\n" + json.dumps({"text": "x"}).encode()
    )
    docs = list(read_source(_source(path)))
    assert [(d.line, d.reason, d.text) for d in docs] == [(1, None, GOOD), (2, None, "x")]


def test_unparseable_records_are_rejections_not_aborts(tmp_path: Path) -> None:
    path = tmp_path / "web" / "bad.jsonl"
    path.parent.mkdir()
    deep = b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # RecursionError in the stdlib parser
    huge = json.dumps({"text": "y " * 200_000}).encode()  # longer than max_record_bytes below
    path.write_bytes(
        b"\n".join([json.dumps({"text": GOOD}).encode(), deep, huge, json.dumps({"text": GOOD}).encode()])
    )
    docs = list(read_source(_source(path), max_record_bytes=300_000))
    assert [(d.line, d.reason) for d in docs] == [
        (1, None),
        (2, MALFORMED_JSON),
        (3, RECORD_TOO_LARGE),
        (4, None),
    ]
    assert "nested too deeply" in docs[1].detail or "recursion" in docs[1].detail.lower()
    assert f"{len(huge) + 1:,} bytes > max_record_bytes 300,000" in docs[2].detail and docs[2].text == ""
    assert len(docs[1].text) <= 10_000  # only the start of an unparseable record is kept


def test_byte_range_shards_cover_every_line_once(tmp_path: Path) -> None:
    path = tmp_path / "web" / "big.jsonl"
    path.parent.mkdir()
    lines = [json.dumps({"text": f"{GOOD} {i} " + "z" * (i % 97)}) for i in range(3000)]
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n\n")
    from campaign.data.readers import FileDigest, read_shard

    for shard_bytes in (2**16, 100_003):
        data = DataConfig(sources=(_source(path),), shard_bytes=2**16)
        data = data.model_copy(update={"shard_bytes": shard_bytes})
        shards = plan_shards(data)
        assert len(shards) > 2
        got = []
        digests = []
        for shard in shards:
            digest = FileDigest()
            got += [(d.line, d.text) for d in read_shard(shard, data.sources[0], digest=digest)]
            digests.append(digest.sha256)
        assert [line for line, _ in got] == list(range(1, 3001))
        assert got[5][1] == f"{GOOD} 5 " + "z" * 5
        assert digests[0] is not None and digests[1:] == [None] * (len(shards) - 1)  # hashed once, whole


def test_recursive_glob_survives_symlink_loops_and_reads_each_file_once(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "one.jsonl").write_text("{}\n")
    (root / "a" / "b" / "two.jsonl").write_text("{}\n")
    os.symlink(root / "a", root / "a" / "b" / "loop")  # a/b/loop -> a: a cycle
    os.symlink(root / "a" / "one.jsonl", root / "alias.jsonl")  # a second name for one.jsonl
    os.symlink(root / "a" / "b", root / "b-link")  # a second way into b
    found = expand_glob(str(root / "**" / "*.jsonl"))
    assert [p.relative_to(root).as_posix() for p in found] == ["a/b/two.jsonl", "a/one.jsonl"]
    assert expand_glob(str(root / "a" / "*.jsonl")) == [root / "a" / "one.jsonl"]
    assert expand_glob(str(root / "a" / "one.jsonl")) == [root / "a" / "one.jsonl"]


def test_every_unreadable_file_is_reported_at_once(tmp_path: Path) -> None:
    (tmp_path / "web").mkdir()
    (tmp_path / "docs").mkdir()
    good = tmp_path / "web" / "a.jsonl"
    good.write_text(json.dumps({"text": GOOD}) + "\n")
    locked = tmp_path / "web" / "b.jsonl"
    locked.write_text(json.dumps({"text": GOOD}) + "\n")
    dangling = tmp_path / "web" / "c.jsonl"
    os.symlink(tmp_path / "nowhere.jsonl", dangling)
    broken = tmp_path / "docs" / "x.parquet"
    pq.write_table(pa.table({"text": [GOOD] * 50}), broken)
    broken.write_bytes(broken.read_bytes()[:-30])
    nocol = tmp_path / "docs" / "y.parquet"
    pq.write_table(pa.table({"body": [GOOD]}), nocol)
    data = DataConfig(
        sources=(
            _source(tmp_path / "web" / "*.jsonl"),
            _source(tmp_path / "docs" / "*.parquet", "parquet", name="docs"),
            _source(tmp_path / "none" / "*.jsonl", name="none"),
        )
    )
    os.chmod(locked, 0)
    try:
        if os.access(locked, os.R_OK):  # running as root: permissions do not apply
            locked.unlink()
        with pytest.raises(DataError) as err:
            plan_shards(data)
    finally:
        if locked.exists():
            os.chmod(locked, 0o644)
    text = err.value.render()
    assert str(dangling) in text and str(broken) in text and str(nocol) in text
    assert "matched no files" in text and "truncated or corrupt" in text and "no text column 'text'" in text
    assert str(good) not in text
    assert text.count("fix:") >= 5  # one per problem, plus the overall fix
    assert err.value.exit_code == 2


def test_a_file_failing_part_way_is_reported_with_the_others(tmp_path: Path) -> None:
    import gzip

    from campaign.data import prepare_data

    (tmp_path / "web").mkdir()
    for name in ("a", "b"):
        data = gzip.compress(
            b"".join(json.dumps({"text": f"{GOOD} {i}"}).encode() + b"\n" for i in range(3000))
        )
        (tmp_path / "web" / f"{name}.jsonl.gz").write_bytes(data[: len(data) // 2])
    (tmp_path / "web" / "c.jsonl.gz").write_bytes(gzip.compress(json.dumps({"text": GOOD}).encode()))
    cfg = DataConfig(sources=(_source(tmp_path / "web" / "*.jsonl.gz"),))
    with pytest.raises(DataError) as err:
        prepare_data(cfg, tmp_path / "data")
    text = err.value.render()
    assert "2 input file(s) cannot be read" in text
    assert "a.jsonl.gz" in text and "b.jsonl.gz" in text and "c.jsonl.gz" not in text


def test_a_folder_named_with_brackets_is_found_when_escaped_and_the_error_says_how(tmp_path):
    folder = tmp_path / "run [v2]"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"id": "1", "text": "hello"}\n')
    from campaign.data.inputs import source_files

    with pytest.raises(DataError) as err:
        source_files(_source(f"{folder}/*.jsonl"))
    assert "[[]" in err.value.fix and "data.sources[0].path" in err.value.where
    escaped = f"{tmp_path}/run [[]v2[]]/*.jsonl"
    assert [p.name for p, _ in source_files(_source(escaped))] == ["a.jsonl"]


def test_a_fifo_and_a_device_matched_by_a_glob_are_named_and_never_opened(tmp_path: Path) -> None:
    web = tmp_path / "web"
    web.mkdir()
    good = web / "a.jsonl"
    good.write_text(json.dumps({"text": GOOD}) + "\n")
    fifo = web / "b.jsonl"
    os.mkfifo(fifo)  # open() would wait for a writer forever
    zero = web / "c.jsonl"
    os.symlink("/dev/zero", zero)  # read() would never end
    single = tmp_path / "single.jsonl"
    os.mkfifo(single)
    data = DataConfig(sources=(_source(web / "*.jsonl"), _source(single, name="one")))
    with pytest.raises(DataError) as err:
        plan_shards(data)
    text = err.value.render()
    assert "2 input file(s)" not in text and "3 input file(s) cannot be read" in text
    assert f"{fifo}: a FIFO (named pipe), not a regular file" in text
    assert f"{zero}: a character device, not a regular file" in text
    assert f"{single}: a FIFO" in text
    assert str(good) not in text and "narrow data.sources[0].path" in text


def test_prepare_names_every_unreadable_input_in_one_run(tmp_path: Path) -> None:
    """A corrupt Parquet footer is found before the shards run, a truncated gzip only while reading: one error
    names both (and a FIFO), and the usable files' shards are done for the rerun."""
    import gzip

    from campaign.data import prepare_data

    web, docs = tmp_path / "web", tmp_path / "docs"
    web.mkdir()
    docs.mkdir()
    data = gzip.compress(b"".join(json.dumps({"text": f"{GOOD} {i}"}).encode() + b"\n" for i in range(3000)))
    (web / "cut.jsonl.gz").write_bytes(data[: len(data) // 2])
    (web / "fine.jsonl.gz").write_bytes(gzip.compress(json.dumps({"text": GOOD}).encode() + b"\n"))
    os.mkfifo(web / "pipe.jsonl.gz")
    broken = docs / "x.parquet"
    pq.write_table(pa.table({"text": [GOOD] * 50}), broken)
    broken.write_bytes(broken.read_bytes()[:-30])
    pq.write_table(pa.table({"text": [GOOD + " parquet"] * 5}), docs / "y.parquet")
    cfg = DataConfig(
        sources=(
            _source(web / "*.jsonl.gz"),
            _source(docs / "*.parquet", "parquet", name="docs"),
        )
    )
    with pytest.raises(DataError) as err:
        prepare_data(cfg, tmp_path / "data", keep_work=True)
    text = err.value.render()
    assert "3 input file(s) cannot be read" in text
    assert "cut.jsonl.gz" in text and "x.parquet" in text and "pipe.jsonl.gz" in text
    assert "fine.jsonl.gz" not in text and "y.parquet" not in text


def test_input_bytes_counts_every_matched_file_and_a_gzip_file_as_the_text_it_holds(tmp_path: Path) -> None:
    web, docs = tmp_path / "web", tmp_path / "docs"
    web.mkdir()
    docs.mkdir()
    (web / "a.jsonl").write_bytes(b"x" * 1000)
    (web / "b.jsonl").write_bytes(b"x" * 500)
    (docs / "c.jsonl.gz").write_bytes(b"x" * 100)
    data = DataConfig(sources=(_source(web / "*.jsonl"), _source(docs / "*.jsonl.gz", name="docs")))
    assert input_bytes(data) == 1500 + 100 * GZIP_TEXT_RATIO
    # a source that matches nothing counts nothing here: planning names it
    assert input_bytes(DataConfig(sources=(_source(tmp_path / "none" / "*.jsonl"),))) == 0

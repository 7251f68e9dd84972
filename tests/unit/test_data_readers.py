"""Readers: per-record rejections with file:line, whole-file DataErrors naming the file and the fix."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from campaign.config import SourceConfig
from campaign.data.readers import (
    EMPTY_TEXT,
    INVALID_UTF8,
    MALFORMED_JSON,
    MISSING_TEXT,
    WRONG_TYPE,
    read_source,
    source_files,
)
from campaign.errors import DataError

GOOD = "The cat sat on the mat and that was all there was to it."


def _source(path: Path | str, fmt: str = "jsonl", **kw) -> SourceConfig:
    return SourceConfig(name=kw.pop("name", "web"), path=str(path), format=fmt, weight=1.0, **kw)


def _jsonl(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def _dump(obj) -> bytes:
    return json.dumps(obj).encode()


@pytest.fixture
def mixed_jsonl(tmp_path: Path) -> Path:
    return _jsonl(
        tmp_path / "web" / "part.jsonl",
        [
            _dump({"text": GOOD}),  # 1 ok
            b'{"text": "cut off in the mid',  # 2 malformed_json
            b'{"text": "caf\xe9 au lait"}',  # 3 invalid_utf8 (Latin-1 byte)
            _dump({"url": "https://x.example"}),  # 4 missing_text (absent)
            _dump({"text": None}),  # 5 missing_text (null)
            _dump({"text": 42}),  # 6 wrong_type
            _dump({"text": " \n\t "}),  # 7 empty_text
            b"",  # 8 blank: not a record
            _dump([1, 2, 3]),  # 9 malformed_json (not an object)
            b'{"text": "lone \\ud800 surrogate"}',  # 10 invalid_utf8 (escape)
            _dump({"text": GOOD + " again"}),  # 11 ok
        ],
    )


def test_each_jsonl_rejection_names_file_and_line(mixed_jsonl: Path) -> None:
    docs = list(read_source(_source(mixed_jsonl.parent / "*.jsonl")))
    by_line = {d.line: d for d in docs}
    assert sorted(by_line) == [1, 2, 3, 4, 5, 6, 7, 9, 10, 11]  # blank line 8 skipped, numbering physical
    expected = {
        1: None,
        2: MALFORMED_JSON,
        3: INVALID_UTF8,
        4: MISSING_TEXT,
        5: MISSING_TEXT,
        6: WRONG_TYPE,
        7: EMPTY_TEXT,
        9: MALFORMED_JSON,
        10: INVALID_UTF8,
        11: None,
    }
    assert {line: d.reason for line, d in by_line.items()} == expected
    for line, doc in by_line.items():
        assert doc.file == "part.jsonl"
        assert doc.doc_id == f"web/part.jsonl:{line}"
        if doc.reason:
            assert doc.detail.startswith(f"part.jsonl:{line}: "), doc.detail
    assert by_line[2].text == '{"text": "cut off in the mid'  # the raw line is kept
    assert by_line[3].text == "caf\ufffd au lait"  # decoded with errors="replace"
    assert "e9" in by_line[3].detail and "at offset 13" in by_line[3].detail  # the bad byte and where
    assert "absent" in by_line[4].detail and "null" in by_line[5].detail
    assert by_line[6].text == "42" and "int" in by_line[6].detail
    assert "\ufffd" in by_line[10].text and "surrogate" in by_line[10].detail
    assert by_line[1].text == GOOD


def test_id_field_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "a" / "docs.jsonl.gz"
    path.parent.mkdir()
    with gzip.open(path, "wb") as handle:
        handle.write(_dump({"id": "doc-1", "body": GOOD}) + b"\n" + _dump({"body": GOOD}) + b"\n")
    docs = list(read_source(_source(tmp_path / "a" / "*.jsonl.gz", text_field="body", id_field="id")))
    assert [d.doc_id for d in docs] == ["doc-1", "web/docs.jsonl.gz:2"]  # no id: falls back to file:line
    assert all(d.reason is None for d in docs)


def test_files_sorted_and_named_relative_to_glob(tmp_path: Path) -> None:
    _jsonl(tmp_path / "c" / "b.jsonl", [_dump({"text": "b"})])
    _jsonl(tmp_path / "c" / "sub" / "a.jsonl", [_dump({"text": "a"})])
    _jsonl(tmp_path / "c" / "a.jsonl", [_dump({"text": "a"})])
    names = [name for _, name in source_files(_source(tmp_path / "c" / "**" / "*.jsonl"))]
    assert names == ["a.jsonl", "b.jsonl", "sub/a.jsonl"]


def test_parquet_rows_and_rejections(tmp_path: Path) -> None:
    path = tmp_path / "p" / "part-000.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"doc_id": ["a", "b", "c", None], "body": [GOOD, None, "  ", GOOD]}), path)
    docs = list(
        read_source(_source(tmp_path / "p" / "*.parquet", "parquet", text_field="body", id_field="doc_id"))
    )
    assert [(d.doc_id, d.line, d.reason) for d in docs] == [
        ("a", 1, None),
        ("b", 2, MISSING_TEXT),
        ("c", 3, EMPTY_TEXT),
        ("web/part-000.parquet:4", 4, None),
    ]
    assert docs[1].detail == "part-000.parquet:2: field 'body' is null"


def test_parquet_wrong_type_and_binary_invalid_utf8(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    pq.write_table(pa.table({"text": pa.array([1, 2], pa.int64())}), tmp_path / "p" / "ints.parquet")
    pq.write_table(
        pa.table({"text": pa.array([GOOD.encode(), b"bad \xff byte"], pa.binary())}),
        tmp_path / "p" / "raw.parquet",
    )
    docs = list(read_source(_source(tmp_path / "p" / "*.parquet", "parquet")))
    assert [(d.file, d.line, d.reason) for d in docs] == [
        ("ints.parquet", 1, WRONG_TYPE),
        ("ints.parquet", 2, WRONG_TYPE),
        ("raw.parquet", 1, None),
        ("raw.parquet", 2, INVALID_UTF8),
    ]
    assert docs[3].detail.startswith("raw.parquet:2: invalid UTF-8") and docs[3].text == "bad \ufffd byte"


# ------------------------------------------------------------------------------------- whole-file errors


def test_glob_matching_nothing(tmp_path: Path) -> None:
    pattern = tmp_path / "nowhere" / "*.jsonl"
    with pytest.raises(DataError) as err:
        list(read_source(_source(pattern), index=3))
    text = str(err.value)
    assert f"source 'web': path '{pattern}' matched no files" in text
    assert "check data.sources[3].path" in text


def test_truncated_jsonl_gz(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(_dump({"text": f"{GOOD} {i}"}) + b"\n" for i in range(2000)))
    path = tmp_path / "web" / "part.jsonl.gz"
    path.parent.mkdir()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError) as err:
        list(read_source(_source(tmp_path / "web" / "*.jsonl.gz")))
    text = str(err.value)
    assert f"truncated or corrupt file {path}" in text
    assert "re-copy it or remove it" in text


def test_not_gzip_at_all(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "web" / "part.jsonl.gz", [_dump({"text": GOOD})])  # plain text named .gz
    with pytest.raises(DataError, match="truncated or corrupt file") as err:
        list(read_source(_source(path)))
    assert str(path) in str(err.value)


def test_truncated_parquet(tmp_path: Path) -> None:
    path = tmp_path / "docs" / "part-000.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"text": [GOOD] * 100}), path)
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(DataError) as err:
        list(read_source(_source(path, "parquet")))
    text = str(err.value)
    assert f"truncated or corrupt file {path}" in text and "re-copy it or remove it" in text


def test_parquet_without_text_column(tmp_path: Path) -> None:
    path = tmp_path / "docs" / "part-000.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"doc_id": ["a"], "body": [GOOD]}), path)
    with pytest.raises(DataError) as err:
        list(read_source(_source(path, "parquet", name="docs"), index=1))
    text = str(err.value)
    assert str(path) in text
    assert "no text column 'text'" in text and "columns: doc_id, body" in text
    assert "set data.sources[1].text_field" in text


def test_parquet_without_id_column(tmp_path: Path) -> None:
    path = tmp_path / "docs" / "part-000.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"body": [GOOD]}), path)
    with pytest.raises(DataError, match="no id column 'doc_id'") as err:
        list(read_source(_source(path, "parquet", text_field="body", id_field="doc_id")))
    assert "data.sources[0].id_field" in str(err.value)

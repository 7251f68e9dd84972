"""prepare_sources / write_prepared: invariants, cross-source dedup, atomic outputs, manifest and digest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaign.config import CleaningConfig, DataConfig, SourceConfig
from campaign.data import (
    CLEAN_SCHEMA,
    REJECTED_SCHEMA,
    pipeline,
    prepare_sources,
    read_manifest,
    text_sha256,
    write_prepared,
)
from campaign.data.manifest import manifest_data_digest
from campaign.errors import DataError
from campaign.evidence import input_identities, read_evidence
from campaign.files import sha256_file

PROSE = ("The interpreter reads the program text and that text is split into tokens with a lexer. "
         "Each statement is then compiled to byte code, and the byte code is run by the virtual machine "
         "of the interpreter, which keeps a stack of frames with the local names of each call.")
LICENCES = Path("/usr/share/common-licenses")


def _write_jsonl(path: Path, texts: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")


def _config(tmp_path: Path, **cleaning) -> DataConfig:
    return DataConfig(sources=(
        SourceConfig(name="web", path=str(tmp_path / "web" / "*.jsonl"), format="jsonl", weight=3),
        SourceConfig(name="books", path=str(tmp_path / "books" / "*.jsonl"), format="jsonl", weight=1),
    ), cleaning=CleaningConfig(**cleaning))


@pytest.fixture
def two_sources(tmp_path: Path) -> DataConfig:
    _write_jsonl(tmp_path / "web" / "b.jsonl", [PROSE + " Two.", "too short", PROSE + "  \n\n\n\n\n"])
    _write_jsonl(tmp_path / "web" / "a.jsonl", [PROSE, 17])
    _write_jsonl(tmp_path / "books" / "x.jsonl", [PROSE + " Two.", PROSE + " Three."])
    return _config(tmp_path)


def test_prepare_counts_and_cross_source_dedup(two_sources: DataConfig) -> None:
    prepared = prepare_sources(two_sources)
    web, books = prepared.stats["web"], prepared.stats["books"]
    assert web["by_reason"] == {"wrong_type": 1, "gopher_short_doc": 1, "exact_duplicate": 1}
    assert prepared.clean["web"]["doc_id"].to_pylist() == ["web/a.jsonl:1", "web/b.jsonl:1"]  # files sorted
    assert books["by_reason"] == {"exact_duplicate": 1}
    rejected = prepared.rejected["books"].to_pylist()[0]
    assert rejected["doc_id"] == "books/x.jsonl:1" and rejected["detail"] == "same text as kept doc web/b.jsonl:1"
    # the padded copy of a.jsonl:1 is a duplicate after normalisation; its rejected text is kept as read
    dup = next(r for r in prepared.rejected["web"].to_pylist() if r["reason"] == "exact_duplicate")
    assert dup["line"] == 3 and dup["text"].endswith("\n\n\n\n\n")
    for name, stats in prepared.stats.items():
        assert stats["n_input"] == stats["n_kept"] + stats["n_rejected"]
        assert stats["n_rejected"] == sum(stats["by_reason"].values())
        assert prepared.clean[name].schema == CLEAN_SCHEMA and prepared.rejected[name].schema == REJECTED_SCHEMA
        assert stats["tokens_kept"] == sum(prepared.clean[name]["n_tokens"].to_pylist()) > 0
    row = prepared.clean["books"].to_pylist()[0]
    assert row["text_sha256"] == text_sha256(row["text"]) and row["n_bytes"] == len(row["text"].encode())
    assert row["n_words"] == len(row["text"].split()) and (row["file"], row["line"]) == ("x.jsonl", 2)


def test_exact_dedup_can_be_turned_off(two_sources: DataConfig) -> None:
    data = two_sources.model_copy(update={"cleaning": CleaningConfig(exact_dedup=False)})
    prepared = prepare_sources(data)
    assert all("exact_duplicate" not in s["by_reason"] for s in prepared.stats.values())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.sampled_from([PROSE, PROSE + " x", "short", "", None, 3, ["a"]]),
                          st.text(max_size=80)), max_size=30))
def test_input_equals_kept_plus_rejected(tmp_path_factory: pytest.TempPathFactory, texts: list[object]) -> None:
    tmp = tmp_path_factory.mktemp("prop")
    _write_jsonl(tmp / "web" / "a.jsonl", texts)
    (tmp / "web" / "b.jsonl").write_bytes(b'{"text": "broken\n\xff\xfe\n')
    _write_jsonl(tmp / "books" / "x.jsonl", texts[::-1])
    prepared = prepare_sources(_config(tmp))
    assert prepared.stats["web"]["n_input"] == len(texts) + 2
    for name, stats in prepared.stats.items():
        assert stats["n_input"] == prepared.clean[name].num_rows + prepared.rejected[name].num_rows
        assert len(set(prepared.clean[name]["text_sha256"].to_pylist())) == prepared.clean[name].num_rows


def test_no_files_is_a_data_error(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "web" / "a.jsonl", [PROSE])
    with pytest.raises(DataError, match=r"source 'books'.*matched no files") as err:
        prepare_sources(_config(tmp_path))
    assert "data.sources[1].path" in str(err.value)


# ------------------------------------------------------------------------------------- writing, manifest


def test_write_prepared_files_and_manifest(two_sources: DataConfig, tmp_path: Path) -> None:
    data_dir = tmp_path / "ws" / "data"
    manifest = _write(two_sources, data_dir)
    assert sorted(p.name for p in (data_dir / "clean").iterdir()) == ["books.parquet", "web.parquet"]
    on_disk = json.loads((data_dir / "manifest.json").read_text())
    assert on_disk == json.loads(json.dumps(manifest)) == read_manifest(data_dir)
    hashes = {e["path"]: sha256_file(data_dir / e["path"]) for e in manifest["files"]}
    assert manifest["data_digest"] == manifest_data_digest(manifest, hashes, two_sources.production_digest())
    assert manifest["data_config_digest"] == two_sources.production_digest()
    assert manifest["tokenizer"] == "gpt2-pretokens"
    web, books = manifest["sources"]
    assert (web["name"], web["weight"], web["clean_file"]) == ("web", 3, "clean/web.parquet")
    assert web["clean_sha256"] == sha256_file(data_dir / "clean" / "web.parquet")
    assert web["n_input"] == 5 and web["by_reason"]["wrong_type"] == 1 and web["planned_share"] == 0.75
    assert books["tokens_kept"] + web["tokens_kept"] == manifest["totals"]["tokens_kept"]
    for entry in manifest["files"]:
        path = data_dir / entry["path"]
        assert entry["sha256"] == sha256_file(path) and entry["bytes"] == path.stat().st_size
        assert entry["rows"] == pq.read_metadata(path).num_rows
    assert [m["source"] for m in manifest["mixture"]] == ["web", "books"]
    assert manifest["totals"]["n_input"] == 7 and manifest["totals"]["n_kept"] == 3
    evidence = read_evidence(data_dir, two_sources)
    assert evidence is not None and evidence.problems == () and evidence.digest == manifest["data_digest"]


def test_empty_rejected_table_is_written_with_schema(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "web" / "a.jsonl", [PROSE])
    data = DataConfig(sources=(SourceConfig(name="web", path=str(tmp_path / "web" / "*.jsonl"), format="jsonl",
                                            weight=1),))
    _write(data, tmp_path / "data")
    table = pq.read_table(tmp_path / "data" / "rejected" / "web.parquet")
    assert table.num_rows == 0 and table.schema.names == REJECTED_SCHEMA.names


def test_killed_write_leaves_no_manifest(two_sources: DataConfig, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "data"
    prepared = prepare_sources(two_sources)
    write_prepared(prepared, data_dir, two_sources.production_digest())
    real = pipeline.atomic_write_parquet
    calls = []

    def dying(path, table):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        return real(path, table)

    monkeypatch.setattr(pipeline, "atomic_write_parquet", dying)
    with pytest.raises(KeyboardInterrupt):
        write_prepared(prepared, data_dir, two_sources.production_digest())
    assert not (data_dir / "manifest.json").exists()  # the old manifest went first: the run is redone
    assert read_evidence(data_dir, two_sources) is None
    assert read_manifest(data_dir) is None
    (data_dir / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match="unreadable data manifest") as err:
        read_manifest(data_dir)
    assert "run `campaign prepare CONFIG` again" in str(err.value)


def test_cleanup_removes_only_files_campaign_wrote(two_sources: DataConfig, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    _write(two_sources, data_dir)
    (data_dir / "clean" / ".web.parquet.abc.tmp").write_bytes(b"half")      # a killed atomic write of ours
    (data_dir / "clean" / "my_curated_corpus.parquet").write_bytes(b"mine")  # a user's file
    one_source = DataConfig(sources=two_sources.sources[:1])
    _write(one_source, data_dir)   # books is no longer configured: its files (ours) go, the user's file stays
    assert sorted(p.name for p in (data_dir / "clean").iterdir()) == ["my_curated_corpus.parquet", "web.parquet"]
    evidence = read_evidence(data_dir, one_source)
    assert evidence.problems == (("data/clean/my_curated_corpus.parquet is not in manifest.json (campaign did not "
                                 "write it in this prepare); move it out of the workspace, or run `campaign "
                                 "prepare` again"),)


def test_outputs_are_deterministic(two_sources: DataConfig, tmp_path: Path) -> None:
    # the same input copied elsewhere: the prepared files do not depend on where the input or output lives; the
    # digest does, because it names the inputs (their paths are part of the data: section)
    shutil.copytree(tmp_path / "web", tmp_path / "elsewhere" / "web")
    shutil.copytree(tmp_path / "books", tmp_path / "elsewhere" / "books")
    m1 = _write(two_sources, tmp_path / "run1" / "data")
    m1_again = _write(two_sources, tmp_path / "run1b" / "data")
    m2 = _write(_config(tmp_path / "elsewhere"), tmp_path / "run2" / "data")
    assert m1 == m1_again
    assert m1["data_digest"] != m2["data_digest"]
    skip = ("data_digest", "data_config_digest", "inputs")
    assert {k: v for k, v in m1.items() if k not in skip} == {k: v for k, v in m2.items() if k not in skip}
    for kind in ("clean", "rejected"):
        for name in ("web", "books"):
            a = (tmp_path / "run1" / "data" / kind / f"{name}.parquet").read_bytes()
            assert a == (tmp_path / "run2" / "data" / kind / f"{name}.parquet").read_bytes()


def _write(data: DataConfig, data_dir: Path) -> dict:
    return write_prepared(prepare_sources(data), data_dir, data.production_digest(), input_identities(data))

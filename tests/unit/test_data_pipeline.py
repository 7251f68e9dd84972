"""prepare_sources / write_prepared: invariants, cross-source dedup, atomic outputs, manifest and digest."""

from __future__ import annotations

import hashlib
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
    check_document,
    data_digest,
    normalise_text,
    pipeline,
    prepare_sources,
    read_manifest,
    text_sha256,
    verify_clean_files,
    write_prepared,
)
from campaign.errors import DataError
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
    manifest = write_prepared(prepare_sources(two_sources), data_dir)
    assert sorted(p.name for p in (data_dir / "clean").iterdir()) == ["books.parquet", "web.parquet"]
    on_disk = json.loads((data_dir / "manifest.json").read_text())
    assert on_disk == json.loads(json.dumps(manifest)) == read_manifest(data_dir)
    assert manifest["data_digest"] == data_digest(data_dir / "clean")
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
    # the digest is sha256 over sorted "name\tsha256\n" lines
    lines = "".join(f"{p.name}\t{sha256_file(p)}\n" for p in sorted((data_dir / "clean").glob("*.parquet")))
    assert manifest["data_digest"] == hashlib.sha256(lines.encode()).hexdigest()
    assert verify_clean_files(data_dir) == []


def test_empty_rejected_table_is_written_with_schema(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "web" / "a.jsonl", [PROSE])
    data = DataConfig(sources=(SourceConfig(name="web", path=str(tmp_path / "web" / "*.jsonl"), format="jsonl",
                                            weight=1),))
    write_prepared(prepare_sources(data), tmp_path / "data")
    table = pq.read_table(tmp_path / "data" / "rejected" / "web.parquet")
    assert table.num_rows == 0 and table.schema.names == REJECTED_SCHEMA.names


def test_killed_write_leaves_no_manifest(two_sources: DataConfig, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "data"
    prepared = prepare_sources(two_sources)
    write_prepared(prepared, data_dir)
    real = pipeline.atomic_write_parquet
    calls = []

    def dying(path, table):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        return real(path, table)

    monkeypatch.setattr(pipeline, "atomic_write_parquet", dying)
    with pytest.raises(KeyboardInterrupt):
        write_prepared(prepared, data_dir)
    assert not (data_dir / "manifest.json").exists()  # the old manifest went first: the run is redone
    assert verify_clean_files(data_dir) == ["data/manifest.json is missing or unreadable; run `campaign prepare` first"]
    assert read_manifest(data_dir) is None
    (data_dir / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match="unreadable data manifest") as err:
        read_manifest(data_dir)
    assert "run `campaign prepare CONFIG` again" in str(err.value)


def test_stale_source_files_are_removed(two_sources: DataConfig, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "clean").mkdir(parents=True)
    (data_dir / "clean" / "old.parquet").write_bytes(b"stale")
    (data_dir / "clean" / ".web.parquet.abc.tmp").write_bytes(b"half")
    write_prepared(prepare_sources(two_sources), data_dir)
    assert sorted(p.name for p in (data_dir / "clean").iterdir()) == ["books.parquet", "web.parquet"]


def test_verify_reports_changed_missing_and_extra(two_sources: DataConfig, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    manifest = write_prepared(prepare_sources(two_sources), data_dir)
    old = {e["path"]: e["sha256"] for e in manifest["files"]}["clean/web.parquet"]
    web = data_dir / "clean" / "web.parquet"
    web.write_bytes(web.read_bytes() + b"x")
    new = sha256_file(web)
    (data_dir / "clean" / "books.parquet").unlink()
    (data_dir / "clean" / "extra.parquet").write_bytes(b"x")
    assert verify_clean_files(data_dir) == [
        "data/clean/books.parquet is missing (listed in manifest.json); run `campaign prepare` again",
        f"data/clean/web.parquet changed since prepare (sha256 {old[:8]}… → {new[:8]}…)",
        "data/clean/extra.parquet is not in manifest.json (added since prepare); remove it or prepare again",
    ]


def test_outputs_are_deterministic(two_sources: DataConfig, tmp_path: Path) -> None:
    # the same input copied elsewhere: outputs must not depend on where the input or output lives
    shutil.copytree(tmp_path / "web", tmp_path / "elsewhere" / "web")
    shutil.copytree(tmp_path / "books", tmp_path / "elsewhere" / "books")
    m1 = write_prepared(prepare_sources(two_sources), tmp_path / "run1" / "data")
    m2 = write_prepared(prepare_sources(_config(tmp_path / "elsewhere")), tmp_path / "run2" / "data")
    assert m1["data_digest"] == m2["data_digest"] and m1 == m2
    for kind in ("clean", "rejected"):
        for name in ("web", "books"):
            a = (tmp_path / "run1" / "data" / kind / f"{name}.parquet").read_bytes()
            assert a == (tmp_path / "run2" / "data" / kind / f"{name}.parquet").read_bytes()
    assert (tmp_path / "run1/data/manifest.json").read_bytes() == (tmp_path / "run2/data/manifest.json").read_bytes()


# --------------------------------------------------------------------- real text: Debian licence texts


@pytest.mark.skipif(not LICENCES.is_dir(), reason="needs /usr/share/common-licenses (Debian base-files)")
def test_licence_texts_through_the_pipeline(tmp_path: Path) -> None:
    """Every licence file (GPL -> GPL-3 etc. are symlinks: natural exact duplicates) plus a CRLF copy."""
    paths = sorted(p for p in LICENCES.iterdir() if p.is_file())
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in paths]
    texts.append(texts[0].replace("\n", "  \r\n"))  # a re-encoded copy: same text after normalisation
    paragraphs = [p for t in texts for p in t.split("\n\n") if p.strip()]
    _write_jsonl(tmp_path / "licences" / "all.jsonl", texts)
    _write_jsonl(tmp_path / "paragraphs" / "all.jsonl", paragraphs)
    data = DataConfig(sources=(
        SourceConfig(name="licences", path=str(tmp_path / "licences" / "*.jsonl"), format="jsonl", weight=1),
        SourceConfig(name="paragraphs", path=str(tmp_path / "paragraphs" / "*.jsonl"), format="jsonl", weight=1),
    ))
    prepared = prepare_sources(data)

    # expectations computed here, at run time, from the texts themselves
    seen: set[str] = set()
    expected: dict[str, list[str | None]] = {}
    for name, docs in (("licences", texts), ("paragraphs", paragraphs)):
        reasons = []
        for text in docs:
            norm = normalise_text(text)
            rejection = check_document(norm, data.cleaning)
            if rejection is None and text_sha256(norm) in seen:
                reasons.append("exact_duplicate")
            else:
                reasons.append(rejection.reason if rejection else None)
                if rejection is None:
                    seen.add(text_sha256(norm))
        expected[name] = reasons
    symlinks = sum(p.is_symlink() for p in paths)
    assert expected["licences"].count("exact_duplicate") >= symlinks + 1 >= 1
    assert expected["licences"].count(None) == len({text_sha256(normalise_text(t)) for t in texts})

    for name in ("licences", "paragraphs"):
        stats = prepared.stats[name]
        got = dict(zip(prepared.rejected[name]["line"].to_pylist(), prepared.rejected[name]["reason"].to_pylist()))
        want = {i + 1: r for i, r in enumerate(expected[name]) if r is not None}
        assert got == want
        assert stats["n_input"] == len(expected[name]) == stats["n_kept"] + stats["n_rejected"]
    # licences quote each other's paragraphs: the shorter ones fail min_words, the repeated ones are duplicates
    para_reasons = prepared.stats["paragraphs"]["by_reason"]
    assert para_reasons["gopher_short_doc"] > 0 and para_reasons["exact_duplicate"] > 0

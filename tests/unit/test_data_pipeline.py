"""prepare_data: invariants, cross-source dedup, resume after a kill, sharding invariance, manifest and digest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaign.config import CleaningConfig, DataConfig, NearDedupConfig, SourceConfig
from campaign.data import (
    CLEAN_SCHEMA,
    REJECTED_SCHEMA,
    check_document,
    normalise_text,
    prepare_data,
    read_manifest,
    shards,
    text_sha256,
)
from campaign.data.manifest import manifest_data_digest
from campaign.errors import DataError
from campaign.evidence import read_evidence
from campaign.files import sha256_file
from tests.helpers.examples import examples

PROSE = (
    "The interpreter reads the program text and that text is split into tokens with a lexer. "
    "Each statement is then compiled to byte code, and the byte code is run by the virtual machine "
    "of the interpreter, which keeps a stack of frames with the local names of each call."
)
LICENCES = Path("/usr/share/common-licenses")
NO_NEAR = CleaningConfig(near_dedup=NearDedupConfig(enabled=False))


def _write_jsonl(path: Path, texts: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")


def _config(tmp_path: Path, cleaning: CleaningConfig = NO_NEAR, **kw) -> DataConfig:
    return DataConfig(
        sources=(
            SourceConfig(name="web", path=str(tmp_path / "web" / "*.jsonl"), format="jsonl", weight=3),
            SourceConfig(name="books", path=str(tmp_path / "books" / "*.jsonl"), format="jsonl", weight=1),
        ),
        cleaning=cleaning,
        **kw,
    )


class Run:
    """A finished prepare: the manifest, per-source stats and the tables read back from disk."""

    def __init__(self, data: DataConfig, data_dir: Path, **kw) -> None:
        self.dir = data_dir
        self.manifest = prepare_data(data, data_dir, **kw)
        self.stats = {s["name"]: s for s in self.manifest["sources"]}
        self.clean = {n: pq.read_table(data_dir / "clean" / f"{n}.parquet") for n in self.stats}
        self.rejected = {n: pq.read_table(data_dir / "rejected" / f"{n}.parquet") for n in self.stats}


@pytest.fixture
def two_sources(tmp_path: Path) -> DataConfig:
    _write_jsonl(tmp_path / "web" / "b.jsonl", [PROSE + " Two.", "too short", PROSE + "  \n\n\n\n\n"])
    _write_jsonl(tmp_path / "web" / "a.jsonl", [PROSE, 17])
    _write_jsonl(tmp_path / "books" / "x.jsonl", [PROSE + " Two.", PROSE + " Three."])
    return _config(tmp_path)


def test_prepare_counts_and_cross_source_dedup(two_sources: DataConfig, tmp_path: Path) -> None:
    run = Run(two_sources, tmp_path / "data")
    web, books = run.stats["web"], run.stats["books"]
    assert web["by_reason"] == {"wrong_type": 1, "gopher_short_doc": 1, "exact_duplicate": 1}
    assert run.clean["web"]["doc_id"].to_pylist() == ["web/a.jsonl:1", "web/b.jsonl:1"]  # files sorted
    assert books["by_reason"] == {"exact_duplicate": 1}
    rejected = next(r for r in run.rejected["books"].to_pylist() if r["reason"] == "exact_duplicate")
    assert (
        rejected["doc_id"] == "books/x.jsonl:1"
        and rejected["detail"] == "same text as kept doc web/b.jsonl:1"
    )
    # the padded copy of a.jsonl:1 is a duplicate after normalisation; a duplicate keeps the compared text
    dup = next(r for r in run.rejected["web"].to_pylist() if r["reason"] == "exact_duplicate")
    assert (
        dup["line"] == 3 and dup["text"] == PROSE and dup["detail"] == "same text as kept doc web/a.jsonl:1"
    )
    short = next(r for r in run.rejected["web"].to_pylist() if r["reason"] == "gopher_short_doc")
    assert short["text"] == "too short"  # a rule rejection keeps the text as read
    for name, stats in run.stats.items():
        assert stats["n_input"] == stats["n_kept"] + stats["n_rejected"]
        assert stats["n_rejected"] == sum(stats["by_reason"].values())
        assert run.clean[name].schema == CLEAN_SCHEMA and run.rejected[name].schema == REJECTED_SCHEMA
        assert stats["tokens_kept"] == sum(run.clean[name]["n_tokens"].to_pylist()) > 0
        for shard in stats["shards"]:
            assert shard["n_input"] == shard["n_kept"] + shard["n_rejected"]
    row = run.clean["books"].to_pylist()[0]
    assert row["text_sha256"] == text_sha256(row["text"]) and row["n_bytes"] == len(row["text"].encode())
    assert row["n_words"] == len(row["text"].split()) and (row["file"], row["line"]) == ("x.jsonl", 2)


def test_exact_dedup_can_be_turned_off(two_sources: DataConfig, tmp_path: Path) -> None:
    data = two_sources.model_copy(update={"cleaning": NO_NEAR.model_copy(update={"exact_dedup": False})})
    run = Run(data, tmp_path / "data")
    assert all("exact_duplicate" not in s["by_reason"] for s in run.stats.values())


def test_near_duplicates_name_the_kept_document(two_sources: DataConfig, tmp_path: Path) -> None:
    # PROSE, PROSE + " Two." and PROSE + " Three." share nearly all their word 5-grams
    run = Run(two_sources.model_copy(update={"cleaning": CleaningConfig()}), tmp_path / "data")
    assert run.clean["web"]["doc_id"].to_pylist() == ["web/a.jsonl:1"]
    assert run.clean["books"].num_rows == 0
    near = [r for t in run.rejected.values() for r in t.to_pylist() if r["reason"] == "near_duplicate"]
    assert {r["doc_id"] for r in near} == {"web/b.jsonl:1", "books/x.jsonl:2"}
    assert all(r["detail"] == "near-duplicate of kept doc web/a.jsonl:1" for r in near)
    removal = {(r["source"], r["reason"]): r for r in run.manifest["removals"]}
    assert removal[("web", "near_duplicate")]["step"] == "near_dedup"
    assert removal[("web", "near_duplicate")]["tokens_exact"] is True
    assert run.manifest["near_dedup"]["clusters"] == 1 and run.manifest["near_dedup"]["largest_cluster"] == 3


@settings(
    max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(st.sampled_from([PROSE, PROSE + " x", "short", "", None, 3, ["a"]]), st.text(max_size=80)),
        max_size=30,
    ),
    st.sampled_from([2**16, 2**20]),
)
def test_input_equals_kept_plus_rejected(
    tmp_path_factory: pytest.TempPathFactory, texts: list[object], shard_bytes: int
) -> None:
    tmp = tmp_path_factory.mktemp("prop")
    _write_jsonl(tmp / "web" / "a.jsonl", texts)
    (tmp / "web" / "b.jsonl").write_bytes(b'{"text": "broken\n\xff\xfe\n')
    _write_jsonl(tmp / "books" / "x.jsonl", texts[::-1])
    run = Run(_config(tmp, CleaningConfig(), shard_bytes=shard_bytes), tmp / "data")
    assert run.stats["web"]["n_input"] == len(texts) + 2
    for name, stats in run.stats.items():
        assert stats["n_input"] == run.clean[name].num_rows + run.rejected[name].num_rows
        assert len(set(run.clean[name]["text_sha256"].to_pylist())) == run.clean[name].num_rows


def test_no_files_is_a_data_error(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "web" / "a.jsonl", [PROSE])
    with pytest.raises(DataError, match=r"source 'books'.*matched no files") as err:
        prepare_data(_config(tmp_path), tmp_path / "data")
    assert "data.sources[1].path" in str(err.value)


# ------------------------------------------------------------------------------------- writing, manifest


def test_files_and_manifest(two_sources: DataConfig, tmp_path: Path) -> None:
    data_dir = tmp_path / "ws" / "data"
    manifest = Run(two_sources, data_dir).manifest
    assert sorted(p.name for p in (data_dir / "clean").iterdir()) == ["books.parquet", "web.parquet"]
    assert not (data_dir / "_work").exists()  # shard parts are removed once the run is finished
    on_disk = json.loads((data_dir / "manifest.json").read_text())
    assert on_disk == json.loads(json.dumps(manifest)) == read_manifest(data_dir)
    evidence = read_evidence(data_dir, two_sources)
    assert evidence.problems == () and evidence.digest == manifest["data_digest"]
    assert (
        manifest["tokenizer"].startswith("gpt2-pretokens (estimate") and manifest["tokens_estimated"] is True
    )
    web, books = manifest["sources"]
    assert (web["name"], web["weight"], web["clean_file"]) == ("web", 3, "clean/web.parquet")
    assert web["clean_sha256"] == sha256_file(data_dir / "clean" / "web.parquet")
    assert web["n_input"] == 5 and web["by_reason"]["wrong_type"] == 1 and web["planned_share"] == 0.75
    assert books["tokens_kept"] + web["tokens_kept"] == manifest["totals"]["tokens_kept"]
    for entry in manifest["files"]:
        path = data_dir / entry["path"]
        assert entry["sha256"] == sha256_file(path) and entry["bytes"] == path.stat().st_size
        assert entry["rows"] == pq.read_metadata(path).num_rows
        assert entry["kind"] in ("clean", "rejected")
    assert [m["source"] for m in manifest["mixture"]] == ["web", "books"]
    assert manifest["totals"]["n_input"] == 7 and manifest["totals"]["n_kept"] == 3
    # inputs: every file read, absolute path, raw bytes and their sha256
    inputs = {Path(e["path"]).name: e for e in manifest["inputs"]}
    assert sorted(inputs) == ["a.jsonl", "b.jsonl", "x.jsonl"]
    for e in manifest["inputs"]:
        assert Path(e["path"]).is_absolute() and e["bytes"] == Path(e["path"]).stat().st_size
        assert e["sha256"] == sha256_file(e["path"])
    # the removal table: per source and reason in pipeline order, docs/chars/tokens
    rows = [(r["source"], r["step"], r["reason"], r["docs"]) for r in manifest["removals"]]
    assert rows == [
        ("web", "read", "wrong_type", 1),
        ("web", "gopher_quality", "gopher_short_doc", 1),
        ("web", "exact_dedup", "exact_duplicate", 1),
        ("books", "exact_dedup", "exact_duplicate", 1),
    ]
    assert all(r["chars"] > 0 and r["tokens"] >= 0 for r in manifest["removals"])
    # the digest covers the manifest, every listed file and the data: section (campaign/evidence.py)
    hashes = {e["path"]: sha256_file(data_dir / e["path"]) for e in manifest["files"]}
    assert manifest["data_digest"] == manifest_data_digest(manifest, hashes, two_sources.production_digest())


def test_real_tokenizer_named_with_version(two_sources: DataConfig, tmp_path: Path) -> None:
    from campaign.data.tokenizer import load_tokenizer

    run = Run(two_sources.model_copy(update={"tokenizer": "cl100k_base"}), tmp_path / "data")
    assert (
        run.manifest["tokenizer"].startswith("cl100k_base (bpe-openai ")
        and not run.manifest["tokens_estimated"]
    )
    tok = load_tokenizer("cl100k_base")
    texts = run.clean["web"]["text"].to_pylist()
    assert run.clean["web"]["n_tokens"].to_pylist() == [len(tok.encode(t)) for t in texts]
    assert "estimated" in run.manifest["rejected_tokens"]


def test_empty_rejected_table_is_written_with_schema(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "web" / "a.jsonl", [PROSE])
    data = DataConfig(
        sources=(SourceConfig(name="web", path=str(tmp_path / "web" / "*.jsonl"), format="jsonl", weight=1),)
    )
    prepare_data(data, tmp_path / "data")
    table = pq.read_table(tmp_path / "data" / "rejected" / "web.parquet")
    assert table.num_rows == 0 and table.schema.names == REJECTED_SCHEMA.names


def _many_files(tmp_path: Path) -> DataConfig:
    for i in range(4):
        _write_jsonl(
            tmp_path / "web" / f"p{i}.jsonl",
            [f"{PROSE} Number {i} {j}." + f" word{j}" * j for j in range(40)],
        )
    _write_jsonl(tmp_path / "books" / "x.jsonl", [PROSE + " Two."] * 3)
    return _config(tmp_path, CleaningConfig(), shard_bytes=2**16)


def test_killed_prepare_redoes_only_unfinished_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _many_files(tmp_path / "in")
    whole = Run(data, tmp_path / "whole")
    real = shards._process
    calls = []

    def dying(shard, *args):
        calls.append(shard.key)
        if len(calls) == 3:
            raise KeyboardInterrupt("killed")
        return real(shard, *args)

    monkeypatch.setattr(shards, "_process", dying)
    with pytest.raises(KeyboardInterrupt):
        prepare_data(data, tmp_path / "killed")
    assert not (tmp_path / "killed" / "manifest.json").exists()
    assert sorted(p.name for p in (tmp_path / "killed" / "_work" / "shards").iterdir()) == sorted(calls[:2])
    monkeypatch.setattr(shards, "_process", real)
    again = Run(data, tmp_path / "killed")
    reused = [s["key"] for src in again.manifest["sources"] for s in src["shards"] if s["reused"]]
    assert reused == calls[:2]  # the two finished shards were not run again
    for entry in whole.manifest["files"]:
        assert (tmp_path / "whole" / entry["path"]).read_bytes() == (
            tmp_path / "killed" / entry["path"]
        ).read_bytes()

    def strip(m):
        return {k: v for k, v in m.items() if k not in ("sources",)}

    assert (
        strip(whole.manifest) == strip(again.manifest)
        and whole.manifest["data_digest"] == again.manifest["data_digest"]
    )


def test_changed_config_invalidates_finished_shards(tmp_path: Path) -> None:
    data = _many_files(tmp_path / "in")
    prepare_data(data, tmp_path / "data", keep_work=True)
    stricter = data.model_copy(update={"cleaning": CleaningConfig(min_words=60)})
    manifest = prepare_data(stricter, tmp_path / "data")
    assert not any(s["reused"] for src in manifest["sources"] for s in src["shards"])
    again = prepare_data(data, tmp_path / "other", keep_work=True)
    assert all(not s["reused"] for src in again["sources"] for s in src["shards"])


def test_cleanup_removes_only_files_campaign_wrote(two_sources: DataConfig, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    prepare_data(two_sources, data_dir)
    (data_dir / "clean" / ".web.parquet.abc.tmp").write_bytes(b"half")  # a killed write of ours
    (data_dir / "clean" / "my_curated_corpus.parquet").write_bytes(b"mine")  # a user's file
    one_source = DataConfig(sources=two_sources.sources[:1], tokenizer=two_sources.tokenizer)
    prepare_data(one_source, data_dir)  # books is no longer configured: its files (ours) go, the user's stays
    assert sorted(p.name for p in (data_dir / "clean").iterdir()) == [
        "my_curated_corpus.parquet",
        "web.parquet",
    ]
    assert read_evidence(data_dir, one_source).problems == (
        (
            "data/clean/my_curated_corpus.parquet is not in manifest.json (campaign did not write it in this prepare); "
            "move it out of the workspace, or run `campaign prepare` again"
        ),
    )


def test_evidence_reports_changed_missing_and_extra(two_sources: DataConfig, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    manifest = prepare_data(two_sources, data_dir)
    old = {e["path"]: e["sha256"] for e in manifest["files"]}["clean/web.parquet"]
    web = data_dir / "clean" / "web.parquet"
    web.write_bytes(web.read_bytes() + b"x")
    new = sha256_file(web)
    (data_dir / "clean" / "books.parquet").unlink()
    (data_dir / "clean" / "extra.parquet").write_bytes(b"x")
    problems = read_evidence(data_dir, two_sources).problems
    assert (
        "data/clean/books.parquet is missing (listed in manifest.json); run `campaign prepare` again"
        in problems
    )
    assert any(
        p.startswith(f"data/clean/web.parquet changed since prepare (sha256 {old[:8]}… is now {new[:8]}…)")
        for p in problems
    )
    assert any(p.startswith("data/clean/extra.parquet is not in manifest.json") for p in problems)
    (data_dir / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match="unreadable data manifest") as err:
        read_manifest(data_dir)
    assert "run `campaign prepare CONFIG` again" in str(err.value)


def test_outputs_do_not_depend_on_place_or_sharding(two_sources: DataConfig, tmp_path: Path) -> None:
    # the same input copied elsewhere and cut into other shards: the same clean and rejected files
    shutil.copytree(tmp_path / "web", tmp_path / "elsewhere" / "web")
    shutil.copytree(tmp_path / "books", tmp_path / "elsewhere" / "books")
    m1 = prepare_data(two_sources, tmp_path / "run1" / "data")
    m2 = prepare_data(_config(tmp_path / "elsewhere", shard_bytes=2**16), tmp_path / "run2" / "data")
    # the files are identical; the digests are not, since they name the inputs and the data: section
    assert m1["data_digest"] != m2["data_digest"]
    for kind in ("clean", "rejected"):
        for name in ("web", "books"):
            a = (tmp_path / "run1" / "data" / kind / f"{name}.parquet").read_bytes()
            assert a == (tmp_path / "run2" / "data" / kind / f"{name}.parquet").read_bytes()
    assert m1["removals"] == m2["removals"] and m1["totals"] == m2["totals"]


def test_a_large_file_in_byte_ranges_matches_one_shard(tmp_path: Path) -> None:
    texts = [
        f"{PROSE} Paragraph {i} of the book, with more words: " + " ".join(f"w{i}x{j}" for j in range(i % 50))
        for i in range(600)
    ]
    _write_jsonl(tmp_path / "web" / "big.jsonl", texts)
    _write_jsonl(tmp_path / "books" / "x.jsonl", [PROSE])
    one = Run(_config(tmp_path, CleaningConfig()), tmp_path / "one")
    many = Run(_config(tmp_path, CleaningConfig(), shard_bytes=2**16), tmp_path / "many")
    assert len(many.stats["web"]["shards"]) > 3 and len(one.stats["web"]["shards"]) == 1
    assert many.clean["web"].equals(one.clean["web"]) and many.rejected["web"].equals(one.rejected["web"])
    assert many.manifest["inputs"] == one.manifest["inputs"]  # the split file is hashed whole, once
    assert {f["path"]: f["sha256"] for f in many.manifest["files"]} == {
        f["path"]: f["sha256"] for f in one.manifest["files"]
    }


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
    data = DataConfig(
        sources=(
            SourceConfig(
                name="licences", path=str(tmp_path / "licences" / "*.jsonl"), format="jsonl", weight=1
            ),
            SourceConfig(
                name="paragraphs", path=str(tmp_path / "paragraphs" / "*.jsonl"), format="jsonl", weight=1
            ),
        ),
        cleaning=NO_NEAR,
    )
    run = Run(data, tmp_path / "data")

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
    assert expected["licences"].count("exact_duplicate") >= symlinks >= 1  # LGPL -> LGPL-3 fails a rule first
    passing = {
        text_sha256(normalise_text(t))
        for t in texts
        if check_document(normalise_text(t), data.cleaning) is None
    }
    assert expected["licences"].count(None) == len(passing)

    for name in ("licences", "paragraphs"):
        stats = run.stats[name]
        got = dict(
            zip(run.rejected[name]["line"].to_pylist(), run.rejected[name]["reason"].to_pylist(), strict=True)
        )
        want = {i + 1: r for i, r in enumerate(expected[name]) if r is not None}
        assert got == want
        assert stats["n_input"] == len(expected[name]) == stats["n_kept"] + stats["n_rejected"]
    # licences quote each other's paragraphs: the shorter ones fail min_words, the repeated ones are duplicates
    para_reasons = run.stats["paragraphs"]["by_reason"]
    assert para_reasons["gopher_short_doc"] > 0 and para_reasons["exact_duplicate"] > 0


def test_removal_table_in_the_catalog(two_sources: DataConfig, tmp_path: Path) -> None:
    from campaign import store

    ws = store.Workspace(tmp_path / "ws")
    manifest = prepare_data(two_sources, ws.data_dir)
    store.record_dataset(ws, "run-1", manifest)
    store.record_dataset(ws, "run-2", manifest)  # the same digest again adds nothing
    with store.catalog(ws, read_only=True) as con:
        rows = con.execute(
            "SELECT source, position, step, reason, n_documents, n_chars, n_tokens, tokens_exact "
            "FROM removals ORDER BY position"
        ).fetchall()
    assert [(r[0], r[2], r[3], r[4]) for r in rows] == [
        (r["source"], r["step"], r["reason"], r["docs"]) for r in manifest["removals"]
    ]
    assert [r[1] for r in rows] == list(range(len(rows)))
    assert all(r[5] > 0 for r in rows) and [r[7] for r in rows] == [False, False, True, True]


def test_the_size_cap_applies_to_the_document_as_read(tmp_path: Path) -> None:
    """A record above max_doc_bytes as read is too_large before normalisation (so it costs no normalising or
    rule work), even when normalising would have shrunk it under the cap; one at the cap is measured as usual."""
    padded = PROSE + " " * 400 + "\n"  # 667 bytes as read; normalised (trailing spaces stripped) 266
    at_cap = ("é" * 150) + " " + PROSE  # 300 + 1 + 266 = 567 bytes: not above 600
    _write_jsonl(tmp_path / "web" / "a.jsonl", [padded, at_cap])
    data = DataConfig(
        sources=(SourceConfig(name="web", path=str(tmp_path / "web" / "*.jsonl"), format="jsonl", weight=1),),
        cleaning=CleaningConfig(max_doc_bytes=600),
    )
    run = Run(data, tmp_path / "data")
    rejected = run.rejected["web"].to_pylist()
    too_large = [r for r in rejected if r["reason"] == "too_large"]
    assert len(too_large) == 1 and too_large[0]["line"] == 1
    assert too_large[0]["detail"] == "667 bytes as read > max_doc_bytes 600"
    assert too_large[0]["text"] == padded  # kept as read
    assert [r["line"] for r in rejected if r["reason"] != "too_large"] + run.clean["web"].column(
        "line"
    ).to_pylist() == [2]
    assert run.stats["web"]["n_input"] == 2 == run.stats["web"]["n_kept"] + run.stats["web"]["n_rejected"]

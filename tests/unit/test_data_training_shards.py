"""Training shards: Megatron's indexed dataset per source, read back with megatron-core's reader, and the blend."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from campaign.config import CleaningConfig, DataConfig, NearDedupConfig, SourceConfig
from campaign.data import prepare_data
from campaign.data.indexed import IndexedDatasetWriter, index_bytes, read_indexed, token_dtype
from campaign.data.tokenizer import load_tokenizer
from campaign.errors import DataError
from campaign.evidence import read_evidence
from campaign.rehearsal.sample import Sample, build_sample, clean_tables_with_shards, documents_from_tables
from tests.helpers.megatron_index import FormatReader, megatron_indexed_module

PROSE = (
    "The interpreter reads the program text and that text is split into tokens with a lexer. "
    "Each statement is then compiled to byte code, and the byte code is run by the virtual machine "
    "of the interpreter, which keeps a stack of frames with the local names of each call."
)


def _write_jsonl(path: Path, texts: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")


def _config(tmp_path: Path, **kw) -> DataConfig:
    _write_jsonl(
        tmp_path / "web" / "b.jsonl", [PROSE + " Two. é ü 中文", "too short", PROSE + "  \n\n\n\n\n"]
    )
    _write_jsonl(tmp_path / "web" / "a.jsonl", [PROSE, 17])
    _write_jsonl(tmp_path / "books" / "x.jsonl", [PROSE + " Two. é ü 中文", PROSE + " Three."])
    return DataConfig(
        sources=(
            SourceConfig(name="web", path=str(tmp_path / "web" / "*.jsonl"), format="jsonl", weight=3),
            SourceConfig(name="books", path=str(tmp_path / "books" / "*.jsonl"), format="jsonl", weight=0.5),
        ),
        cleaning=CleaningConfig(near_dedup=NearDedupConfig(enabled=False)),
        **{"tokenizer": "utf8-bytes", "training_shards": True, **kw},
    )


@pytest.mark.parametrize(
    ("n_vocab", "dtype"), [(256, "uint8"), (257, "uint16"), (65536, "uint16"), (65537, "int32")]
)
def test_ids_take_the_narrowest_dtype_the_vocabulary_allows(n_vocab: int, dtype: str) -> None:
    assert token_dtype(n_vocab).name == dtype
    assert token_dtype(100277).name == "int32"  # cl100k_base


def _documents(prefix: Path, reader: str = "best") -> list[list[int]]:
    """Each document's ids as megatron-core's own IndexedDataset reads them (the transcription of its format when
    megatron-core is not installed, or with reader="format")."""
    module = megatron_indexed_module() if reader != "format" else None
    if module is None and reader == "megatron-core":
        pytest.skip(
            'megatron-core is not installed: `.venv/bin/pip install --no-deps "megatron-core>=0.16,<0.17"`'
        )
    if module is None:
        got = FormatReader(str(prefix))
        assert got.document_indices.tolist() == list(range(len(got) + 1))
        return [got[i].tolist() for i in range(len(got))]
    dataset = module.IndexedDataset(str(prefix), mmap=True)
    assert dataset.document_indices.tolist() == list(range(len(dataset) + 1))  # one sequence per document
    return [dataset[i].tolist() for i in range(len(dataset))]


@pytest.mark.parametrize("reader", ["megatron-core", "format"])
def test_writer_output_reads_back_with_megatrons_reader(tmp_path: Path, reader: str) -> None:
    docs = [[1, 2, 3, 0], [5, 0], [65535, 7, 0], [0]]
    writer = IndexedDatasetWriter(tmp_path / "x", np.dtype("uint16"))
    writer.add_documents(np.concatenate(docs[:2]), np.array([4, 2]))
    writer.add_documents(np.concatenate(docs[2:]), np.array([3, 1]))
    writer.close()
    assert not list(tmp_path.glob(".*"))  # the temporary .bin was renamed
    assert _documents(tmp_path / "x", reader) == docs
    ours = read_indexed(tmp_path / "x")
    assert [ours.document(i).tolist() for i in range(len(ours))] == docs


def test_an_id_beyond_the_dtype_is_a_data_error(tmp_path: Path) -> None:
    writer = IndexedDatasetWriter(tmp_path / "x", np.dtype("uint8"))
    with pytest.raises(DataError, match="token id 256 does not fit the shard's uint8 ids") as err:
        writer.add_documents(np.array([1, 256]), np.array([2]))
    assert "x.bin" in str(err.value.where)
    writer.abort()
    assert not list(tmp_path.iterdir())


def test_a_bad_index_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "x.idx").write_bytes(b"MMIDIDX\x00\x01" + bytes(30))
    with pytest.raises(DataError, match="not a Megatron indexed-dataset index") as err:
        read_indexed(tmp_path / "x")
    assert str(err.value.where).endswith("x.idx")
    assert len(index_bytes(np.array([3, 4]), np.dtype("uint16"))) == 34 + 2 * 4 + 2 * 8 + 3 * 8


def test_prepare_writes_the_clean_documents_tokens_in_order_with_their_boundaries(tmp_path: Path) -> None:
    tokenizer = "cl100k_base"  # int32 ids; the writer's test above reads uint16 ones back
    data = _config(tmp_path, tokenizer=tokenizer)
    manifest = prepare_data(data, tmp_path / "data")
    tok = load_tokenizer(tokenizer)
    for source in manifest["sources"]:
        clean = pq.read_table(tmp_path / "data" / source["clean_file"])
        expected = [[*tok.encode(t), tok.eot_id] for t in clean.column("text").to_pylist()]
        prefix = tmp_path / "data" / "tokenized" / source["name"]
        assert _documents(prefix) == expected
        assert clean.num_rows == source["tokenized"]["n_documents"] > 0
        assert (
            source["tokenized"]["n_tokens"] == source["tokens_kept"] + clean.num_rows
        )  # counts + one EOD each
        assert source["tokenized"]["dtype"] == token_dtype(tok.n_vocab).name
    blend = (tmp_path / "data" / "tokenized" / "blend.txt").read_text()
    assert blend == "3.0 tokenized/web 0.5 tokenized/books\n"  # Megatron's --data-path, weights as configured
    blend_json = json.loads((tmp_path / "data" / "tokenized" / "blend.json").read_text())
    assert blend_json["data_path"] == [3.0, "tokenized/web", 0.5, "tokenized/books"]
    assert [(s["name"], s["weight"]) for s in blend_json["sources"]] == [("web", 3.0), ("books", 0.5)]
    assert manifest["tokenized"]["data_path"] == blend_json["data_path"]


def test_shards_are_in_the_digest_and_a_changed_shard_is_named(tmp_path: Path) -> None:
    data = _config(tmp_path)
    manifest = prepare_data(data, tmp_path / "data")
    listed = {f["path"] for f in manifest["files"] if f["kind"] == "tokenized"}
    assert listed == {
        "tokenized/web.bin",
        "tokenized/web.idx",
        "tokenized/books.bin",
        "tokenized/books.idx",
        "tokenized/blend.txt",
        "tokenized/blend.json",
    }
    evidence = read_evidence(tmp_path / "data", data)
    assert evidence is not None and not evidence.problems
    assert evidence.digest == manifest["data_digest"]
    bin_path = tmp_path / "data" / "tokenized" / "web.bin"
    raw = bytearray(bin_path.read_bytes())
    raw[0] ^= 1
    bin_path.write_bytes(bytes(raw))
    changed = read_evidence(tmp_path / "data", data)
    assert changed is not None and changed.digest != manifest["data_digest"]
    assert any("data/tokenized/web.bin changed since prepare" in p for p in changed.problems)


def test_a_rerun_reuses_the_token_parts_and_turning_shards_off_removes_them(tmp_path: Path) -> None:
    data = _config(tmp_path)
    first = prepare_data(data, tmp_path / "data", keep_work=True)
    before = (tmp_path / "data" / "tokenized" / "web.bin").read_bytes()
    again = prepare_data(data, tmp_path / "data")
    assert all(s["reused"] for src in again["sources"] for s in src["shards"])
    assert again["data_digest"] == first["data_digest"]
    assert (tmp_path / "data" / "tokenized" / "web.bin").read_bytes() == before
    (tmp_path / "data" / "tokenized" / "mine.txt").write_text("not campaign's")
    off = prepare_data(data.model_copy(update={"training_shards": False}), tmp_path / "data")
    assert "tokenized" not in off and not any(f["kind"] == "tokenized" for f in off["files"])
    assert sorted(p.name for p in (tmp_path / "data" / "tokenized").iterdir()) == ["mine.txt"]


def test_shards_need_a_tokenizer_with_ids(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="training_shards needs token ids"):
        _config(tmp_path, tokenizer="gpt2-pretokens")


def test_the_rehearsal_sample_reads_its_ids_from_the_shards(tmp_path: Path) -> None:
    data = _config(tmp_path, tokenizer="cl100k_base")
    prepare_data(data, tmp_path / "data")
    tok = load_tokenizer("cl100k_base")

    def sample() -> Sample:
        evidence = read_evidence(tmp_path / "data", data, load_tables=True)
        assert evidence is not None
        tables, shards = clean_tables_with_shards(evidence, tmp_path / "data")
        docs = documents_from_tables(tables, 10_000, shards, tok.eot_id)
        assert all(d.tokens is not None for d in docs)
        return build_sample(docs, tok, sample_tokens=10_000, seq_len=16, heldout_fraction=0.25)

    good = sample()
    assert not good.problems and good.checks.ids_from == "training shards"
    assert good.checks.n_shard_mismatch == 0
    bin_path = tmp_path / "data" / "tokenized" / "books.bin"
    ids = np.fromfile(bin_path, dtype="<i4")
    ids[3] = ids[4]  # another id inside the first document
    ids.tofile(bin_path)
    bad = sample()
    assert bad.checks.n_shard_mismatch == 1
    assert any("other ids in the training shard than the tokenizer gives" in p for p in bad.problems)

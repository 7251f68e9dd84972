"""Gate evidence: the digest covers what the gates read, and a manifest cannot talk the gates round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaign.config import DataConfig, SourceConfig
from campaign.data import prepare_data
from campaign.errors import DataError
from campaign.evidence import read_evidence
from campaign.gates import data_figures, data_gates


def _document(i: int) -> str:
    """Real prose (Python's own documentation, shipped with Python): distinct paragraphs per document."""
    from campaign.data.demo_corpus import _prose_paragraphs

    paragraphs, _ = _prose_paragraphs()
    return "\n\n".join(paragraphs[(i * 3 + k) % len(paragraphs)] for k in range(3))


@pytest.fixture()
def prepared(tmp_path: Path) -> tuple[DataConfig, Path]:
    for name, n in (("web", 6), ("books", 4)):
        folder = tmp_path / "in" / name
        folder.mkdir(parents=True)
        offset = 0 if name == "web" else 50
        (folder / "a.jsonl").write_text(
            "".join(json.dumps({"text": _document(offset + i)}) + "\n" for i in range(n))
        )
    data = DataConfig(
        sources=tuple(
            SourceConfig(name=n, path=str(tmp_path / "in" / n / "*.jsonl"), format="jsonl", weight=w)
            for n, w in (("web", 0.6), ("books", 0.4))
        )
    )
    data_dir = tmp_path / "ws" / "data"
    prepare_data(data, data_dir)
    return data, data_dir


def _edit_manifest(data_dir: Path, change) -> None:
    path = data_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def test_the_digest_moves_with_every_file_the_manifest_and_the_data_section(prepared):
    data, data_dir = prepared
    base = read_evidence(data_dir, data)
    assert (
        base.problems == ()
        and base.digest == json.loads((data_dir / "manifest.json").read_text())["data_digest"]
    )
    # a rejected file (which the clean-only digest of old ignored) moves the digest
    rejected = data_dir / "rejected" / "web.parquet"
    saved = rejected.read_bytes()
    rejected.write_bytes(saved + b"\0")
    assert read_evidence(data_dir, data).digest != base.digest
    rejected.write_bytes(saved)
    # the data: section (a cleaning threshold) moves it and is named; the weights do not (the mixture gate judges them)
    stricter = data.model_copy(update={"cleaning": data.cleaning.model_copy(update={"min_words": 60})})
    changed = read_evidence(data_dir, stricter)
    assert changed.digest != base.digest and any("data:" in p for p in changed.problems)
    reweighted = data.model_copy(
        update={"sources": tuple(s.model_copy(update={"weight": 1.0}) for s in data.sources)}
    )
    assert read_evidence(data_dir, reweighted).digest == base.digest


def test_an_input_changed_after_prepare_is_named(prepared, tmp_path):
    data, data_dir = prepared
    with open(tmp_path / "in" / "web" / "a.jsonl", "a") as handle:
        handle.write(json.dumps({"text": "one more"}) + "\n")
    problems = read_evidence(data_dir, data).problems
    assert any("input" in p and "a.jsonl changed since prepare" in p for p in problems)


@pytest.mark.parametrize(
    "attack, message",
    [
        (lambda m: m["files"].append(dict(m["files"][0])), "more than once"),
        (lambda m: m["files"][0].update(path="../../etc/passwd.parquet"), "not a file inside"),
        (lambda m: m["files"][0].update(path="clean/*.parquet"), "not a file inside"),
        (lambda m: m.update(files=7), "field 'files' should be a list"),
        (lambda m: m.update(inputs="x"), "field 'inputs'"),
    ],
)
def test_a_manifest_edited_by_hand_is_refused_with_the_field(prepared, attack, message):
    data, data_dir = prepared
    _edit_manifest(data_dir, attack)
    with pytest.raises(DataError, match=message) as err:
        read_evidence(data_dir, data)
    assert "manifest.json" in err.value.where and "campaign prepare" in err.value.fix


def test_figures_come_from_the_rows_not_the_manifests_labels(prepared):
    data, data_dir = prepared
    honest = data_figures(read_evidence(data_dir, data, load_tables=True), data.tokenizer)

    def swap_labels(m):
        for entry in m["files"]:
            entry["source"] = {"web": "books", "books": "web"}[entry["source"]]
        for entry in m["sources"]:
            entry["tokens_kept"] *= 100

    _edit_manifest(data_dir, swap_labels)
    evidence = read_evidence(data_dir, data, load_tables=True)
    assert data_figures(evidence, data.tokenizer) == honest
    volume, mixture = data_gates(honest, {"web": 0.6, "books": 0.4}, 1, 1, 0.5, 0.5)
    assert volume.details["n_documents"] == 10 and mixture.passed

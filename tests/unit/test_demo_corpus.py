"""The generated demo corpus: idempotent, and every injected defect is caught with the right reason."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from campaign.config import CleaningConfig, DataConfig, GopherRepetitionConfig, NearDedupConfig
from campaign.data import REASONS, prepare_data, write_demo_corpus
from campaign.data import filters as F
from campaign.data import readers as R
from campaign.data.demo_corpus import N_MIRRORS, DemoCorpus


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, DataConfig]:
    info = write_demo_corpus(tmp_path_factory.mktemp("demo") / "corpus")
    # the rules the demo's expectations are written for: Gopher quality, the duplicate-line rule, exact dedup
    rules = CleaningConfig(
        max_bullet_lines_fraction=1,
        max_ellipsis_lines_fraction=1,
        near_dedup=NearDedupConfig(enabled=False),
        gopher_repetition=GopherRepetitionConfig(
            max_duplicate_paragraph_fraction=1,
            max_duplicate_paragraph_char_fraction=1,
            max_duplicate_line_char_fraction=1,
            top_ngram_char_fractions=(),
            duplicate_ngram_char_fractions=(),
        ),
    )
    return info, DataConfig(sources=info.sources, cleaning=rules)


class _Prepared:
    def __init__(self, data: DataConfig, out: Path) -> None:
        manifest = prepare_data(data, out)
        self.stats = {s["name"]: s for s in manifest["sources"]}
        self.rejected = {n: pq.read_table(out / "rejected" / f"{n}.parquet") for n in self.stats}


def test_files_and_idempotence(tmp_path: Path) -> None:
    first = write_demo_corpus(tmp_path / "a")
    names = sorted(str(Path(f).relative_to(tmp_path / "a")) for f in first.files)
    assert names == ["docs/part-000.parquet", "web/part-000.jsonl", "web/part-001.jsonl"]
    before = {f: Path(f).read_bytes() for f in first.files}
    again = write_demo_corpus(tmp_path / "a")
    assert again == first and {f: Path(f).read_bytes() for f in again.files} == before
    other_place = write_demo_corpus(tmp_path / "b")
    for a, b in zip(first.files, other_place.files, strict=True):
        assert Path(a).read_bytes() == Path(b).read_bytes()
    other_seed = write_demo_corpus(tmp_path / "c", seed=8)
    assert Path(other_seed.files[0]).read_bytes() != before[first.files[0]]


def test_every_defect_kind_is_injected(demo: tuple[DemoCorpus, DataConfig]) -> None:
    info, _ = demo
    web = info.expected["web"].by_reason
    for reason in (
        R.MALFORMED_JSON,
        R.INVALID_UTF8,
        R.MISSING_TEXT,
        R.WRONG_TYPE,
        R.EMPTY_TEXT,
        F.GOPHER_SHORT_DOC,
        F.GOPHER_TOO_MANY_HASHES,
        F.GOPHER_BELOW_ALPHA_THRESHOLD,
        F.DUP_LINE_FRAC,
        F.GOPHER_TOO_MANY_ELLIPSIS,
        F.GOPHER_ENOUGH_STOP_WORDS,
        "exact_duplicate",
    ):
        assert web.get(reason, 0) >= 1, reason
    assert info.expected["docs"].by_reason["exact_duplicate"] >= 10  # cross-source copies of web pages


def test_pipeline_catches_every_defect(demo: tuple[DemoCorpus, DataConfig], tmp_path: Path) -> None:
    info, data = demo
    prepared = _Prepared(data, tmp_path / "data")
    got = {}
    for table in prepared.rejected.values():
        got.update(zip(table["doc_id"].to_pylist(), table["reason"].to_pylist(), strict=True))
    assert got == info.rejections  # every injected defect, with its reason, and nothing else
    for name, expected in info.expected.items():
        stats = prepared.stats[name]
        assert {k: stats[k] for k in ("n_input", "n_kept", "n_rejected")} == {
            "n_input": expected.n_input,
            "n_kept": expected.n_kept,
            "n_rejected": expected.n_rejected,
        }
        assert stats["by_reason"] == {r: expected.by_reason[r] for r in REASONS if r in expected.by_reason}
        assert stats["n_kept"] > 100 and stats["n_rejected"] <= 0.6 * stats["n_input"]
    tokens = sum(s["tokens_kept"] for s in prepared.stats.values())
    assert 100_000 < tokens < 1_000_000
    docs_dups = [r for r in prepared.rejected["docs"].to_pylist() if r["reason"] == "exact_duplicate"]
    mirrored = [r for r in docs_dups if r["detail"].startswith("same text as kept doc web/part-00")]
    assert len(mirrored) == N_MIRRORS  # the rest are real repeats inside the topics (e.g. "if" and "else")
    assert all(r["detail"].startswith("same text as kept doc pydoc/") for r in docs_dups if r not in mirrored)


def test_demo_prepare_is_deterministic(demo: tuple[DemoCorpus, DataConfig], tmp_path: Path) -> None:
    _, data = demo
    first = prepare_data(data, tmp_path / "one")
    second = prepare_data(data, tmp_path / "two")
    assert first["data_digest"] == second["data_digest"]
    for entry in first["files"]:
        assert (tmp_path / "one" / entry["path"]).read_bytes() == (
            tmp_path / "two" / entry["path"]
        ).read_bytes()

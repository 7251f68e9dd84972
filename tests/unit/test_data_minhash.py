"""MinHash near-dedup: Debian's licence texts as real near-duplicates (GFDL 1.2/1.3) and relatives (GPL 2/3)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaign.config import CleaningConfig, DataConfig, GopherRepetitionConfig, NearDedupConfig, SourceConfig
from campaign.data import prepare_data
from campaign.data.minhash import band_keys, clusters, estimated_jaccard, signatures
from campaign.data.normalise import normalise_text
from tests.helpers.examples import examples

LICENCES = Path("/usr/share/common-licenses")
needs_licences = pytest.mark.skipif(not (LICENCES / "GFDL-1.2").is_file(), reason="needs Debian base-files")


def _shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _jaccard(a: str, b: str) -> float:
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa | sb)


def _licence(name: str) -> str:
    return normalise_text((LICENCES / name).read_text(encoding="utf-8"))


@needs_licences
def test_signature_agreement_tracks_true_jaccard() -> None:
    names = ["GFDL-1.2", "GFDL-1.3", "GPL-2", "GPL-3", "LGPL-2", "LGPL-2.1"]
    texts = [_licence(n) for n in names]
    sig, has = signatures(texts, ngram=5, num_perm=256, seed=1)
    assert has.all() and sig.shape == (6, 256)
    for i, j in ((0, 1), (2, 3), (4, 5)):
        true = _jaccard(texts[i], texts[j])
        # standard error of the estimate with 256 hashes is at most 0.031; allow 4 of them
        assert abs(estimated_jaccard(sig[i], sig[j]) - true) < 0.125, (names[i], names[j], true)
    assert _jaccard(texts[0], texts[1]) > 0.8 and _jaccard(texts[2], texts[3]) < 0.2


@needs_licences
def test_gfdl_pair_collapses_and_gpl_pair_survives(tmp_path: Path) -> None:
    names = ["GFDL-1.2", "GPL-2", "GFDL-1.3", "GPL-3", "Apache-2.0"]
    path = tmp_path / "lic" / "all.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"id": n, "text": (LICENCES / n).read_text()}) + "\n" for n in names))
    data = DataConfig(
        sources=(SourceConfig(name="lic", path=str(path), format="jsonl", id_field="id", weight=1),)
    )
    manifest = prepare_data(data, tmp_path / "data")  # default config: every default rule and near dedup on
    kept = pq.read_table(tmp_path / "data" / "clean" / "lic.parquet")["doc_id"].to_pylist()
    assert sum(n in kept for n in ("GFDL-1.2", "GFDL-1.3")) == 1
    assert "GPL-2" in kept and "GPL-3" in kept
    rejected = pq.read_table(tmp_path / "data" / "rejected" / "lic.parquet").to_pylist()
    gfdl = [r for r in rejected if r["doc_id"].startswith("GFDL")]
    assert len(gfdl) == 1 and gfdl[0]["reason"] == "near_duplicate"
    assert (
        gfdl[0]["doc_id"] == "GFDL-1.3" and gfdl[0]["detail"] == "near-duplicate of kept doc GFDL-1.2"
    )  # first kept
    assert manifest["near_dedup"]["clusters"] == 1


def test_clusters_are_transitive_and_rooted_at_the_first_member() -> None:
    # rows 0-1 share a key in band 0, rows 1-3 share one in band 1, row 2 and 4 stand alone
    keys = np.array([[1, 10], [1, 11], [2, 12], [3, 11], [4, 13]], dtype=np.uint64)
    roots = clusters(keys, np.ones(5, dtype=bool))
    assert roots.tolist() == [0, 0, 2, 0, 4]
    ineligible = np.array([True, False, True, True, True])
    assert clusters(keys, ineligible).tolist() == [0, 1, 2, 3, 4]  # without row 1 nothing links


def _components_reference(keys: np.ndarray, eligible: np.ndarray) -> list[int]:
    """Connected components by a plain breadth-first search over "shares a key in some band" (the smallest member
    names each component): what `clusters` must return."""
    n = len(keys)
    root = list(range(n))
    seen = [False] * n
    for start in range(n):
        if seen[start] or not eligible[start]:
            continue
        todo, members = [start], []
        seen[start] = True
        while todo:
            i = todo.pop()
            members.append(i)
            for j in range(n):
                if not seen[j] and eligible[j] and (keys[i] == keys[j]).any():
                    seen[j] = True
                    todo.append(j)
        for i in members:
            root[i] = min(members)
    return root


@settings(max_examples=examples(200), deadline=None)
@given(
    st.integers(2, 40).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.integers(0, 6), min_size=3, max_size=3), min_size=n, max_size=n),
            st.lists(st.booleans(), min_size=n, max_size=n),
        )
    )
)
def test_clusters_band_by_band_equal_a_plain_search(case) -> None:
    rows, flags = case
    keys = np.array(rows, dtype=np.uint64)
    eligible = np.array(flags, dtype=bool)
    assert clusters(keys, eligible).tolist() == _components_reference(keys, eligible)


def test_band_keys_and_empty_texts() -> None:
    sig, has = signatures(["", "one two three", "one two three"], ngram=5, num_perm=16, seed=1)
    assert has.tolist() == [False, True, True]
    keys = band_keys(sig, bands=4, rows=4)
    assert keys.shape == (3, 4) and (keys[1] == keys[2]).all()


def test_parameters_are_configurable(tmp_path: Path) -> None:
    prose = (
        "Every morning the baker opened the shop at six, lit the ovens, and set out bread for the street. "
        "The neighbours came early, talked about the weather, and carried the warm loaves home to breakfast."
    )
    near = prose.replace("six", "seven")
    path = tmp_path / "p" / "a.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in (prose, near)))
    lenient = CleaningConfig(min_words=5, gopher_repetition=GopherRepetitionConfig(enabled=False))
    src = (SourceConfig(name="p", path=str(path), format="jsonl", weight=1),)
    removed = prepare_data(DataConfig(sources=src, cleaning=lenient), tmp_path / "d1")
    assert removed["sources"][0]["by_reason"] == {"near_duplicate": 1}
    strict = lenient.model_copy(
        update={"near_dedup": NearDedupConfig(bands=1, rows=100)}
    )  # needs ~all hashes equal
    kept = prepare_data(DataConfig(sources=src, cleaning=strict), tmp_path / "d2")
    assert kept["sources"][0]["by_reason"] == {} and kept["near_dedup"]["rows"] == 100

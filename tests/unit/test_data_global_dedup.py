"""The global dedup pass on DuckDB against an in-memory reference (exact by NumPy, near by `minhash.clusters`,
itself checked against a breadth-first search): same rows removed, same reasons, same kept documents."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from campaign.config import CleaningConfig, DataConfig, NearDedupConfig, SourceConfig
from campaign.data.global_dedup import DEDUP_FILE, EXACT_DUPLICATE, NEAR_DUPLICATE, dedup_pass
from campaign.data.minhash import clusters
from campaign.data.shards import SIG, PartWriter, ShardSummary, band_column, sig_schema

BANDS = 4


def _data(**cleaning) -> DataConfig:
    near = cleaning.pop("near", True)
    return DataConfig(
        sources=(SourceConfig(name="web", path="/nonexistent/*.jsonl", format="jsonl", weight=1),),
        cleaning=CleaningConfig(near_dedup=NearDedupConfig(enabled=near, bands=BANDS, rows=2), **cleaning),
    )


def _write(work: Path, keys: np.ndarray, bands: np.ndarray, has_sig: np.ndarray, cuts: list[int]) -> list:
    """Sig parts cut at `cuts` (shard i holds rows cuts[i]:cuts[i+1]), two record batches each where possible;
    shard indices are written out of order to check that run order is the index, not the list order."""
    summaries = []
    for i, (lo, hi) in enumerate(pairwise(cuts)):
        folder = work / "shards" / f"s{i:03d}"
        folder.mkdir(parents=True)
        writer = PartWriter(folder / SIG, sig_schema(BANDS))
        mid = (lo + hi + 1) // 2
        for a, b in ((lo, mid), (mid, hi)):
            writer.write_table(
                pa.table(
                    {
                        "doc_id": [f"d{j}" for j in range(a, b)],
                        "key_hi": keys[a:b, 0],
                        "key_lo": keys[a:b, 1],
                        "has_sig": has_sig[a:b],
                        **{band_column(k): bands[a:b, k] for k in range(BANDS)},
                    },
                    schema=sig_schema(BANDS),
                )
            )
        writer.close()
        summaries.append(ShardSummary(key=folder.name, index=i, source="web", path="", name="", part=i))
    return summaries[::-1]


def _reference(keys, bands, has_sig, cuts, exact_on=True, near_on=True) -> list[tuple]:
    n = len(keys)
    exact_kept = np.arange(n)
    if exact_on:
        pairs = {}
        for i in range(n):
            exact_kept[i] = pairs.setdefault((int(keys[i, 0]), int(keys[i, 1])), i)
    exact = exact_kept != np.arange(n)
    label = clusters(bands, has_sig & ~exact) if near_on else np.arange(n)
    near = (label != np.arange(n)) & ~exact
    shard = np.searchsorted(cuts, np.arange(n), side="right") - 1
    return [
        (
            int(shard[i]),
            int(i - cuts[shard[i]]),
            EXACT_DUPLICATE if exact[i] else NEAR_DUPLICATE,
            f"d{exact_kept[i] if exact[i] else label[i]}",
        )
        for i in np.flatnonzero(exact | near)
    ]


def _result(work: Path) -> list[tuple]:
    table = pq.read_table(work / DEDUP_FILE)
    return list(
        zip(*(table.column(c).to_pylist() for c in ("shard", "row", "reason", "kept_doc_id")), strict=True)
    )


def _case(seed: int, n: int, values: int):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, max(2, n // 3), size=(n, 2)).astype(np.uint64)  # many exact duplicates
    bands = rng.integers(0, values, size=(n, BANDS)).astype(np.uint64)
    keys[:, 1] = keys[:, 0] % 7
    has_sig = rng.random(n) > 0.1
    first: dict[tuple[int, int], int] = {}
    for i in range(n):  # the same text key: an exact duplicate, which has its copy's signature
        j = first.setdefault((int(keys[i, 0]), int(keys[i, 1])), i)
        bands[i], has_sig[i] = bands[j], has_sig[j]
    cuts = sorted({0, n, *rng.integers(1, n, size=3).tolist()})
    return keys, bands, has_sig, cuts


@pytest.mark.parametrize("seed", range(6))
def test_the_pass_equals_the_in_memory_reference(tmp_path: Path, seed: int) -> None:
    n = 300
    keys, bands, has_sig, cuts = _case(seed, n, values=n * 2)
    summaries = _write(tmp_path, keys, bands, has_sig, cuts)
    stats = dedup_pass(summaries, _data(), tmp_path)
    expected = _reference(keys, bands, has_sig, cuts)
    assert _result(tmp_path) == expected
    assert stats.exact_removed == sum(r[2] == EXACT_DUPLICATE for r in expected) > 0
    assert stats.near_removed == sum(r[2] == NEAR_DUPLICATE for r in expected) > 0
    assert not list(tmp_path.glob("dedup.duckdb*")) and not (tmp_path / "dedup.spill").exists()


def test_a_long_chain_of_near_duplicates_is_one_cluster_rooted_at_its_first(tmp_path: Path) -> None:
    """Row i shares one band with row i + 1 (a different band each step), listed so that labels must travel far:
    the components need many rounds of propagation and jumping."""
    n = 500
    perm = np.random.default_rng(3).permutation(n)  # chain order unrelated to row order
    bands = np.arange(n * BANDS, dtype=np.uint64).reshape(n, BANDS) + 10_000
    for step in range(n - 1):
        a, b = perm[step], perm[step + 1]
        bands[b, step % BANDS] = bands[a, step % BANDS] = 1_000_000 + step
    keys = np.stack([np.arange(n), np.arange(n)], axis=1).astype(np.uint64)
    has_sig = np.ones(n, dtype=bool)
    stats = dedup_pass(_write(tmp_path, keys, bands, has_sig, [0, 170, 330, n]), _data(), tmp_path)
    assert _result(tmp_path) == _reference(keys, bands, has_sig, [0, 170, 330, n])
    assert (stats.near_removed, stats.near_clusters, stats.largest_cluster) == (n - 1, 1, n)


def test_with_exact_or_near_off(tmp_path: Path) -> None:
    keys, bands, has_sig, cuts = _case(7, 200, values=150)
    for name, kw, flags in (
        ("exact-off", {"exact_dedup": False}, (False, True)),
        ("near-off", {"near": False}, (True, False)),
    ):
        work = tmp_path / name
        stats = dedup_pass(_write(work, keys, bands, has_sig, cuts), _data(**kw), work)
        assert _result(work) == _reference(keys, bands, has_sig, cuts, *flags)
        assert (stats.exact_removed == 0) == (not flags[0]) and (stats.near_removed == 0) == (not flags[1])


def test_no_rows_and_no_duplicates(tmp_path: Path) -> None:
    keys = np.arange(20, dtype=np.uint64).reshape(10, 2)
    bands = np.arange(40, dtype=np.uint64).reshape(10, BANDS)
    stats = dedup_pass(_write(tmp_path, keys, bands, np.ones(10, bool), [0, 10]), _data(), tmp_path)
    assert _result(tmp_path) == [] and stats.candidates == 10 and stats.near_clusters == 0
    empty = tmp_path / "empty"
    stats = dedup_pass(_write(empty, keys[:0], bands[:0], np.ones(0, bool), [0, 0]), _data(), empty)
    assert _result(empty) == [] and stats.exact_removed == stats.near_removed == 0


def test_a_killed_pass_starts_again_cleanly(tmp_path: Path) -> None:
    keys, bands, has_sig, cuts = _case(8, 200, values=150)
    summaries = _write(tmp_path, keys, bands, has_sig, cuts)
    (tmp_path / "dedup.duckdb").write_bytes(b"left by a killed pass")  # not a database: must be replaced
    (tmp_path / "dedup.spill").mkdir()
    dedup_pass(summaries, _data(), tmp_path)
    assert _result(tmp_path) == _reference(keys, bands, has_sig, cuts)


def test_the_pass_spills_rather_than_exceed_its_memory_limit(tmp_path: Path) -> None:
    """200,000 rows with a 20 MB limit: the tables are larger than that, so DuckDB must work from disk."""
    n = 200_000
    rng = np.random.default_rng(9)
    keys = rng.integers(0, 2**63, size=(n, 2), dtype=np.uint64)
    bands = rng.integers(0, 2**63, size=(n, BANDS), dtype=np.uint64)
    src = rng.integers(0, n, n)
    near = rng.random(n) < 0.05
    bands[near, 1] = bands[src[near], 1]
    dup = rng.random(n) < 0.05  # after the near copies: an exact duplicate has its copy's whole signature
    keys[dup], bands[dup] = keys[src[dup]], bands[src[dup]]
    has_sig = np.ones(n, dtype=bool)
    cuts = [0, 70_000, 140_000, n]
    stats = dedup_pass(_write(tmp_path, keys, bands, has_sig, cuts), _data(), tmp_path, memory_mb=20)
    assert _result(tmp_path) == _reference(keys, bands, has_sig, cuts)
    assert stats.exact_removed > 5_000 and stats.near_removed > 5_000

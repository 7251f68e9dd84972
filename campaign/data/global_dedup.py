"""The global dedup pass over every shard: exact duplicates, then near duplicates, in bounded memory.

Rows are numbered in run order (shards by index, rows in order), so "first occurrence" is the smallest number.
- Exact: rows with the same 128-bit text key; the first is kept, every other names it.
- Near: rows that share a bucket key in any LSH band (only rows with a signature) are joined transitively; the
  smallest row of a component is kept and every other member names it. Exact duplicates take part (same text,
  same buckets as the copy they duplicate, which is smaller, so no component or root changes) and keep their
  exact reason.

Why DuckDB (not NumPy arrays over all rows, as before): a label for every row grows with the corpus (27 bytes a
document measured, 1 GB near 18 M documents). Here every per-row table lives in a DuckDB database file in the
work directory and every grouping and join runs in DuckDB under `memory_limit`, spilling to disk past it, so
the pass holds about `DEDUP_MEMORY_MB` whatever the corpus size (`benchmarks/prepare/bench_dedup_memory.py`).
Python only streams the `sig` parts in (one record batch at a time) and the result out.

Connected components: each band's bucket gives star edges (member -> the bucket's smallest row); labels start at
each node's smallest neighbour and then alternate min-label propagation over the edges with pointer jumping
(label := label of label) until nothing changes. Labels only fall and stay inside the component; at the fixpoint
every edge's ends agree, so each component carries one label, its smallest row (which starts as its own label
and can never fall below itself). `campaign.data.minhash.clusters` is the in-memory reference it is tested against.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from campaign.config import DataConfig
from campaign.data.dedup import EXACT_DUPLICATE
from campaign.data.shards import SIG, ShardSummary, band_column
from campaign.sql.rows import one_row, scalar

if TYPE_CHECKING:
    import duckdb

NEAR_DUPLICATE = "near_duplicate"
DEDUP_FILE = "dedup.parquet"
DEDUP_MEMORY_MB = 256  # DuckDB's memory_limit for the pass; it spills to the work directory past it
DEDUP_ROW_GROUP = 65_536  # rows of a row group of dedup.parquet (finalise reads one shard's row groups)


@dataclass(frozen=True)
class DedupStats:
    exact_removed: int
    near_removed: int
    near_clusters: int  # clusters with more than one member
    largest_cluster: int
    candidates: int  # documents that entered near-dedup (a signature, not an exact duplicate)


def dedup_pass(
    summaries: Sequence[ShardSummary], data: DataConfig, work_dir: Path, memory_mb: int = DEDUP_MEMORY_MB
) -> DedupStats:
    """Global exact then near dedup over all shards; writes work_dir/dedup.parquet (shard, row, reason,
    kept_doc_id), ordered by shard and row. Reads only the `sig` parts; never any text."""
    import duckdb  # here, not at the top: the shard workers import this module and never need it (~30 MB each)

    work_dir = Path(work_dir)
    summaries = sorted(summaries, key=lambda s: s.index)
    cleaning = data.cleaning
    bands = cleaning.near_dedup.bands if cleaning.near_dedup.enabled else 0
    db_path, spill = work_dir / "dedup.duckdb", work_dir / "dedup.spill"
    _remove(db_path, spill)  # a killed pass starts again from the parts
    con = duckdb.connect(
        str(db_path),
        config={
            "memory_limit": f"{int(memory_mb)}MB",
            "temp_directory": str(spill),
            "threads": os.cpu_count() or 1,
            "preserve_insertion_order": False,
        },
    )
    try:
        con.execute("PRAGMA disable_progress_bar")  # it writes to fd 1: a worker's reply stream
        con.register("sig_stream", _sig_reader(work_dir, summaries, bands))
        con.execute("CREATE TABLE docs AS SELECT * FROM sig_stream")
        con.unregister("sig_stream")
        con.execute("CREATE TABLE exact (row BIGINT, kept BIGINT)")
        if cleaning.exact_dedup:
            con.execute("""
                INSERT INTO exact
                SELECT d.row, f.kept FROM docs d
                JOIN (SELECT key_hi, key_lo, min(row) AS kept FROM docs GROUP BY key_hi, key_lo
                      HAVING count(*) > 1) f USING (key_hi, key_lo)
                WHERE d.row <> f.kept""")
        con.execute("CREATE TABLE edges (a BIGINT, b BIGINT)")
        for b in range(bands):
            band = band_column(b)
            con.execute(f"""
                INSERT INTO edges
                SELECT d.row, g.root FROM docs d
                JOIN (SELECT {band} AS k, min(row) AS root FROM docs WHERE has_sig GROUP BY k
                      HAVING count(*) > 1) g ON d.{band} = g.k
                WHERE d.has_sig AND d.row <> g.root""")
        _components(con)
        con.execute("""
            CREATE TABLE removed AS
            SELECT row, kept, true AS exact FROM exact
            UNION ALL
            SELECT l.node, l.label, false FROM labels l ANTI JOIN exact e ON e.row = l.node
            WHERE l.label <> l.node""")
        out = work_dir / DEDUP_FILE
        tmp = out.with_name(f".{out.name}.tmp")
        con.execute(f"""
            COPY (SELECT d.shard, d.local AS row,
                         CASE WHEN r.exact THEN '{EXACT_DUPLICATE}' ELSE '{NEAR_DUPLICATE}' END AS reason,
                         k.doc_id AS kept_doc_id
                  FROM removed r JOIN docs d ON d.row = r.row JOIN docs k ON k.row = r.kept
                  ORDER BY r.row)
            TO '{_sql_path(tmp)}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {DEDUP_ROW_GROUP})""")
        tmp.replace(out)
        counts = one_row(
            con,
            """
            SELECT (SELECT count(*) FROM exact) AS exact_removed, coalesce(sum(n), 0) AS near_removed,
                   count(*) AS clusters, coalesce(max(n) + 1, 0) AS largest
            FROM (SELECT count(*) AS n FROM removed WHERE NOT exact GROUP BY kept)""",
        )
        exact_removed, near_removed = counts["exact_removed"], counts["near_removed"]
        clusters, largest = counts["clusters"], counts["largest"]
        candidates = 0
        if cleaning.near_dedup.enabled:
            candidates = scalar(
                con, "SELECT count(*) FROM docs d ANTI JOIN exact e ON e.row = d.row WHERE d.has_sig"
            )
    finally:
        con.close()
        _remove(db_path, spill, db_path.with_name(db_path.name + ".wal"))
    return DedupStats(
        exact_removed=int(exact_removed),
        near_removed=int(near_removed),
        near_clusters=int(clusters),
        largest_cluster=int(largest),
        candidates=int(candidates),
    )


def _components(con: duckdb.DuckDBPyConnection) -> None:
    """labels(node, label): every node of an edge labelled with its component's smallest row."""
    con.execute("CREATE TABLE e AS SELECT DISTINCT a, b FROM edges")  # the bands repeat most edges
    con.execute("DROP TABLE edges")
    con.execute("""
        CREATE TABLE labels AS
        SELECT node, min(nbr) AS label FROM (SELECT a AS node, b AS nbr FROM e UNION ALL SELECT b, b FROM e)
        GROUP BY node""")
    while True:
        con.execute("""
            CREATE TABLE step AS
            SELECT node, min(label) AS label FROM (
                SELECT node, label FROM labels
                UNION ALL SELECT e.a, l.label FROM e JOIN labels l ON l.node = e.b
                UNION ALL SELECT e.b, l.label FROM e JOIN labels l ON l.node = e.a)
            GROUP BY node""")
        con.execute("""
            CREATE TABLE jumped AS
            SELECT s.node, least(s.label, t.label) AS label FROM step s JOIN step t ON t.node = s.label""")
        changed = scalar(
            con, "SELECT count(*) FROM jumped j JOIN labels l USING (node) WHERE j.label <> l.label"
        )
        con.execute("DROP TABLE labels")
        con.execute("DROP TABLE step")
        con.execute("ALTER TABLE jumped RENAME TO labels")
        if not changed:
            return


def _sig_reader(work_dir: Path, summaries: Sequence[ShardSummary], bands: int) -> pa.RecordBatchReader:
    """Every shard's `sig` part as one stream of record batches, with each row's global number, shard index
    and row in its shard: (row, shard, local, doc_id, key_hi, key_lo, has_sig, band_0 ...)."""
    band_names = [band_column(b) for b in range(bands)]
    schema = pa.schema(
        [
            ("row", pa.int64()),
            ("shard", pa.int64()),
            ("local", pa.int64()),
            ("doc_id", pa.string()),
            ("key_hi", pa.uint64()),
            ("key_lo", pa.uint64()),
            ("has_sig", pa.bool_()),
            *[(name, pa.uint64()) for name in band_names],
        ]
    )

    def batches() -> Iterator[pa.RecordBatch]:
        start = 0
        for s in summaries:
            # no `with`: a batch handed to DuckDB keeps its mapped region alive (Arrow counts references)
            reader = pa.ipc.open_file(pa.memory_map(str(work_dir / "shards" / s.key / SIG), "r"))
            local = 0
            for i in range(reader.num_record_batches):
                batch = reader.get_batch(i)
                n = batch.num_rows
                yield pa.record_batch(
                    [
                        pa.array(np.arange(start, start + n, dtype=np.int64)),
                        pa.array(np.full(n, s.index, dtype=np.int64)),
                        pa.array(np.arange(local, local + n, dtype=np.int64)),
                        *[
                            batch.column(name)
                            for name in ("doc_id", "key_hi", "key_lo", "has_sig", *band_names)
                        ],
                    ],
                    schema=schema,
                )
                start += n
                local += n

    return pa.RecordBatchReader.from_batches(schema, batches())


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def _remove(*paths: Path) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

"""Benchmark decontamination: remove a training document that shares a word n-gram (13 words, as GPT-3) with a text
of an evaluation set named in `data.decontaminate.benchmarks`.

Words are maximal runs of letters and digits of the lowercased text (ASCII punctuation and whitespace separate
them; every non-ASCII character counts as a letter), as GPT-3's overlap analysis lowercased and dropped
punctuation. Each word is hashed (64-bit FNV-1a of its UTF-8 bytes) and each n-gram is the 64-bit FNV-1a of its
words' hashes, in one compiled pass over a batch (Numba); the evaluation n-grams are a sorted array looked up
with a binary search, after a table of hash buckets has ruled out nearly every batch n-gram with one gather, so
memory is 8 bytes per evaluation n-gram (and the table, 4 MB at most) plus 8 per batch word, whatever the corpus
size.
The reason names the benchmark (`benchmark_overlap_<name>`, so the removal table counts each benchmark), and the
detail the evaluation record (file:line) and the matched span. An evaluation text shorter than n words has no
n-gram and cannot match (counted in the index as `n_short`). A bad evaluation file is a DataError naming file:line,
and so is one with nothing to match: empty, blank, or no text of n words.

Source: Brown et al. 2020 (GPT-3), arXiv 2005.14165, App. C: training documents with a 13-gram overlap with any
benchmark's test or development set were removed.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from numba import njit

from campaign.config import BenchmarkFileConfig, DecontaminateConfig
from campaign.data.filters.base import Rejection
from campaign.errors import DataError

BENCHMARK_OVERLAP = "benchmark_overlap_{name}"
BENCHMARK_OVERLAP_PREFIX = "benchmark_overlap_"

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)

# ASCII bytes that belong to a word: digits and letters (the text is lowercased first).
_WORD_BYTE = np.zeros(256, np.bool_)
_WORD_BYTE[0x30:0x3A] = _WORD_BYTE[0x41:0x5B] = _WORD_BYTE[0x61:0x7B] = True
_WORD_BYTE[0x80:] = True


@njit(cache=True, nogil=True)
def _ngram_kernel(data, offsets, n, word_byte):  # pragma: no cover - compiled
    """Every word n-gram of every text: (text, first byte, end byte, hash)."""
    cap = len(data) // 2 + 1
    out_doc = np.empty(cap, np.int32)
    out_start = np.empty(cap, np.int64)
    out_end = np.empty(cap, np.int64)
    out_hash = np.empty(cap, np.uint64)
    ring = np.empty(n, np.uint64)
    ring_start = np.empty(n, np.int64)
    m = 0
    for d in range(len(offsets) - 1):
        i = offsets[d]
        end = offsets[d + 1]
        count = 0
        while i < end:
            if not word_byte[data[i]]:
                i += 1
                continue
            start = i
            h = _FNV_OFFSET
            while i < end and word_byte[data[i]]:
                h = (h ^ np.uint64(data[i])) * _FNV_PRIME
                i += 1
            ring[count % n] = h
            ring_start[count % n] = start
            count += 1
            if count >= n:
                g = _FNV_OFFSET
                for k in range(count - n, count):
                    g = (g ^ ring[k % n]) * _FNV_PRIME
                out_doc[m] = d
                out_start[m] = ring_start[(count - n) % n]
                out_end[m] = i
                out_hash[m] = g
                m += 1
    return out_doc[:m], out_start[:m], out_end[:m], out_hash[:m]


def _buffer(texts: list[str]) -> tuple[bytes, np.ndarray, np.ndarray]:
    encoded = [t.lower().encode("utf-8", "surrogatepass") for t in texts]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=offsets[1:])
    joined = b"".join(encoded)
    return joined, np.frombuffer(joined, np.uint8), offsets


def ngrams(texts: list[str], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bytes]:
    """(text, first byte, end byte, hash) of every word n-gram of the lowercased texts, and their UTF-8 bytes."""
    joined, data, offsets = _buffer(texts)
    doc, start, end, hashes = _ngram_kernel(data, offsets, n, _WORD_BYTE)
    return doc, start, end, hashes, joined


def _bucket_bits(n_hashes: int) -> int:
    return min(max(int(n_hashes).bit_length() + 3, 10), 22)


@dataclass(frozen=True)
class BenchmarkIndex:
    """The n-grams of every evaluation text, sorted, with the benchmark and record each first came from."""

    n: int
    names: tuple[str, ...]
    hashes: np.ndarray  # sorted unique uint64
    bench: np.ndarray  # index into names, per hash
    where: tuple[str, ...]  # "file:line" per hash
    n_texts: tuple[int, ...]  # evaluation texts read, per benchmark
    n_short: tuple[int, ...]  # of which shorter than n words

    @functools.cached_property
    def buckets(self) -> np.ndarray:
        """Which of 2**k buckets (a hash's top k bits) hold an evaluation n-gram: a gather on it rules out nearly
        every n-gram of a batch before the binary search (k gives at least 8 buckets per n-gram, 4 MB at most)."""
        bits = _bucket_bits(len(self.hashes))
        out = np.zeros(1 << bits, np.bool_)
        out[self.hashes >> np.uint64(64 - bits)] = True
        return out


def load_benchmarks(cfg: DecontaminateConfig) -> BenchmarkIndex:
    """Read every evaluation file and hash its n-grams (cached per process while the files are unchanged)."""
    stamps = tuple((b.path, _stamp(b.path)) for b in cfg.benchmarks)
    return _load(cfg, stamps)


def check_benchmarks(cfg: DecontaminateConfig) -> None:
    """Read every evaluation file, raising its first problem as a DataError naming file:line, without hashing
    (the command's process checks them before the shards run and never loads the compiled pass)."""
    for b_index, bench in enumerate(cfg.benchmarks):
        _check_can_match(bench, b_index, _read_benchmark(bench, b_index)[0], cfg.ngram)


# A word as the n-gram pass counts them: a maximal run of letters and digits (ASCII punctuation, symbols, control
# characters and whitespace separate words; every non-ASCII character counts as a letter).
_SEPARATORS = re.compile(r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+")


def _check_can_match(bench: BenchmarkFileConfig, b_index: int, texts: list[str], n: int) -> None:
    """An evaluation file with no text to match (empty, blank lines, empty or null fields) or none of whose texts
    has n words (so no training document could ever match it) is a DataError naming it: decontaminating against it
    would say nothing while seeming to check."""
    words = [len([w for w in _SEPARATORS.split(t) if w]) for t in texts]
    if not any(words):
        what = f"{len(texts)} texts, none with a word" if texts else "no texts"
        raise _bad(
            bench,
            b_index,
            bench.path,
            f"{what} in its fields {', '.join(bench.text_fields)}: there is nothing to decontaminate against",
            f"point data.decontaminate.benchmarks[{b_index}].path at the evaluation set's file (JSONL or Parquet with "
            "the texts), or remove the benchmark",
        )
    if max(words) < n:
        raise _bad(
            bench,
            b_index,
            bench.path,
            f"none of its {len(texts)} texts has {n} words (the longest has {max(words)}): no {n}-gram of it can "
            "match a training document",
            f"lower data.decontaminate.ngram to at most {max(words)}, or remove the benchmark",
        )


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=2)
def _load(cfg: DecontaminateConfig, _stamps) -> BenchmarkIndex:
    all_hashes, all_bench, all_where = [], [], []
    where_names: list[str] = []
    n_texts, n_short = [], []
    for b_index, bench in enumerate(cfg.benchmarks):
        texts, wheres = _read_benchmark(bench, b_index)
        _check_can_match(bench, b_index, texts, cfg.ngram)
        doc, _, _, hashes, _ = ngrams(texts, cfg.ngram)
        n_texts.append(len(texts))
        n_short.append(len(texts) - len(np.unique(doc)))
        all_hashes.append(hashes)
        all_bench.append(np.full(len(hashes), b_index, np.int16))
        all_where.append(doc.astype(np.int64) + len(where_names))
        where_names += wheres
    if not all_hashes:
        empty = np.zeros(0, np.uint64)
        return BenchmarkIndex(cfg.ngram, (), empty, np.zeros(0, np.int16), (), (), ())
    hashes = np.concatenate(all_hashes)
    order = np.argsort(hashes, kind="stable")  # the first record of a repeated n-gram names it
    hashes = hashes[order]
    bench_of = np.concatenate(all_bench)[order]
    where = np.concatenate(all_where)[order]
    first = np.r_[True, hashes[1:] != hashes[:-1]] if len(hashes) else np.zeros(0, bool)
    return BenchmarkIndex(
        n=cfg.ngram,
        names=tuple(b.name for b in cfg.benchmarks),
        hashes=hashes[first],
        bench=bench_of[first],
        where=tuple(where_names[i] for i in where[first]),
        n_texts=tuple(n_texts),
        n_short=tuple(n_short),
    )


def _bad(bench: BenchmarkFileConfig, b_index: int, where: str, message: str, fix: str) -> DataError:
    return DataError(
        f"evaluation file of benchmark '{bench.name}': {message}",
        where=f"{where} (data.decontaminate.benchmarks[{b_index}])",
        fix=fix,
    )


def _read_benchmark(bench: BenchmarkFileConfig, b_index: int) -> tuple[list[str], list[str]]:
    """The texts of an evaluation file with their "file:line" (Parquet: row)."""
    path = Path(bench.path)
    texts: list[str] = []
    wheres: list[str] = []
    fields = bench.text_fields
    fix_fields = f"set data.decontaminate.benchmarks[{b_index}].text_fields to the fields that hold the texts"
    if path.suffix == ".parquet":
        try:
            table = pq.read_table(path)
        except FileNotFoundError:
            raise _missing(bench, b_index) from None
        except (pa.ArrowException, OSError) as exc:
            raise _bad(
                bench, b_index, str(path), f"not a readable Parquet file ({exc})", "re-export it"
            ) from None
        for name in fields:
            if name not in table.column_names:
                raise _bad(
                    bench,
                    b_index,
                    str(path),
                    f"no column '{name}' (columns: {', '.join(table.column_names)})",
                    fix_fields,
                )
        columns = [table.column(name).to_pylist() for name in fields]
        for row, values in enumerate(zip(*columns, strict=True), 1):
            for name, value in zip(fields, values, strict=True):
                _add(texts, wheres, value, f"{path}:{row}", name, bench, b_index)
        return texts, wheres
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise _missing(bench, b_index) from None
    except OSError as exc:
        raise _bad(bench, b_index, str(path), f"cannot read it: {exc.strerror}", "check the path") from None
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise _bad(
                bench,
                b_index,
                where,
                f"not a JSON object ({exc})",
                "fix the line: the file is JSONL, one JSON object a line (or a .parquet file)",
            ) from None
        if not isinstance(obj, dict):
            raise _bad(
                bench, b_index, where, f"a JSON {type(obj).__name__}, not an object", "one object a line"
            )
        for name in fields:
            if name not in obj:
                raise _bad(bench, b_index, where, f"no field '{name}' (fields: {', '.join(obj)})", fix_fields)
            _add(texts, wheres, obj[name], where, name, bench, b_index)
    return texts, wheres


def _add(
    texts: list[str],
    wheres: list[str],
    value,
    where: str,
    name: str,
    bench: BenchmarkFileConfig,
    b_index: int,
) -> None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):  # e.g. answer choices
        value = "\n".join(value)
    if value is None:
        return
    if not isinstance(value, str):
        raise _bad(
            bench,
            b_index,
            where,
            f"field '{name}' is {type(value).__name__} ({json.dumps(value, default=str)[:80]}), not text",
            f"name only text fields in data.decontaminate.benchmarks[{b_index}].text_fields",
        )
    texts.append(value)
    wheres.append(where)


def _missing(bench: BenchmarkFileConfig, b_index: int) -> DataError:
    return _bad(
        bench,
        b_index,
        bench.path,
        "file not found",
        f"check data.decontaminate.benchmarks[{b_index}].path (relative to the config file)",
    )


def find_overlaps(texts: list[str], index: BenchmarkIndex) -> list[Rejection | None]:
    """Per text, the rejection for its first n-gram found in an evaluation text, or None."""
    out: list[Rejection | None] = [None] * len(texts)
    if not len(index.hashes) or not texts:
        return out
    doc, start, end, hashes, joined = ngrams(texts, index.n)
    bits = _bucket_bits(len(index.hashes))
    maybe = np.flatnonzero(index.buckets[hashes >> np.uint64(64 - bits)])  # in n-gram order
    pos = np.searchsorted(index.hashes, hashes[maybe])
    pos[pos == len(index.hashes)] = 0
    found = index.hashes[pos] == hashes[maybe]
    hits, pos = maybe[found], pos[found]
    seen = set()
    # in text order, so the first hit of each text is its first matched n-gram
    for h, p in zip(hits.tolist(), pos.tolist(), strict=True):
        d = int(doc[h])
        if d in seen:
            continue
        seen.add(d)
        span = " ".join(joined[start[h] : end[h]].decode("utf-8", "replace").split())
        name = index.names[int(index.bench[p])]
        out[d] = Rejection(
            BENCHMARK_OVERLAP.format(name=name), f"{index.n}-gram of {name} ({index.where[p]}): '{span}'"
        )
    return out


def warm() -> None:
    """Compile the n-gram pass once (`make install`), so a worker's first batch does not."""
    ngrams(["warm up the benchmark n-gram pass"], 2)

"""MinHash signatures over word n-grams, LSH banding, and transitive near-duplicate clusters.

Shingles: the text is lowercased and split on whitespace; every run of `ngram` consecutive words is one
shingle (a text with fewer words is one shingle of all its words; a text with none has no signature and
is never a near-duplicate). Words are hashed to 64 bits by rensa (`RMinHash.hash_token_sets`, each distinct
word of a batch once) and a shingle's hash is a multiply-xor chain of its words' hashes (NumPy, vectorised
over the whole batch).

Signatures: rensa's `RMinHash` (a Rust MinHash over `bands x rows` seeded permutations, 32-bit values),
computed for a whole batch at once with `digest_matrix_from_flat_token_hashes`: much the fastest of the options
compared (docs/design.md, "Prepare at scale").

Banding: the signature is cut into `bands` bands of `rows` values; each band is folded into one 64-bit
bucket key. Two documents sharing a bucket key in any band are candidates, with probability
1 - (1 - s^rows)^bands for Jaccard similarity s (14 x 8: 0.56 at s=0.7, 0.92 at 0.8, 0.99 at 0.85).
Candidates are joined transitively (connected components). Keep rule: in each cluster the document that
comes first in the run's order (sources in config order, files sorted, lines in order) is kept, the same
rule as exact dedup; every other member is removed naming the kept one. FineWeb keeps a random member; a
fixed rule makes the output independent of scheduling.

Source: Broder 1997 (MinHash); Leskovec, Rajaraman & Ullman, Mining of Massive Datasets ch. 3 (banding);
Penedo et al. 2024 (FineWeb) §3 (5-grams, 14 x 8); rensa (github.com/beowolx/rensa).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import rensa

_MULT = np.uint64(0x9E3779B97F4A7C15)
_BAND_MULT = np.uint64(0xBF58476D1CE4E5B9)


def shingle_hashes(word_hashes: Sequence[int], ngram: int) -> np.ndarray:
    """64-bit hashes of the word n-grams of one document (unique values, sorted)."""
    h = np.asarray(word_hashes, dtype=np.uint64)
    if len(h) == 0:
        return h
    if len(h) <= ngram:
        acc = h[:1].copy()
        for i in range(1, len(h)):
            acc = acc * _MULT ^ h[i : i + 1]
        return acc
    m = len(h) - ngram + 1
    acc = h[:m].copy()
    for i in range(1, ngram):
        acc = acc * _MULT ^ h[i : i + m]
    return np.unique(acc)


def signatures(
    texts: Sequence[str], *, ngram: int, num_perm: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(signature matrix uint32 [len(texts), num_perm], has_signature bool [len(texts)]).

    The whole batch at once: the lowercased texts are split into words by Arrow (`filters.split_words`,
    the words of `str.split()`), each *distinct* word is hashed once by rensa, and the shingle hashes of all
    documents are built together with NumPy (the multiply-xor chain of `shingle_hashes`). A MinHash is a
    minimum over the shingle set, so repeated shingles need not be removed first: the signatures are those
    of `shingle_hashes` document by document (`_signatures_per_document`, kept for texts Arrow cannot hold)."""
    n = len(texts)
    if n == 0:
        return np.zeros((0, num_perm), dtype=np.uint32), np.zeros(0, dtype=bool)
    from campaign.data.filters import split_words

    try:
        words, counts = split_words([t.lower() for t in texts])
    except (pa.ArrowException, UnicodeEncodeError):
        return _signatures_per_document(texts, ngram=ngram, num_perm=num_perm, seed=seed)
    encoded = pc.dictionary_encode(words)
    del words
    vocab_hash = np.asarray(
        rensa.RMinHash.hash_token_sets([encoded.dictionary.to_pylist()])[0], dtype=np.uint64
    )
    h = vocab_hash[encoded.indices.to_numpy()] if len(vocab_hash) else np.zeros(0, dtype=np.uint64)
    del encoded
    starts = np.concatenate([[0], np.cumsum(counts)])[:-1]
    # Document d has max(counts[d] - ngram + 1, 1) shingles when it has words (a short text is one shingle of
    # all its words), none otherwise; shingle j of d starts at word starts[d] + j and spans min(ngram, counts[d]).
    per_doc = np.where(counts > 0, np.maximum(counts - ngram + 1, 1), 0)
    doc = np.repeat(np.arange(n), per_doc)
    first = np.repeat(starts - np.concatenate([[0], np.cumsum(per_doc)])[:-1], per_doc) + np.arange(len(doc))
    span = np.minimum(counts, ngram)[doc]
    acc = h[first] if len(first) else np.zeros(0, dtype=np.uint64)
    for i in range(1, ngram):
        more = span > i
        if not more.any():
            break
        acc[more] = acc[more] * _MULT ^ h[first[more] + i]
    offsets = np.concatenate([[0], np.cumsum(per_doc)]).astype(np.uint64)
    matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(acc, offsets, num_perm, seed)
    sig = np.asarray(matrix.to_rows(), dtype=np.uint32).reshape(n, num_perm)
    return sig, per_doc > 0


def _signatures_per_document(
    texts: Sequence[str], *, ngram: int, num_perm: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """`signatures` one document at a time with `shingle_hashes` (what the batch code must equal)."""
    n = len(texts)
    word_hashes = rensa.RMinHash.hash_token_sets([t.lower().split() for t in texts])
    shingles = [shingle_hashes(h, ngram) for h in word_hashes]
    lengths = np.fromiter((len(s) for s in shingles), dtype=np.int64, count=n)
    has = lengths > 0
    flat = np.concatenate(shingles) if lengths.sum() else np.zeros(0, dtype=np.uint64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint64)
    matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(flat, offsets, num_perm, seed)
    sig = np.asarray(matrix.to_rows(), dtype=np.uint32).reshape(n, num_perm)
    return sig, has


def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """Fold each band of `rows` signature values into one uint64 bucket key: [n, bands]."""
    n = sig.shape[0]
    cube = sig[:, : bands * rows].reshape(n, bands, rows).astype(np.uint64)
    acc = np.zeros((n, bands), dtype=np.uint64)
    for j in range(rows):
        acc = (acc ^ cube[:, :, j]) * _BAND_MULT
    return acc


def clusters(keys: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Cluster root (the smallest member index) of every row: rows sharing a bucket key in any band are
    joined, transitively. `keys` is [n, bands] uint64; rows not `eligible` are their own cluster."""
    label = np.arange(keys.shape[0], dtype=np.int64)
    idx = np.flatnonzero(eligible)
    if len(idx) >= 2:
        for b in range(keys.shape[1]):
            join_band(label, idx, keys[idx, b])
    return label


def join_band(label: np.ndarray, rows: np.ndarray, keys: np.ndarray) -> None:
    """Join, in `label` (in place), the rows that share a bucket key in one band (`keys[i]` is row `rows[i]`'s
    key). The dedup pass calls this one band at a time, so only one band's keys are in memory at once."""
    if len(rows) < 2:
        return
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    rows_sorted = rows[order]
    starts = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
    group_first = rows_sorted[np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))]
    linked = ~starts
    if linked.any():
        join_edges(label, rows_sorted[linked], group_first[linked])


def join_edges(label: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Union the components of a[i] and b[i] in `label`, in place. `label` maps every row to its component's
    root, the smallest member (identity for rows on their own). Roots are hooked under the smaller root, then
    every label is shortcut to its root (pointer jumping), until every edge has one root: O(log n) rounds."""
    while True:
        ra, rb = label[a], label[b]
        apart = ra != rb
        if not apart.any():
            return
        a, b, ra, rb = a[apart], b[apart], ra[apart], rb[apart]
        np.minimum.at(label, np.maximum(ra, rb), np.minimum(ra, rb))
        while True:
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label[:] = jumped


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """Fraction of equal signature values: an unbiased estimate of the Jaccard similarity."""
    return float(np.mean(sig_a == sig_b))

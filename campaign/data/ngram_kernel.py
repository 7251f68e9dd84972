"""Word n-gram repetition measures of many documents in one compiled pass (Gopher repetition, Rae et al. 2021).

For every document and n: the most frequent n-gram's count, characters and first position (top n-gram rules)
and whether any n-gram repeats with the characters of the words its repeats cover (duplicated n-gram rules),
exactly as `filters.ngram_tables_numpy` computes them (property-tested against it). The NumPy version gives
every n-gram a dense id with one batch-wide hash table per level; its random accesses into a table of millions
of entries cost about 85 ns each. Here each document is done on its own, so every table fits the CPU cache:
level 1 maps batch word ids to the document's own ids through a direct-address array (no hashing), and level n
maps the pair (id of the (n-1)-gram at i, word i+n-1) with a small open-addressing table, only at positions
whose (n-1)-gram repeats (no other n-gram can). Numba (`cache=True`) keeps the machine code beside this file;
`make install` compiles it once (`warm`).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _ngram_kernel(wid, starts, wlen, n_vocab, max_n, want_top, want_dup,
                  top_count, top_chars, top_first, dup_has, dup_chars):  # pragma: no cover - compiled
    n_docs = len(starts) - 1
    longest = 0
    for d in range(n_docs):
        longest = max(longest, starts[d + 1] - starts[d])
    local = np.full(max(n_vocab, 1), -1, np.int64)
    word = np.empty(longest, np.int64)      # the document's own word ids, in order of first appearance
    ids = np.empty(longest, np.int64)       # id of the n-gram starting at each position (-1: occurs once)
    new_ids = np.empty(longest, np.int64)
    count = np.zeros(longest + 1, np.int64)
    first = np.empty(longest + 1, np.int64)
    repeat = np.zeros(longest, np.bool_)
    csum = np.zeros(longest + 1, np.int64)
    size = 1
    while size < 2 * longest + 2:
        size *= 2
    keys = np.full(size, -1, np.int64)
    vals = np.empty(size, np.int64)
    used = np.empty(longest, np.int64)
    for d in range(n_docs):
        a = starts[d]
        length = starts[d + 1] - a
        if length == 0:
            continue
        for i in range(length):
            csum[i + 1] = csum[i] + wlen[a + i]
        n_ids = 0
        for i in range(length):
            w = wid[a + i]
            v = local[w]
            if v < 0:
                v = n_ids
                local[w] = v
                count[v] = 0
                first[v] = i
                n_ids += 1
                repeat[i] = False
            else:
                repeat[i] = True
            word[i] = v
            ids[i] = v
            count[v] += 1
        for i in range(length):
            local[wid[a + i]] = -1
        new_count = n_ids
        any_repeat = False
        for n in range(1, max_n + 1):
            n_positions = length - n + 1
            if n_positions <= 0:
                break
            if n > 1:
                if not any_repeat:
                    break
                # level n: positions whose (n-1)-gram repeats get the id of (that id, word i+n-1)
                mask = size - 1
                n_used = 0
                new_count = 0
                for i in range(n_positions):
                    prev = ids[i]
                    if prev < 0 or count[prev] < 2:
                        new_ids[i] = -1
                        repeat[i] = False
                        continue
                    key = prev * length + word[i + n - 1]
                    h = (key * 0x9E3779B97F4A7C15) & mask
                    while True:
                        k = keys[h]
                        if k == key:
                            new_ids[i] = vals[h]
                            repeat[i] = True
                            break
                        if k == -1:
                            keys[h] = key
                            vals[h] = new_count
                            used[n_used] = h
                            n_used += 1
                            new_ids[i] = new_count
                            repeat[i] = False
                            new_count += 1
                            break
                        h = (h + 1) & mask
                for j in range(n_used):
                    keys[used[j]] = -1
                for v in range(new_count):
                    count[v] = 0
                for i in range(n_positions):
                    v = new_ids[i]
                    ids[i] = v
                    if v >= 0:
                        if count[v] == 0:
                            first[v] = i
                        count[v] += 1
            any_repeat = False
            best = 1
            best_id = -1
            for v in range(new_count):  # ids are in order of first appearance: the first top count wins ties
                if count[v] > best:
                    best = count[v]
                    best_id = v
                if count[v] > 1:
                    any_repeat = True
            if want_top[n] and best_id >= 0:
                q = first[best_id]
                top_count[d, n] = best
                top_chars[d, n] = csum[q + n] - csum[q] + n - 1
                top_first[d, n] = q
            if want_dup[n] and any_repeat:
                cover_end = 0
                chars = 0
                for i in range(length):
                    if i < n_positions and repeat[i]:
                        cover_end = max(cover_end, i + n)
                    if i < cover_end:
                        chars += wlen[a + i]
                dup_has[d, n] = True
                dup_chars[d, n] = chars


def ngram_measures(wid: np.ndarray, starts: np.ndarray, wlen: np.ndarray, n_vocab: int, top_ns: list[int],
                   dup_ns: list[int]) -> tuple[np.ndarray, ...]:
    """Per document d and n (arrays [docs, max n + 1]): top n-gram count (0: none occurs twice), its characters
    (words joined by one space) and first word index; whether some n-gram repeats, and the characters of the
    words covered by repeats.

    Args:
        wid: batch word ids (int64, < n_vocab) of all documents, one after another.
        starts: document d's words are wid[starts[d]:starts[d + 1]].
        wlen: characters of each word, aligned with wid."""
    n_docs = len(starts) - 1
    max_n = max([*top_ns, *dup_ns, 1])
    want_top = np.zeros(max_n + 1, np.bool_)
    want_dup = np.zeros(max_n + 1, np.bool_)
    want_top[list(top_ns)] = True
    want_dup[list(dup_ns)] = True
    shape = (n_docs, max_n + 1)
    out = (np.zeros(shape, np.int64), np.zeros(shape, np.int64), np.zeros(shape, np.int64),
           np.zeros(shape, np.bool_), np.zeros(shape, np.int64))
    _ngram_kernel(np.ascontiguousarray(wid, np.int64), np.ascontiguousarray(starts, np.int64),
                  np.ascontiguousarray(wlen, np.int64), int(n_vocab), max_n, want_top, want_dup, *out)
    return out


def warm() -> None:
    """Compile (or load from the on-disk cache) the kernel."""
    ngram_measures(np.array([0, 1, 0, 1], np.int64), np.array([0, 4], np.int64), np.ones(4, np.int64), 2, [2], [5])

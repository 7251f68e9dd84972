"""Words and word n-gram repetition of a batch of texts in two compiled passes (Numba): what the Gopher rules count.

`split_words_compiled`: every text's `str.split()` words as byte spans of the texts' UTF-8 buffer (Arrow's), with
each word's characters and whether it is ASCII with no letter, in one scan of the bytes; the whitespace is exactly
`str.isspace`'s (29 code points, checked for every code point in tests/unit/test_data_batch_equivalence.py).
`ngram_measures`: per text and n, the most frequent n-gram's count, characters and first position (top n-gram
rules), and whether any n-gram repeats with the characters of the words its repeats cover (duplicated n-gram
rules), exactly as `measures.ngram_tables_numpy` computes them (property-tested against it). The NumPy version
gives every n-gram a dense id with one batch-wide hash table per level, whose random accesses into millions of
entries cost about 85 ns each; here each text is done on its own, so every table fits the CPU cache: level 1 maps
each word to the text's own id (FNV-1a of its bytes, equal bytes confirmed), level n maps the pair (id of the
(n-1)-gram at i, word i+n-1), only at positions whose (n-1)-gram repeats (no other n-gram can).
Numba (numba.pydata.org) with `cache=True` keeps the machine code beside this file; `make install` compiles it
once (`warm`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@njit(cache=True, nogil=True, inline="always")
def _space_bytes(data, i, end):  # pragma: no cover - compiled
    """Bytes of the whitespace character at data[i] (0 when it is not one): exactly the code points `str.isspace`
    accepts, in UTF-8."""
    b = data[i]
    if b == 0x20 or 0x09 <= b <= 0x0D or 0x1C <= b <= 0x1F:
        return 1
    if b == 0xC2 and i + 1 < end:
        c = data[i + 1]
        if c == 0x85 or c == 0xA0:
            return 2
        return 0
    if 0xE1 <= b <= 0xE3 and i + 2 < end:
        c = data[i + 1]
        e = data[i + 2]
        if b == 0xE1:
            return 3 if c == 0x9A and e == 0x80 else 0
        if b == 0xE3:
            return 3 if c == 0x80 and e == 0x80 else 0
        if c == 0x80 and (0x80 <= e <= 0x8A or e == 0xA8 or e == 0xA9 or e == 0xAF):
            return 3
        if c == 0x81 and e == 0x9F:
            return 3
    return 0


# ASCII bytes: whitespace for `str.isspace` (tab, LF, VT, FF, CR, the four separators 0x1C-0x1F, space), letters.
_ASCII_SPACE = np.zeros(128, np.bool_)
_ASCII_SPACE[[0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20]] = True
_ASCII_LETTER = np.zeros(128, np.bool_)
_ASCII_LETTER[0x41:0x5B] = _ASCII_LETTER[0x61:0x7B] = True


@njit(cache=True, nogil=True)
def _split_kernel(
    data, offsets, wstart, wend, wlen, non_ascii, counts, no_letter
):  # pragma: no cover - compiled
    space = _ASCII_SPACE
    letters = _ASCII_LETTER
    n = 0
    for d in range(len(offsets) - 1):
        i = offsets[d]
        end = offsets[d + 1]
        n_words = 0
        n_no_letter = 0
        while i < end:
            b = data[i]
            if b < 0x80:
                if space[b]:
                    i += 1
                    continue
            else:
                skip = _space_bytes(data, i, end)
                if skip:
                    i += skip
                    continue
            start = i
            letter = False
            ascii_only = True
            chars = 0
            while i < end:
                b = data[i]
                if b < 0x80:
                    if space[b]:
                        break
                    if letters[b]:
                        letter = True
                    chars += 1
                else:
                    if (b == 0xC2 or 0xE1 <= b <= 0xE3) and _space_bytes(data, i, end):
                        break
                    ascii_only = False
                    if (b & 0xC0) != 0x80:
                        chars += 1
                i += 1
            wstart[n] = start
            wend[n] = i
            wlen[n] = chars
            non_ascii[n] = not ascii_only
            if ascii_only and not letter:
                n_no_letter += 1
            n += 1
            n_words += 1
        counts[d] = n_words
        no_letter[d] = n_no_letter
    return n


def split_words_compiled(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    """The words of every text of a UTF-8 buffer (text d is data[offsets[d]:offsets[d + 1]]): (word start byte,
    word end byte, word characters, word is not ASCII, words per text, ASCII words without a letter per text)."""
    n_docs = len(offsets) - 1
    upper = (len(data) + n_docs) // 2 + 1  # a text of k bytes holds at most (k + 1) // 2 words
    wstart, wend, wlen = (np.empty(upper, np.int64) for _ in range(3))
    non_ascii = np.empty(upper, np.bool_)
    counts, no_letter = np.zeros(n_docs, np.int64), np.zeros(n_docs, np.int64)
    n = _split_kernel(
        data, np.ascontiguousarray(offsets, np.int64), wstart, wend, wlen, non_ascii, counts, no_letter
    )
    return wstart[:n], wend[:n], wlen[:n], non_ascii[:n], counts, no_letter


@njit(cache=True, nogil=True)
def _ngram_kernel(
    data,
    wstart,
    wend,
    starts,
    wlen,
    max_n,
    want_top,
    want_dup,
    top_count,
    top_chars,
    top_first,
    dup_has,
    dup_chars,
):  # pragma: no cover - compiled
    n_docs = len(starts) - 1
    longest = 0
    for d in range(n_docs):
        longest = max(longest, starts[d + 1] - starts[d])
    rep = np.empty(longest + 1, np.int64)  # a word index holding each of the text's distinct words
    word = np.empty(longest, np.int64)  # the document's own word ids, in order of first appearance
    ids = np.empty(longest, np.int64)  # id of the n-gram starting at each position (-1: occurs once)
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
        # level 1: the text's own word ids, from the words' bytes
        mask = size - 1
        n_used = 0
        n_ids = 0
        for i in range(length):
            s0 = wstart[a + i]
            e0 = wend[a + i]
            h = _FNV_OFFSET
            for j in range(s0, e0):
                h = (h ^ np.uint64(data[j])) * _FNV_PRIME
            key = np.int64(h >> np.uint64(1))
            slot = np.int64(h & np.uint64(mask))
            while True:
                k = keys[slot]
                if k == -1:
                    keys[slot] = key
                    vals[slot] = n_ids
                    used[n_used] = slot
                    n_used += 1
                    v = n_ids
                    rep[v] = a + i
                    count[v] = 0
                    first[v] = i
                    n_ids += 1
                    repeat[i] = False
                    break
                if k == key:
                    v = vals[slot]
                    r = rep[v]
                    rs = wstart[r]
                    same = wend[r] - rs == e0 - s0
                    if same:
                        for j in range(e0 - s0):
                            if data[rs + j] != data[s0 + j]:
                                same = False
                                break
                    if same:
                        repeat[i] = True
                        break
                slot = (slot + 1) & mask
            word[i] = v
            ids[i] = v
            count[v] += 1
        for j in range(n_used):
            keys[used[j]] = -1
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


def ngram_measures(
    data: np.ndarray,
    wstart: np.ndarray,
    wend: np.ndarray,
    starts: np.ndarray,
    wlen: np.ndarray,
    top_ns: list[int],
    dup_ns: list[int],
) -> tuple[np.ndarray, ...]:
    """Per text d and n (arrays [texts, max n + 1]): top n-gram count (0: none occurs twice), its characters
    (words joined by one space) and first word index; whether some n-gram repeats, and the characters of the
    words covered by repeats.

    Args:
        data: the UTF-8 bytes the words are spans of; wstart, wend: each word's bytes are data[wstart:wend].
        starts: text d's words are words starts[d] to starts[d + 1] - 1.
        wlen: characters of each word."""
    n_docs = len(starts) - 1
    max_n = max([*top_ns, *dup_ns, 1])
    want_top = np.zeros(max_n + 1, np.bool_)
    want_dup = np.zeros(max_n + 1, np.bool_)
    want_top[list(top_ns)] = True
    want_dup[list(dup_ns)] = True
    shape = (n_docs, max_n + 1)
    out = (
        np.zeros(shape, np.int64),
        np.zeros(shape, np.int64),
        np.zeros(shape, np.int64),
        np.zeros(shape, np.bool_),
        np.zeros(shape, np.int64),
    )
    as_int = [np.ascontiguousarray(x, np.int64) for x in (wstart, wend, starts, wlen)]
    _ngram_kernel(np.ascontiguousarray(data, np.uint8), *as_int, max_n, want_top, want_dup, *out)
    return out


def warm() -> None:
    """Compile (or load from the on-disk cache) both kernels."""
    data = np.frombuffer(b"a b a b", np.uint8)
    wstart, wend, wlen, _, _, _ = split_words_compiled(data, np.array([0, len(data)], np.int64))
    ngram_measures(data, wstart, wend, np.array([0, len(wstart)], np.int64), wlen, [2], [5])

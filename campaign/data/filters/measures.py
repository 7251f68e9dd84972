"""The word and n-gram measures of a whole batch of texts, filled into their `TextStats` at once.

Word measures come from one compiled scan of the batch's UTF-8 bytes (`kernels.split_words_compiled`: word spans,
their characters, ASCII words without a letter; the regex only for words with a non-ASCII character), and the
n-gram measures from a compiled pass per document with cache-sized tables (`kernels.ngram_measures`); the NumPy
and Arrow versions they replaced (`word_tables_vocab`, `ngram_tables_numpy`) stay as the property-tested
reference (tests/unit/test_data_batch_equivalence.py).
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from campaign.data.filters.base import _NO_LETTER_WORD_FULL, TextStats


def _factorize(keys: np.ndarray) -> np.ndarray:
    """Dense codes 0..k-1 of int64 `keys` in order of first appearance (Arrow's hash dictionary encoding)."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    return pc.dictionary_encode(pa.array(keys, pa.int64())).indices.to_numpy().astype(np.int64)


def split_words(texts: list[str]) -> tuple[pa.Array, np.ndarray]:
    """The `str.split()` words of every text, all in one Arrow string array, and each text's word count.

    Arrow's `utf8_split_whitespace` splits on exactly the characters `str.isspace` calls whitespace (checked
    for every code point in tests/unit/test_data_filters.py) but returns empty pieces at a text's ends and for
    a text of only whitespace; dropping the empty pieces leaves `str.split()`'s words. No Python string is made
    per word. Raises `pa.ArrowException` for a text Arrow cannot hold (a lone surrogate).

    pyarrow 26's kernel misreads a multi-byte whitespace character (U+1680, U+3000...) that ends the array's
    data buffer, now and then returning it as a word (found by tests/unit/test_data_batch_equivalence.py);
    a one-letter text appended after the batch, and dropped, keeps every real text away from the buffer's end."""
    pieces = pc.utf8_split_whitespace(pa.array([*texts, "x"], pa.string())).slice(0, len(texts))
    flat = pc.list_flatten(pieces)
    parent = pc.list_parent_indices(pieces).to_numpy()
    nonempty = pc.binary_length(flat).to_numpy(zero_copy_only=False) > 0
    if not nonempty.all():
        flat = flat.filter(pa.array(nonempty))
        parent = parent[nonempty]
    counts = np.bincount(parent, minlength=len(texts)).astype(np.int64)
    return flat, counts


def word_tables(stats: list[TextStats]) -> None:
    """Fill n_words, word_chars, mean_word_length and n_alpha_words of every text in one compiled scan of the
    texts' UTF-8 bytes (`kernels.split_words_compiled`), and keep the words' byte spans for `ngram_tables`.
    Only words with a non-ASCII character take the regex for the has-a-letter test (once per distinct word)."""
    from campaign.data.filters.kernels import split_words_compiled

    data, offsets = _utf8_buffer([st.text for st in stats])
    wstart, wend, wlen, non_ascii, counts, no_letter = split_words_compiled(data, offsets)
    doc = np.repeat(np.arange(len(stats)), counts)
    chars = np.bincount(doc, weights=wlen, minlength=len(stats)).astype(np.int64)
    odd = np.flatnonzero(non_ascii)
    if len(odd):
        fullmatch = _NO_LETTER_WORD_FULL.fullmatch
        seen: dict[bytes, bool] = {}
        raw = data.tobytes()
        for w, s0, e0 in zip(odd.tolist(), wstart[odd].tolist(), wend[odd].tolist(), strict=True):
            piece = raw[s0:e0]
            hit = seen.get(piece)
            if hit is None:
                hit = seen[piece] = fullmatch(piece.decode("utf-8", "surrogatepass")) is not None
            if hit:
                no_letter[doc[w]] += 1
    shared = (data, wstart, wend, wlen)  # one object for the whole batch, for ngram_tables
    starts = np.concatenate([[0], np.cumsum(counts)]).tolist()
    for i, (st, n, c, nl) in enumerate(
        zip(stats, counts.tolist(), chars.tolist(), no_letter.tolist(), strict=True)
    ):
        d = st.__dict__
        d["n_words"] = n
        d["word_chars"] = c
        d["mean_word_length"] = c / n if n else 0.0
        d["n_alpha_words"] = n - nl
        d["_words"] = shared
        d["_span"] = (starts[i], starts[i + 1])
        d.pop("words", None)  # split again only if a rule quotes them


def _utf8_buffer(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The texts' UTF-8 bytes one after another and each text's byte offsets (Arrow builds them in C; a lone
    surrogate, which Arrow refuses and only unnormalised text can hold, is encoded as Python's surrogatepass does)."""
    try:
        array = pa.array(texts, pa.large_string())
        offsets = np.frombuffer(array.buffers()[1], np.int64)[array.offset : array.offset + len(texts) + 1]
        data = (
            np.frombuffer(array.buffers()[2], np.uint8)
            if array.buffers()[2] is not None
            else np.zeros(0, np.uint8)
        )
        return data, offsets
    except (pa.ArrowException, UnicodeEncodeError):
        encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
        offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.int64)
        return np.frombuffer(b"".join(encoded), np.uint8), offsets


def word_tables_vocab(stats: list[TextStats]) -> None:
    """`word_tables` with batch-wide word ids from Arrow's dictionary encoding (what `ngram_tables_numpy`, the
    reference for the compiled n-gram kernel, reads): lengths and the has-a-letter test once per distinct word."""
    try:  # Arrow splits the texts and hash-encodes the words (equal strings <=> equal UTF-8 bytes)
        flat_arrow, counts = split_words([st.text for st in stats])
        encoded = pc.dictionary_encode(flat_arrow)
        del flat_arrow
        wid = encoded.indices.to_numpy().astype(np.int64)
        vocab: list[str] | None = None
        length_v = pc.utf8_length(encoded.dictionary).to_numpy(zero_copy_only=False).astype(np.int64)
        no_letter_v = _no_letter(None, encoded.dictionary)
    except (pa.ArrowException, UnicodeEncodeError):  # a lone surrogate (only from unnormalised text)
        counts = np.fromiter((len(st.words) for st in stats), dtype=np.int64, count=len(stats))
        ids: dict[str, int] = {}
        flat = itertools.chain.from_iterable(st.words for st in stats)
        wid = np.fromiter(
            (ids.setdefault(w, len(ids)) for w in flat), dtype=np.int64, count=int(counts.sum())
        )
        vocab = list(ids)
        length_v = np.fromiter(map(len, vocab), dtype=np.int64, count=len(vocab))
        no_letter_v = _no_letter(vocab, None)
    n_vocab = len(length_v)
    doc = np.repeat(np.arange(len(stats)), counts)
    chars = np.bincount(doc, weights=length_v[wid], minlength=len(stats)).astype(np.int64)
    no_letter = np.bincount(doc, weights=no_letter_v[wid], minlength=len(stats)).astype(np.int64)
    shared = (wid, n_vocab, length_v)  # one object for the whole batch, for ngram_tables
    for i, st in enumerate(stats):
        d = st.__dict__
        d["n_words"] = n = int(counts[i])
        d["word_chars"] = c = int(chars[i])
        d["mean_word_length"] = c / n if n else 0.0
        d["n_alpha_words"] = n - int(no_letter[i])
        d["_wid"] = shared
        d.pop(
            "words", None
        )  # the word strings are the batch's largest object: split again only if a rule quotes them
    starts = np.concatenate([[0], np.cumsum(counts)])
    for i, st in enumerate(stats):
        st.__dict__["_span"] = (int(starts[i]), int(starts[i + 1]))


def _no_letter(vocab: list[str] | None, arrow_vocab: pa.Array | None) -> np.ndarray:
    """Per distinct word: made only of punctuation, digits and "_" (no letter). For an ASCII word that is
    "no character in A-Z or a-z" (ASCII \\w is [A-Za-z0-9_]), tested by Arrow; other words by the regex."""
    fullmatch = _NO_LETTER_WORD_FULL.fullmatch
    if arrow_vocab is None:
        assert vocab is not None
        return np.fromiter((fullmatch(w) is not None for w in vocab), dtype=bool, count=len(vocab))
    ascii_ = pc.string_is_ascii(arrow_vocab).to_numpy(zero_copy_only=False)
    out = ~pc.match_substring_regex(arrow_vocab, "[A-Za-z]").to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(~ascii_).tolist():
        out[i] = fullmatch(vocab[i] if vocab is not None else arrow_vocab[i].as_py()) is not None
    return out


def ngram_tables(stats: list[TextStats], top_ns: list[int], dup_ns: list[int]) -> None:
    """Fill `top_ngrams` and `dup_ngrams` of every text for the given n, exactly as counting the n-grams
    of each text with a Counter would: document by document in a compiled kernel (`kernels`), the same
    values as `ngram_tables_numpy` (property-tested)."""
    if not stats or not (top_ns or dup_ns):
        for st in stats:
            st.top_ngrams, st.dup_ngrams = {}, {}
        return
    from campaign.data.filters.kernels import ngram_measures

    data, wstart, wend, starts, wlen = _batch_words(stats)
    top_count, top_chars, top_first, dup_has, dup_chars = ngram_measures(
        data, wstart, wend, starts, wlen, top_ns, dup_ns
    )
    top_ns, dup_ns = sorted(set(top_ns)), sorted(set(dup_ns))
    counts = top_count[:, top_ns].tolist()
    chars = top_chars[:, top_ns].tolist()
    firsts = top_first[:, top_ns].tolist()
    has = dup_has[:, dup_ns].tolist()
    covered = dup_chars[:, dup_ns].tolist()
    for i, st in enumerate(stats):
        st.top_ngrams = {
            n: (c, ch, f) for n, c, ch, f in zip(top_ns, counts[i], chars[i], firsts[i], strict=True) if c > 1
        }
        st.dup_ngrams = dict(zip(dup_ns, zip(has[i], covered[i], strict=True), strict=True))


def _batch_words(stats: list[TextStats]) -> tuple[np.ndarray, ...]:
    """(UTF-8 bytes, word start and end bytes of the texts one after another, each text's first word (+ the
    end), each word's characters), from `word_tables` (run here if the texts do not share one)."""
    shared = stats[0].__dict__.get("_words")
    if shared is None or any(st.__dict__.get("_words") is not shared for st in stats):
        word_tables(stats)
        shared = stats[0].__dict__["_words"]
    data, wstart_all, wend_all, wlen_all = shared
    spans = [st.__dict__["_span"] for st in stats]
    counts = np.array([b - a for a, b in spans], dtype=np.int64)
    total = int(counts.sum())
    if (
        total == len(wstart_all)
        and spans
        and spans[0][0] == 0
        and all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))
    ):
        index = None  # every word of the batch, in order: no copy
    else:
        index = np.concatenate([np.arange(a, b) for a, b in spans]) if spans else np.zeros(0, np.int64)
    pick = (lambda x: x) if index is None else (lambda x: x[index])
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return data, pick(wstart_all), pick(wend_all), starts, pick(wlen_all)


def ngram_tables_numpy(stats: list[TextStats], top_ns: list[int], dup_ns: list[int]) -> None:
    """`ngram_tables` with batch-wide NumPy arrays (the reference the compiled kernel is tested against).

    Every n-gram of a text gets a dense id: level 1 is the (text, word) pair, level n the pair (id of the
    (n-1)-gram at i, word i+n-1), each level hash-encoded in order of first appearance. Only n-grams whose
    (n-1)-gram prefix repeats can repeat, so each level keeps only those positions (all occurrences of every
    repeated n-gram survive, so their counts and first occurrences are exact). With ids in order of first
    appearance, a position is a repeat exactly when its id is not above every earlier id. The most frequent
    n-gram of a text is the one whose first occurrence comes first among those with the top count (what
    Counter.most_common(1) returns)."""
    if not stats or not (top_ns or dup_ns):
        for st in stats:
            st.top_ngrams, st.dup_ngrams = {}, {}
        return
    if "_wid" not in stats[0].__dict__ or any(
        st.__dict__.get("_wid") is not stats[0].__dict__["_wid"] for st in stats
    ):
        word_tables_vocab(stats)
    wid_all, n_vocab, length_v = stats[0].__dict__["_wid"]
    spans = [st.__dict__["_span"] for st in stats]
    counts = np.array([b - a for a, b in spans], dtype=np.int64)
    wid = np.concatenate([wid_all[a:b] for a, b in spans]) if spans else np.zeros(0, np.int64)
    n_docs, n_pos = len(stats), len(wid)
    doc_of = np.repeat(np.arange(n_docs), counts)
    starts = np.concatenate([[0], np.cumsum(counts)])
    wlen = length_v[wid] if n_pos else np.zeros(0, np.int64)
    csum = np.concatenate([[0], np.cumsum(wlen)])
    left = starts[1:][doc_of] - np.arange(n_pos)  # words from a position to its text's end, itself included
    width = np.int64(max(n_vocab, 1))
    top: list[dict[int, tuple[int, int, int]]] = [{} for _ in stats]
    dup: list[dict[int, tuple[bool, int]]] = [{} for _ in stats]
    wanted_top, wanted_dup = set(top_ns), set(dup_ns)
    pos = np.arange(n_pos, dtype=np.int64)
    code = _factorize(doc_of * width + wid)
    count = np.bincount(code) if n_pos else np.zeros(0, np.int64)
    for n in range(1, max([*top_ns, *dup_ns]) + 1):
        if n > 1:
            keep = (left[pos] >= n) & (count[code] > 1)
            pos, code = pos[keep], code[keep]
            code = _factorize(code * width + wid[pos + n - 1])
            count = np.bincount(code) if len(code) else np.zeros(0, np.int64)
        if n in wanted_top:
            at = count[code] if len(code) else np.zeros(0, np.int64)
            sel = at > 1
            p, c = pos[sel], at[sel]
            d = doc_of[p]
            best = np.zeros(n_docs, dtype=np.int64)
            np.maximum.at(best, d, c)
            hit = c == best[d]
            docs, first = np.unique(d[hit], return_index=True)
            hp = p[hit][first]
            for doc_i, q in zip(docs.tolist(), hp.tolist(), strict=True):
                top[doc_i][n] = (int(best[doc_i]), int(csum[q + n] - csum[q]) + n - 1, q - int(starts[doc_i]))
        if n in wanted_dup:
            running = np.maximum.accumulate(code) if len(code) else code
            repeat = np.zeros(len(code), dtype=bool)
            if len(code):
                repeat[1:] = code[1:] <= running[:-1]
            rp = pos[repeat]
            has = np.zeros(n_docs, dtype=bool)
            has[doc_of[rp]] = True
            cover = np.cumsum(np.bincount(rp, minlength=n_pos + 1) - np.bincount(rp + n, minlength=n_pos + 1))
            covered = cover[:n_pos] > 0
            dup_chars = np.bincount(doc_of[covered], weights=wlen[covered], minlength=n_docs).astype(np.int64)
            for i in range(n_docs):
                dup[i][n] = (bool(has[i]), int(dup_chars[i]))
    for i, st in enumerate(stats):
        st.top_ngrams, st.dup_ngrams = top[i], dup[i]

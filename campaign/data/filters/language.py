"""Language identification: each document's most likely language and its probability, with py3langid's shipped
model (langid.py's naive Bayes over byte n-grams, 140 labels; offline, nothing downloaded).

py3langid walks its byte n-gram automaton in a Python loop (about 2.5 MB/s measured); `identify_languages` walks
the same automaton over a whole batch in one compiled pass (Numba) and scores with the same tables, so each text
gets what `LanguageIdentifier(norm_probs=True).classify` returns (held equal by a unit test on real text): the
NFC text, lowercased when it is all upper case, as UTF-8; probabilities softmaxed at temperature sqrt(bytes).
Prepare identifies each document from its first `cleaning.languages.prefix_chars` characters (`identify_prefixes`).
A document is kept when one of `keep` has a probability of at least `min_score` (datatrove's LanguageFilter keeps
one above `language_threshold` among the requested languages; with a threshold of 0.5 or more both rules keep the
same documents). datatrove runs fastText's lid.176, which must be downloaded; see docs/prepare.md.

Source: Lui and Baldwin 2012, "langid.py: An Off-the-shelf Language Identification Tool" (ACL demo); py3langid
0.4; FineWeb (Penedo et al. 2024, arXiv 2406.17557, sec. 3) for the 0.65 threshold.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import unicodedata
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np
from numba import njit

from campaign.config import LanguagesConfig
from campaign.data.filters.base import Rejection

# Reason code
LANGUAGE_NOT_KEPT = "language_not_kept"


@dataclass(frozen=True)
class _Model:
    nextmove: np.ndarray  # automaton transitions, indexed by rowbase[state] + byte
    rowbase: np.ndarray
    output: np.ndarray  # feature index emitted in a state, -1 for none
    ptc: np.ndarray  # (features, classes) log P(feature | class): float16 as shipped, widened to float32
    pc: np.ndarray  # (classes,) log prior
    classes: tuple[str, ...]
    alias_pairs: tuple[tuple[int, int], ...]  # (first, duplicate) columns of the same label


def identifier():  # -> py3langid.langid.LanguageIdentifier (untyped package)
    """py3langid's own identifier with its shipped model and normalised probabilities (about 0.7 s to load)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


_TABLES = ("nextmove", "rowbase", "output", "ptc", "pc")


def _tables_dir() -> Path:
    return Path(__file__).resolve().parent / "__pycache__" / f"py3langid-{version('py3langid')}-tables-f32"


def _tables_of(ident) -> tuple[dict[str, np.ndarray], dict]:
    """The identifier's tables as NumPy arrays (no copy of the transitions) and its labels."""
    tables = {
        "nextmove": np.frombuffer(ident.tk_nextmove, dtype=np.uint32),
        "rowbase": np.asarray(ident.tk_row, dtype=np.int64) << 8,
        "output": np.asarray(ident.tk_output, dtype=np.int32),
        # float32 (57 MB, mapped once for all workers): the scoring loop is then a plain multiply-add, three
        # times faster than reading float16 through a conversion table
        "ptc": np.ascontiguousarray(ident.nb_ptc, dtype=np.float32),
        "pc": np.asarray(ident.nb_pc, dtype=np.float32),
    }
    return tables, {"classes": list(ident.nb_classes), "alias_pairs": [list(p) for p in ident._alias_pairs]}


def _write_tables(folder: Path) -> None:
    """The model's tables as .npy files beside the compiled kernels, written once (atomically, by folder rename):
    every worker then maps the same pages read-only, so they are in memory once, not decompressed per worker."""
    arrays, meta = _tables_of(identifier())
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", array)
        (tmp / "labels.json").write_text(json.dumps(meta))
        os.replace(tmp, folder)
    except OSError:  # another process wrote it first (the folder exists), or the folder is read-only
        shutil.rmtree(tmp, ignore_errors=True)


@functools.cache
def _model() -> _Model:
    """The model's tables, memory-mapped from `_tables_dir` (written on first use, or by `make install`); read
    into memory from the package when that folder cannot be written."""
    folder = _tables_dir()
    try:
        folder.parent.mkdir(exist_ok=True)
        if not (folder / "labels.json").is_file():
            _write_tables(folder)
        tables = {name: np.asarray(np.load(folder / f"{name}.npy", mmap_mode="r")) for name in _TABLES}
        meta = json.loads((folder / "labels.json").read_text())
    except OSError:
        tables, meta = _tables_of(identifier())
    return _Model(
        **tables,
        classes=tuple(meta["classes"]),
        alias_pairs=tuple((int(i), int(j)) for i, j in meta["alias_pairs"]),
    )


# The labels of py3langid 0.4's model (a unit test holds them to it): ISO 639 codes, and "zxx" for no linguistic
# content. Checking a config against them does not load the model into the command's process.
LANGUAGES = frozenset(
    [
        "ace",
        "af",
        "am",
        "an",
        "ar",
        "ary",
        "arz",
        "as",
        "az",
        "ba",
        "bcl",
        "be",
        "bg",
        "bn",
        "br",
        "bs",
        "ca",
        "crh",
        "cs",
        "cy",
        "da",
        "de",
        "dz",
        "el",
        "en",
        "eo",
        "es",
        "et",
        "eu",
        "ext",
        "fa",
        "fi",
        "fo",
        "fr",
        "fuv",
        "fy",
        "ga",
        "gcf",
        "gcr",
        "gd",
        "gl",
        "gom",
        "grc",
        "gu",
        "gug",
        "guw",
        "ha",
        "hbo",
        "he",
        "hi",
        "hr",
        "ht",
        "hu",
        "hy",
        "id",
        "ig",
        "is",
        "it",
        "ja",
        "jv",
        "ka",
        "kab",
        "kik",
        "kk",
        "km",
        "kn",
        "ko",
        "ku",
        "ky",
        "la",
        "lb",
        "lg",
        "lij",
        "ln",
        "lo",
        "lt",
        "ltg",
        "lv",
        "mg",
        "mk",
        "ml",
        "mn",
        "mr",
        "ms",
        "mt",
        "my",
        "ne",
        "nl",
        "nn",
        "no",
        "nso",
        "oc",
        "om",
        "or",
        "pa",
        "pcm",
        "pl",
        "ps",
        "pt",
        "qu",
        "ro",
        "ru",
        "rw",
        "sa",
        "sdh",
        "se",
        "si",
        "sk",
        "sl",
        "sn",
        "so",
        "sq",
        "sr",
        "st",
        "sv",
        "sw",
        "ta",
        "te",
        "tg",
        "th",
        "tk",
        "tl",
        "tr",
        "tt",
        "ug",
        "uk",
        "ur",
        "uz",
        "uzs",
        "vec",
        "vi",
        "vo",
        "wa",
        "wuu",
        "xh",
        "yo",
        "yue",
        "zh",
        "zu",
        "zxx",
    ]
)


def known_languages() -> frozenset[str]:
    return LANGUAGES


@njit(cache=True, nogil=True)
def _visit_kernel(data, offsets, nextmove, rowbase, output, n_features):  # pragma: no cover - compiled
    """Per text, the automaton's emitted features with their counts: (text, feature, count) triples."""
    counts = np.zeros(n_features, np.int32)
    touched = np.empty(n_features, np.int32)
    out_doc = np.empty(len(data), np.int32)
    out_feat = np.empty(len(data), np.int32)
    out_count = np.empty(len(data), np.int32)
    n = 0
    for d in range(len(offsets) - 1):
        state = 0
        n_touched = 0
        for i in range(offsets[d], offsets[d + 1]):
            state = nextmove[rowbase[state] + data[i]]
            f = output[state]
            if f >= 0:
                if counts[f] == 0:
                    touched[n_touched] = f
                    n_touched += 1
                counts[f] += 1
        for k in range(n_touched):
            f = touched[k]
            out_doc[n] = d
            out_feat[n] = f
            out_count[n] = counts[f]
            counts[f] = 0
            n += 1
    return out_doc[:n], out_feat[:n], out_count[:n]


@njit(cache=True, nogil=True)
def _score_kernel(docs, feats, counts, ptc, n_docs):  # pragma: no cover - compiled
    """Per text, the sum over its features of log1p(count) x log P(feature | class)."""
    n_classes = ptc.shape[1]
    scores = np.zeros((n_docs, n_classes), np.float32)
    for t in range(len(docs)):
        d = docs[t]
        f = feats[t]
        w = np.float32(np.log1p(np.float32(counts[t])))
        for k in range(n_classes):
            scores[d, k] += w * ptc[f, k]
    return scores


def _encode(text: str) -> bytes:
    if text.isupper():
        text = text.lower()
    if text.isascii():  # already NFC
        return text.encode("ascii")
    return unicodedata.normalize("NFC", text).encode("utf-8", "surrogatepass")


def identify_languages(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """(most likely language, its probability as float32) of each text."""
    model = _model()
    if not texts:
        return [], np.zeros(0, np.float32)
    encoded = [_encode(t) for t in texts]
    sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    docs, feats, counts = _visit_kernel(
        data, offsets, model.nextmove, model.rowbase, model.output, model.ptc.shape[0]
    )
    scores = _score_kernel(docs, feats, counts, model.ptc, len(texts))
    has = np.zeros(len(texts), bool)
    has[docs] = True
    scores[has] += model.pc
    # py3langid: no feature gives a uniform distribution (every score 0 before the softmax)
    scores *= (1.0 / np.sqrt(np.maximum(sizes, 1))).astype(np.float32)[:, None]
    scores -= scores.max(axis=1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=1, keepdims=True)
    for i, j in model.alias_pairs:
        scores[:, i] += scores[:, j]
        scores[:, j] = 0.0
    best = scores.argmax(axis=1)
    classes = model.classes
    return [classes[b] for b in best], scores[np.arange(len(texts)), best]


def language_prefix(text: str, chars: int) -> str:
    """The text's first `chars` characters, cut back to its last whitespace there (no word is cut in two) when
    that keeps at least half of them; the whole text when `chars` is 0 or the text is no longer."""
    if chars <= 0 or len(text) <= chars:
        return text
    head = text[:chars]
    if text[chars].isspace() or head[-1].isspace():
        return head
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return head[:cut] if cut >= chars // 2 else head


def identify_prefixes(texts: list[str], chars: int) -> tuple[list[str], np.ndarray]:
    """`identify_languages` of each text's `language_prefix`: a document's language is told by its opening as
    well as by its whole (their agreement on web text: docs/prepare.md#language), and the walk and the scoring
    cost grows with the bytes read."""
    return identify_languages([language_prefix(t, chars) for t in texts])


def check_language(language: str, score: float, cfg: LanguagesConfig) -> Rejection | None:
    """Keep a text whose most likely language is one of `cfg.keep` with probability at least `cfg.min_score`."""
    if language in cfg.keep and score >= cfg.min_score:
        return None
    return Rejection(
        LANGUAGE_NOT_KEPT, f"{language} {score:.3f} (keep {', '.join(cfg.keep)} >= {cfg.min_score:g})"
    )


def warm() -> None:
    """Compile the walk once (`make install`), so a worker's first batch does not."""
    identify_languages(["warm up the language identifier"])

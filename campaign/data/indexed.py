"""Training shards a Megatron trainer reads: one indexed dataset (`.bin` + `.idx`) per source, and a blend file.

The `.bin` holds every clean document's token ids back to back, each document closed by the end-of-document id
(what Megatron's `tools/preprocess_data.py --append-eod` writes), in the narrowest dtype that holds every id of the
vocabulary. The `.idx` is Megatron-Core's index: the header `MMIDIDX\\x00\\x00`, version 1 (u64), the dtype code
(u8), the sequence and document counts (u64), then the sequence lengths (int32), the byte pointers of each
sequence in the `.bin` (int64) and the document indices (int64: sequence index where each document ends, starting
with 0). One sequence is one document, as preprocess_data writes them. The blend file is `--data-path`'s
"weight prefix weight prefix ..." form (Megatron normalises the weights); `blend.json` beside it says the same
with the counts. Written with NumPy alone: a trainer needs megatron-core, prepare does not.
Source: Megatron-LM `megatron/core/datasets/indexed_dataset.py` (`_IndexWriter`, `_IndexReader`, `DType`) and
`tools/preprocess_data.py`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from campaign.errors import DataError
from campaign.files import atomic_write_bytes, atomic_write_json

TOKENIZED_DIR = "tokenized"
BLEND_TXT = "blend.txt"
BLEND_JSON = "blend.json"
INDEX_HEADER = b"MMIDIDX\x00\x00"
INDEX_VERSION = 1
# Megatron-Core's DType codes (indexed_dataset.DType).
DTYPE_CODES: dict[str, int] = {
    "uint8": 1,
    "int8": 2,
    "int16": 3,
    "int32": 4,
    "int64": 5,
    "float64": 6,
    "float32": 7,
    "uint16": 8,
}
_TOKEN_DTYPES = (
    "uint8",
    "uint16",
    "int32",
    "int64",
)  # the integer codes a token id can take, narrowest first


def token_dtype(n_vocab: int) -> np.dtype:
    """The narrowest of Megatron's integer dtypes that holds every id below `n_vocab`."""
    for name in _TOKEN_DTYPES:
        if n_vocab - 1 <= np.iinfo(name).max:
            return np.dtype(name)
    raise ValueError(f"a vocabulary of {n_vocab} ids does not fit any index dtype")


def index_bytes(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    """The `.idx` file of documents of `lengths` tokens (one sequence per document) stored as `dtype`."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and int(lengths.max()) > np.iinfo(np.int32).max:
        raise ValueError("a document longer than 2**31 - 1 tokens does not fit Megatron's int32 lengths")
    pointers = np.zeros(lengths.size, dtype=np.int64)
    if lengths.size > 1:
        np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    documents = np.arange(lengths.size + 1, dtype=np.int64)
    head = INDEX_HEADER + struct.pack("<Q", INDEX_VERSION) + struct.pack("<B", DTYPE_CODES[dtype.name])
    counts = struct.pack("<Q", lengths.size) + struct.pack("<Q", documents.size)
    return b"".join(
        (head, counts, lengths.astype("<i4").tobytes(), pointers.astype("<i8").tobytes(), documents.tobytes())
    )


class IndexedDatasetWriter:
    """Writes `<prefix>.bin` and `<prefix>.idx`, each first under a temporary name, renamed by `close` (so a
    killed prepare never leaves a half-written shard under the final name)."""

    def __init__(self, prefix: Path, dtype: np.dtype) -> None:
        self.prefix = Path(prefix)
        self.dtype = np.dtype(dtype)
        self.bin_path = self.prefix.with_name(self.prefix.name + ".bin")
        self.idx_path = self.prefix.with_name(self.prefix.name + ".idx")
        self._bin_tmp = self.bin_path.with_name(f".{self.bin_path.name}.tmp")
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        self._bin = open(self._bin_tmp, "wb")  # noqa: SIM115 - closed by close() or abort()
        self._lengths: list[np.ndarray] = []
        self.n_tokens = 0

    def add_documents(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Documents given as their ids back to back (`tokens`, end-of-document ids included) and their lengths."""
        tokens = np.asarray(tokens)
        if tokens.size:
            info = np.iinfo(self.dtype)
            low, high = int(tokens.min()), int(tokens.max())
            if low < info.min or high > info.max:
                raise DataError(
                    f"token id {high if high > info.max else low} does not fit the shard's {self.dtype.name} ids",
                    where=str(self.bin_path),
                    fix="the tokenizer's vocabulary size does not cover its ids: use a consistent tokenizer.json",
                )
        self._bin.write(tokens.astype(self.dtype.newbyteorder("<"), copy=False).tobytes())
        self._lengths.append(np.asarray(lengths, dtype=np.int64))
        self.n_tokens += int(tokens.size)

    @property
    def n_documents(self) -> int:
        return int(sum(a.size for a in self._lengths))

    def close(self) -> None:
        self._bin.close()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, dtype=np.int64)
        atomic_write_bytes(self.idx_path, index_bytes(lengths, self.dtype))
        os.replace(self._bin_tmp, self.bin_path)

    def abort(self) -> None:
        self._bin.close()
        self._bin_tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class IndexedDataset:
    """An indexed dataset read back (for checks and the rehearsal): the index arrays and the memory-mapped ids."""

    dtype: np.dtype
    lengths: np.ndarray  # int32, one per sequence
    pointers: np.ndarray  # int64 byte offsets into the .bin
    document_indices: np.ndarray  # int64, n_documents + 1
    tokens: np.ndarray  # the whole .bin as `dtype`, memory-mapped

    def document(self, i: int) -> np.ndarray:
        """The ids of document `i` (all its sequences)."""
        first, last = int(self.document_indices[i]), int(self.document_indices[i + 1])
        if first == last:
            return self.tokens[:0]
        start = int(self.pointers[first]) // self.dtype.itemsize
        stop = int(self.pointers[last - 1]) // self.dtype.itemsize + int(self.lengths[last - 1])
        return self.tokens[start:stop]

    def __len__(self) -> int:
        return int(self.document_indices.size - 1)


def read_indexed(prefix: Path) -> IndexedDataset:
    """Read `<prefix>.idx` and map `<prefix>.bin`; raises DataError naming the file when it is not an index."""
    prefix = Path(prefix)
    idx_path = prefix.with_name(prefix.name + ".idx")
    bin_path = prefix.with_name(prefix.name + ".bin")
    fix = "run `campaign prepare` again: it rewrites the training shards"
    try:
        raw = idx_path.read_bytes()
    except OSError as exc:
        raise DataError(
            f"cannot read the shard index ({exc.strerror or exc})", where=str(idx_path), fix=fix
        ) from None
    if len(raw) < 34 or raw[:9] != INDEX_HEADER or struct.unpack_from("<Q", raw, 9)[0] != INDEX_VERSION:
        raise DataError(
            "not a Megatron indexed-dataset index (header or version)", where=str(idx_path), fix=fix
        )
    codes = {v: k for k, v in DTYPE_CODES.items()}
    code = raw[17]
    if code not in codes:
        raise DataError(f"unknown dtype code {code}", where=str(idx_path), fix=fix)
    dtype = np.dtype(codes[code]).newbyteorder("<")
    n_seq, n_doc = struct.unpack_from("<QQ", raw, 18)
    need = 34 + 4 * n_seq + 8 * n_seq + 8 * n_doc
    if len(raw) < need:
        raise DataError(f"the index is truncated ({len(raw)} of {need} bytes)", where=str(idx_path), fix=fix)
    lengths = np.frombuffer(raw, dtype="<i4", count=n_seq, offset=34)
    pointers = np.frombuffer(raw, dtype="<i8", count=n_seq, offset=34 + 4 * n_seq)
    documents = np.frombuffer(raw, dtype="<i8", count=n_doc, offset=34 + 12 * n_seq)
    try:
        size = bin_path.stat().st_size
    except OSError as exc:
        raise DataError(
            f"cannot read the shard data ({exc.strerror or exc})", where=str(bin_path), fix=fix
        ) from None
    tokens = np.memmap(bin_path, dtype=dtype, mode="r") if size else np.zeros(0, dtype=dtype)
    return IndexedDataset(dtype, lengths, pointers, documents, tokens)


def blend_entries(sources: Sequence[tuple[str, float]]) -> list[tuple[float, str]]:
    """(weight, prefix relative to the data folder) per source, in config order."""
    return [(float(weight), f"{TOKENIZED_DIR}/{name}") for name, weight in sources]


def blend_text(entries: Sequence[tuple[float, str]]) -> str:
    """Megatron's `--data-path` value: "w1 prefix1 w2 prefix2 ..." on one line."""
    return " ".join(f"{weight!r} {prefix}" for weight, prefix in entries) + "\n"


class BlendSource(TypedDict):
    """A source of the blend: its weight as configured and its training shard."""

    name: str
    weight: float
    prefix: str
    dtype: str
    n_documents: int
    n_tokens: int


class BlendDetails(TypedDict):
    """What blend.json says beside the `--data-path` list: the end-of-document id, the vocabulary, the sources."""

    append_eod: bool
    eod_id: int
    n_vocab: int
    tokenizer: str
    sources: list[BlendSource]


def write_blend(data_dir: Path, entries: Sequence[tuple[float, str]], details: BlendDetails) -> list[Path]:
    """`tokenized/blend.txt` (the `--data-path` value, or a `--data-args-path` file) and `blend.json` beside it."""
    folder = Path(data_dir) / TOKENIZED_DIR
    folder.mkdir(parents=True, exist_ok=True)
    txt = atomic_write_bytes(folder / BLEND_TXT, blend_text(entries).encode())
    js = atomic_write_json(
        folder / BLEND_JSON,
        {
            "format": "megatron-core IndexedDataset (.bin + .idx), one sequence per document",
            "data_path": [x for weight, prefix in entries for x in (weight, prefix)],
            "prefixes_relative_to": "the data folder (run the trainer there, or put the folder before each prefix)",
            **details,
        },
    )
    return [Path(txt), Path(js)]

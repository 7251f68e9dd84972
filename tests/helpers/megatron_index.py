"""Readers of Megatron's indexed dataset for the training-shard tests: megatron-core's own, when installed, and a
transcription of its format otherwise.

megatron-core requires torch (its `Requires-Dist: torch>=2.6.0`, and `indexed_dataset.py` runs `import torch` at
module level for `torch.utils.data.Dataset`), which a dev install should not pull in for one reader. With the
wheel installed without dependencies (`.venv/bin/pip install --no-deps "megatron-core>=0.16,<0.17"`),
`megatron_indexed_module` loads megatron-core's own `indexed_dataset.py` with a stand-in for the two torch names it
touches at import time, then takes the stand-ins out of `sys.modules` again. `FormatReader` transcribes
`_IndexReader` and `IndexedDataset.__getitem__` of megatron-core 0.16.1, for machines without the wheel.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import struct
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

_HEADER = b"MMIDIDX\x00\x00"
_DTYPES = {
    1: np.uint8,
    2: np.int8,
    3: np.int16,
    4: np.int32,
    5: np.int64,
    6: np.float64,
    7: np.float32,
    8: np.uint16,
}


def megatron_indexed_module() -> Any | None:
    """megatron-core's `megatron.core.datasets.indexed_dataset` module, or None when the wheel is not installed."""
    spec = importlib.util.find_spec("megatron")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    if not (root / "core" / "datasets" / "indexed_dataset.py").is_file():
        return None
    if importlib.util.find_spec("torch") is not None:  # a full install: import it as a trainer does
        return importlib.import_module("megatron.core.datasets.indexed_dataset")
    names = ("torch", "torch.utils", "torch.utils.data", "megatron", "megatron.core", "megatron.core.utils")
    saved = {name: sys.modules.get(name) for name in names}
    torch = types.ModuleType("torch")
    torch_utils = types.ModuleType("torch.utils")
    torch_data = types.ModuleType("torch.utils.data")
    torch_data.Dataset = object  # type: ignore[attr-defined]  # the base class IndexedDataset names
    torch_utils.data = torch_data  # type: ignore[attr-defined]
    torch.utils = torch_utils  # type: ignore[attr-defined]
    torch.Tensor = object  # type: ignore[attr-defined]  # only in annotations
    megatron = types.ModuleType("megatron")
    megatron.__path__ = [str(root)]
    core = types.ModuleType("megatron.core")  # its __init__ builds the training stack: not needed to read
    core.__path__ = [str(root / "core")]
    utils = types.ModuleType("megatron.core.utils")
    utils.log_single_rank = lambda logger, level, msg, *a, **k: logger.log(level, msg)  # type: ignore[attr-defined]
    stand_ins = {
        "torch": torch,
        "torch.utils": torch_utils,
        "torch.utils.data": torch_data,
        "megatron": megatron,
        "megatron.core": core,
        "megatron.core.utils": utils,
    }
    sys.modules.update(stand_ins)
    try:
        return importlib.import_module("megatron.core.datasets.indexed_dataset")
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        logging.getLogger("megatron").setLevel(logging.WARNING)


class FormatReader:
    """`_IndexReader` + `IndexedDataset.__getitem__` (megatron-core 0.16.1) for sequences of a non-multimodal set."""

    def __init__(self, prefix: str) -> None:
        idx = Path(prefix + ".idx").read_bytes()
        assert idx[:9] == _HEADER, "bad header"
        assert struct.unpack("<Q", idx[9:17])[0] == 1, "bad version"
        self.dtype = _DTYPES[struct.unpack("<B", idx[17:18])[0]]
        n_seq, n_doc = struct.unpack("<QQ", idx[18:34])
        offset = 34
        self.sequence_lengths = np.frombuffer(idx, dtype=np.int32, count=n_seq, offset=offset)
        offset += self.sequence_lengths.nbytes
        self.sequence_pointers = np.frombuffer(idx, dtype=np.int64, count=n_seq, offset=offset)
        offset += self.sequence_pointers.nbytes
        self.document_indices = np.frombuffer(idx, dtype=np.int64, count=n_doc, offset=offset)
        assert offset + self.document_indices.nbytes == len(idx), "trailing bytes after the document indices"
        self._bin = Path(prefix + ".bin").read_bytes()

    def __len__(self) -> int:
        return int(self.sequence_lengths.size)

    def __getitem__(self, i: int) -> np.ndarray:
        return np.frombuffer(
            self._bin,
            dtype=self.dtype,
            count=int(self.sequence_lengths[i]),
            offset=int(self.sequence_pointers[i]),
        )

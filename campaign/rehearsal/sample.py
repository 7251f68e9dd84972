"""The rehearsal's data: a deterministic sample of the clean documents, tokenized, checked, packed and split.

Documents are taken in the order of their text's sha256 until the sample holds `sample_tokens` (as prepare
counted them), so the same clean data always gives the same sample, whatever the file order. Their ids are read
from prepare's training shards when it wrote them (`data.training_shards`: so what is rehearsed is what a trainer
reads), else encoded with the campaign's own tokenizer (`data.tokenizer`, the one prepare counts with); an
end-of-document token closes each, and the token stream of each split is cut into rows of `seq_len + 1` tokens (inputs are a row's
first `seq_len`, targets its last `seq_len`). Held-out documents are spread evenly over the hash order, so no
document is in both splits. Checks on the way, each a problem with its evidence: the tokenizer round-trips
every sampled document where it claims to be lossless, every id is below its vocabulary, no document encodes
to nothing and no row is only end-of-document tokens.
Source: the packing of GPT-2/3-style pretraining (documents joined by an end-of-text token, cut into fixed
context windows): Radford et al. 2019; Brown et al. 2020 §2.2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from campaign.data.indexed import TOKENIZED_DIR, IndexedDataset, read_indexed
from campaign.data.tokenizer import Tokenizer
from campaign.errors import CampaignError
from campaign.evidence import DataEvidence
from campaign.records import JsonRecord

MAX_EVIDENCE = 5  # examples quoted per failed check


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str
    text_sha256: str
    n_tokens: int  # as prepare counted it
    tokens: tuple[int, ...] | None = (
        None  # its ids from the training shard (end-of-document id dropped), if any
    )


@dataclass(frozen=True, slots=True)
class SampleChecks(JsonRecord):
    """What the sample's checks found, each set once its check ran (a sample that fails early has the first few)."""

    ids_from: str | None = None  # "training shards" or "tokenizer"
    max_token_id: int | None = None
    n_vocab: int | None = None
    n_empty_documents: int | None = None
    round_trip: str | None = None  # passed, failed for n document(s), or not applicable (lossy tokenizer)
    n_count_mismatch_with_prepare: int | None = None
    n_shard_mismatch: int | None = None  # only for ids from the training shards
    n_sequences: dict[str, int] | None = None  # train, heldout
    trainer_vocab: int | None = None

    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset(
        {
            "ids_from",
            "max_token_id",
            "n_vocab",
            "n_empty_documents",
            "round_trip",
            "n_count_mismatch_with_prepare",
            "n_shard_mismatch",
            "n_sequences",
            "trainer_vocab",
        }
    )


@dataclass
class Sample:
    """Packed rows of both splits, the vocabulary the trainer sees, and what the checks found."""

    train: np.ndarray  # uint32 [n_train, seq_len + 1]
    heldout: np.ndarray  # uint32 [n_heldout, seq_len + 1]
    vocab: int  # every id in train and heldout is below this
    eot_id: int  # the end-of-document id, in the trainer's numbering
    vocab_map: np.ndarray | None  # tokenizer id of each trainer id ("sample" vocabulary), else None
    tokenizer: str
    n_documents: dict[str, int] = field(default_factory=dict)
    n_tokens: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    checks: SampleChecks = field(default_factory=SampleChecks)

    def summary(self) -> dict[str, Any]:
        return {
            "tokenizer": self.tokenizer,
            "vocab": self.vocab,
            "eot_id": self.eot_id,
            "n_sequences": {"train": int(self.train.shape[0]), "heldout": int(self.heldout.shape[0])},
            "seq_len": int(self.train.shape[1] - 1) if self.train.ndim == 2 else None,
            "n_documents": self.n_documents,
            "n_tokens": self.n_tokens,
            "checks": self.checks.to_json(),
            "problems": self.problems,
        }


def select_documents(docs: Sequence[Document], sample_tokens: int) -> list[Document]:
    """Whole documents in sha256 order (ties by id) until their counted tokens reach `sample_tokens`."""
    chosen: list[Document] = []
    total = 0
    for doc in sorted(docs, key=lambda d: (d.text_sha256, d.doc_id)):
        if total >= sample_tokens:
            break
        chosen.append(doc)
        total += max(int(doc.n_tokens), 0)
    return chosen


def documents_from_tables(
    tables: Sequence[pa.Table],
    sample_tokens: int,
    shards: Sequence[IndexedDataset | None] | None = None,
    eot_id: int | None = None,
) -> list[Document]:
    """What `select_documents` chooses from clean Arrow tables (doc_id, text, text_sha256, n_tokens), reading
    the text of the chosen documents only. With `shards` (the training shard of each table, row i = document i,
    each closed by `eot_id`), each chosen document carries its ids as the shard holds them."""
    keys: list[tuple[str, str, int, int, int]] = []  # (sha256, id, tokens, table, row)
    for t_index, table in enumerate(tables):
        ids = pc.cast(table.column("doc_id"), pa.string()).to_pylist()
        hashes = table.column("text_sha256").to_pylist()
        counts = table.column("n_tokens").to_pylist()
        keys += [
            (h, i, int(n or 0), t_index, row)
            for row, (h, i, n) in enumerate(zip(hashes, ids, counts, strict=True))
        ]
    keys.sort(key=lambda k: (k[0], k[1]))
    chosen, total = [], 0
    for key in keys:
        if total >= sample_tokens:
            break
        chosen.append(key)
        total += max(key[2], 0)
    texts = {t_index: tables[t_index].column("text") for t_index in {k[3] for k in chosen}}
    return [
        Document(
            doc_id=i,
            text=texts[t][row].as_py(),
            text_sha256=h,
            n_tokens=n,
            tokens=_shard_ids(shards, t, row, eot_id),
        )
        for h, i, n, t, row in chosen
    ]


def clean_tables_with_shards(
    evidence: DataEvidence, data_dir: Path
) -> tuple[list[pa.Table], list[IndexedDataset | None]]:
    """The clean tables the data gates judged and, where prepare wrote one, each one's training shard."""
    tokenized = evidence.manifest.get("tokenized") is not None
    pairs = [(f.table, f.source) for f in evidence.files if f.kind == "clean" and f.table is not None]
    shards = [
        read_indexed(Path(data_dir) / TOKENIZED_DIR / source) if tokenized else None for _, source in pairs
    ]
    return [table for table, _ in pairs], shards


def _shard_ids(
    shards: Sequence[IndexedDataset | None] | None, table: int, row: int, eot_id: int | None
) -> tuple[int, ...] | None:
    """Document `row`'s ids in the training shard of `table` without its closing end-of-document id (None when
    there is no shard). An id list that does not end with `eot_id` comes back whole: the sample checks catch it."""
    shard = shards[table] if shards is not None and table < len(shards) else None
    if shard is None or row >= len(shard):
        return None
    ids = shard.document(row).tolist()
    return tuple(ids[:-1] if ids and ids[-1] == eot_id else ids)


def is_heldout(n_documents: int, fraction: float) -> list[bool]:
    """Spread round(n x fraction) held-out documents (at least one when n > 1) evenly over n positions."""
    if n_documents < 2:
        return [False] * n_documents
    k = min(max(1, round(n_documents * fraction)), n_documents - 1)
    marks = [False] * n_documents
    for j in range(k):
        marks[int((j + 0.5) * n_documents / k)] = True
    return marks


def pack(token_lists: Sequence[Sequence[int]], eot_id: int, seq_len: int) -> np.ndarray:
    """Join documents with an end-of-document token after each and cut rows of seq_len + 1; drop the rest."""
    total = sum(len(t) + 1 for t in token_lists)
    stream = np.empty(total, dtype=np.int64)
    at = 0
    for tokens in token_lists:
        stream[at : at + len(tokens)] = tokens
        stream[at + len(tokens)] = eot_id
        at += len(tokens) + 1
    width = seq_len + 1
    rows = total // width
    return stream[: rows * width].reshape(rows, width)


def _first_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def build_sample(
    docs: Sequence[Document],
    tokenizer: Tokenizer,
    *,
    sample_tokens: int,
    seq_len: int,
    heldout_fraction: float,
    vocab: str = "sample",
) -> Sample:
    """The rehearsal sample of `docs`; a sample with `problems` must fail the gate (each says what and where)."""
    empty = np.zeros((0, seq_len + 1), dtype=np.uint32)
    out = Sample(train=empty, heldout=empty, vocab=0, eot_id=0, vocab_map=None, tokenizer=tokenizer.name)
    chosen = select_documents(docs, sample_tokens)
    if not chosen:
        out.problems.append("no clean documents to sample")
        out.fixes.append("run `campaign prepare` and check that it keeps documents")
        return out
    texts = [d.text for d in chosen]
    from_shards = all(d.tokens is not None for d in chosen)
    out.checks = replace(out.checks, ids_from="training shards" if from_shards else "tokenizer")
    try:
        reference = tokenizer.encode_many(texts)  # what the tokenizer gives for the clean text
        encoded = [list(d.tokens) for d in chosen if d.tokens is not None] if from_shards else reference
    except CampaignError as err:  # a counting-only tokenizer (gpt2-pretokens) cannot produce token ids
        out.problems.append(f"tokenizer {tokenizer.name} cannot encode: {err.message}")
        out.fixes.append(
            err.fix
            or "set data.tokenizer to a real tokenizer (cl100k_base, o200k_base or a "
            "tokenizer.json), then run prepare and validate again"
        )
        return out

    # Check: every id below the vocabulary, the end-of-document id too.
    max_id = max((max(t) for t in encoded if t), default=-1)
    out.checks = replace(out.checks, max_token_id=int(max_id), n_vocab=int(tokenizer.n_vocab))
    if tokenizer.eot_id >= tokenizer.n_vocab or tokenizer.eot_id < 0:
        out.problems.append(
            f"end-of-document id {tokenizer.eot_id} is outside the vocabulary of {tokenizer.n_vocab}"
        )
    bad_ids = [
        (d.doc_id, max(t))
        for d, t in zip(chosen, encoded, strict=True)
        if t and (max(t) >= tokenizer.n_vocab or min(t) < 0)
    ]
    if bad_ids:
        out.problems.append(
            f"{len(bad_ids)} document(s) encode to ids outside the vocabulary of "
            f"{tokenizer.n_vocab}: " + ", ".join(f"{i} (id {m})" for i, m in bad_ids[:MAX_EVIDENCE])
        )
        out.fixes.append("the tokenizer's n_vocab does not cover its ids: use a consistent tokenizer.json")

    # Check: no document encodes to nothing (it would put two end-of-document tokens side by side).
    empties = [d.doc_id for d, t in zip(chosen, encoded, strict=True) if not t]
    out.checks = replace(out.checks, n_empty_documents=len(empties))
    if empties:
        out.problems.append(
            f"{len(empties)} sampled document(s) encode to no tokens: " + ", ".join(empties[:MAX_EVIDENCE])
        )
        out.fixes.append("prepare should reject empty documents: check data.cleaning.min_words")

    # Check: the tokenizer round-trips the sample where it says it is lossless.
    round_trip = "not applicable (lossy tokenizer)" if not tokenizer.is_lossless else "passed"
    if tokenizer.is_lossless:
        broken = []
        for doc, tokens in zip(chosen, encoded, strict=True):
            back = tokenizer.decode(tokens)
            if back != doc.text:
                broken.append(
                    f"{doc.doc_id} (first difference at character {_first_difference(doc.text, back)})"
                )
        if broken:
            round_trip = f"failed for {len(broken)} document(s)"
            out.problems.append(
                f"tokenizer {tokenizer.name} does not round-trip {len(broken)} sampled "
                "document(s): " + ", ".join(broken[:MAX_EVIDENCE])
            )
            out.fixes.append(
                "the tokenizer loses text it claims to keep: use another data.tokenizer or fix "
                "its tokenizer.json"
            )

    mismatched = sum(1 for d, t in zip(chosen, encoded, strict=True) if d.n_tokens != len(t))
    out.checks = replace(out.checks, round_trip=round_trip, n_count_mismatch_with_prepare=mismatched)
    if from_shards:  # the shard holds what the tokenizer gives for the clean text
        differ = [d.doc_id for d, t in zip(chosen, reference, strict=True) if list(t) != list(d.tokens or ())]
        out.checks = replace(out.checks, n_shard_mismatch=len(differ))
        if differ:
            out.problems.append(
                f"{len(differ)} sampled document(s) have other ids in the training shard than the tokenizer "
                "gives for their clean text: " + ", ".join(differ[:MAX_EVIDENCE])
            )
            out.fixes.append(
                "run `campaign prepare` again: it rewrites the training shards from the clean data"
            )

    held = is_heldout(len(chosen), heldout_fraction)
    splits = {
        "train": [t for t, h in zip(encoded, held, strict=True) if not h],
        "heldout": [t for t, h in zip(encoded, held, strict=True) if h],
    }
    out.n_documents = {name: len(lists) for name, lists in splits.items()}
    out.n_tokens = {name: sum(len(t) for t in lists) for name, lists in splits.items()}
    packed = {name: pack(lists, tokenizer.eot_id, seq_len) for name, lists in splits.items()}
    for name, rows in packed.items():
        if rows.shape[0] == 0:
            have = out.n_tokens[name] + out.n_documents[name]
            out.problems.append(
                f"the sample is too small for one {name} sequence: {out.n_documents[name]} "
                f"document(s), {have} tokens with end-of-document tokens, need "
                f"seq_len + 1 = {seq_len + 1}"
            )
            out.fixes.append(
                "raise rehearsal.sample_tokens or lower rehearsal.seq_len (or prepare more data)"
            )
    # Check: no row is only end-of-document tokens.
    for name, rows in packed.items():
        hollow = np.flatnonzero((rows == tokenizer.eot_id).all(axis=1)) if rows.size else np.array([], int)
        if hollow.size:
            out.problems.append(
                f"{hollow.size} {name} sequence(s) hold only end-of-document tokens (rows "
                f"{', '.join(str(int(i)) for i in hollow[:MAX_EVIDENCE])})"
            )
            out.fixes.append("prepare should reject empty documents")
    out.checks = replace(out.checks, n_sequences={name: int(rows.shape[0]) for name, rows in packed.items()})
    if out.problems:
        return out

    if vocab == "sample":
        used = np.unique(
            np.concatenate([packed["train"].ravel(), packed["heldout"].ravel(), [tokenizer.eot_id]])
        )
        out.vocab_map = used.astype(np.uint32)
        out.train = np.searchsorted(used, packed["train"]).astype(np.uint32)
        out.heldout = np.searchsorted(used, packed["heldout"]).astype(np.uint32)
        out.vocab = int(used.size)
        out.eot_id = int(np.searchsorted(used, tokenizer.eot_id))
    else:
        out.train = packed["train"].astype(np.uint32)
        out.heldout = packed["heldout"].astype(np.uint32)
        out.vocab = int(tokenizer.n_vocab)
        out.eot_id = int(tokenizer.eot_id)
    out.checks = replace(out.checks, trainer_vocab=out.vocab)
    return out


def unigram_entropy_nats(rows: np.ndarray) -> float:
    """Entropy of the targets' unigram distribution (nats): the loss a model learning only frequencies reaches."""
    counts = np.bincount(rows[:, 1:].ravel().astype(np.int64))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum()) if p.size else math.nan

"""Small synthetic documents for the rehearsal sample and gate tests: seeded, distinct, a few hundred bytes each."""

import hashlib

import numpy as np

from campaign.rehearsal.sample import Document

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "box",
    "jugs",
    "of",
    "liquor",
]


def doc(i: int, n_words: int = 60) -> Document:
    rng = np.random.default_rng(i)
    text = " ".join(rng.choice(WORDS, n_words)) + f". Document {i}."
    return Document(
        doc_id=f"d{i}",
        text=text,
        text_sha256=hashlib.sha256(text.encode()).hexdigest(),
        n_tokens=len(text.encode()),
    )


DOCS = [doc(i) for i in range(60)]

"""The evidence covers every file a gate reads that the config names: replace one after validate, and the digest
moves and the file is named."""

from __future__ import annotations

import json
import os
import re
import sys
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from campaign.config import CampaignConfig, DataConfig, SourceConfig, load_config
from campaign.data import prepare_data
from campaign.evidence import (
    GATE_READ_KEYS,
    NOT_GATE_READ_KEYS,
    command_files,
    gate_file_changes,
    gate_files,
    module_file,
    read_evidence,
)
from tests.helpers.paths import DEMO

# String fields whose description says "file" without naming one (a field name, a format, free text).
NOT_A_FILE = {"data.sources.id_field", "data.sources.format", "plan.measured.source"}
NAMES_A_FILE = re.compile(r"\b(path|paths|file|files|folder|directory|command|\.json)\b", re.IGNORECASE)


def _string_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, description) of every field holding text, through nested models, lists and optionals."""
    out = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{info.alias or name}"
        kinds = [info.annotation]
        texty = False
        while kinds:
            kind = kinds.pop()
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                out += _string_fields(kind, f"{key}.")
            elif kind is str:
                texty = True
            else:
                kinds += [a for a in typing.get_args(kind) if a is not Ellipsis]
        if texty:
            out.append((key, info.description or ""))
    return out


def test_every_config_key_that_names_a_file_says_whether_a_gate_reads_it():
    """A key added later that names a file must join GATE_READ_KEYS (and gate_files) or say why not."""
    naming = {
        key
        for key, text in _string_fields(CampaignConfig)
        if NAMES_A_FILE.search(text) or re.search(r"(path|dir|file|command)$", key)
    } - NOT_A_FILE
    assert naming == set(GATE_READ_KEYS) | set(NOT_GATE_READ_KEYS), naming


def test_the_gate_files_are_the_tokenizer_json_and_what_the_trainer_command_names(tmp_path):
    (tmp_path / "train_small.py").write_text("print('train')\n")
    (tmp_path / "train.yaml").write_text("lr: 1\n")
    package = tmp_path / "mytrainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "run.py").write_text("")
    loaded = load_config(
        DEMO,
        [
            f"data.tokenizer={tmp_path / 'tokenizer.json'}",
            f"rehearsal.command=[torchrun, --standalone, {tmp_path / 'train_small.py'}, --config, train.yaml]",
        ],
    )
    found = gate_files(loaded.config, cwd=tmp_path)
    assert found == [
        ("data.tokenizer", tmp_path / "tokenizer.json"),
        ("rehearsal.command[2]", tmp_path / "train_small.py"),
        ("rehearsal.command[4]", tmp_path / "train.yaml"),  # relative to where the trainer starts
    ]
    # `python -m` names a module: its file is found on the path without importing it (the working folder first)
    assert command_files(["python", "-m", "mytrainer.run"], tmp_path) == [
        ("rehearsal.command[2]", package / "__init__.py"),  # `-m` runs the package's __init__ first
        ("rehearsal.command[2]", package / "run.py"),
    ]
    assert module_file("campaign.rehearsal.trainer", tmp_path) == Path(
        sys.modules["campaign.evidence"].__file__
    ).with_name("rehearsal").joinpath("trainer.py")
    assert command_files(["python", "-m", "no.such.module"], tmp_path) == []
    assert command_files(["./train.sh"], tmp_path) == []  # missing: the rehearsal gate says it cannot start


@pytest.fixture()
def prepared(tmp_path: Path) -> tuple[DataConfig, Path]:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text(
        "".join(json.dumps({"text": f"document {i} " + "words of prose here " * 30}) + "\n" for i in range(4))
    )
    data = DataConfig(
        sources=(SourceConfig(name="web", path=str(folder / "*.jsonl"), format="jsonl", weight=1.0),),
        tokenizer="utf8-bytes",
    )
    data_dir = tmp_path / "ws" / "data"
    prepare_data(data, data_dir)
    return data, data_dir


def test_replacing_a_file_a_gate_read_moves_the_digest_and_is_named(prepared, tmp_path):
    data, data_dir = prepared
    tokenizer, script = tmp_path / "tokenizer.json", tmp_path / "train.py"
    tokenizer.write_text('{"model": "one"}')
    script.write_text("print('train')\n")
    files = [("data.tokenizer", tokenizer), ("rehearsal.command[1]", script)]
    validated = read_evidence(data_dir, data, files=files)
    assert validated.digest != read_evidence(data_dir, data).digest  # the files are part of the digest
    assert read_evidence(data_dir, data, files=files).digest == validated.digest  # and it repeats
    recorded = validated.gate_files_record()
    assert recorded[str(tokenizer)]["key"] == "data.tokenizer"

    tokenizer.write_text('{"model": "another"}')  # another tokenizer, after validate
    now = read_evidence(data_dir, data, files=files)
    assert now.digest != validated.digest
    changes = gate_file_changes(recorded, now.gate_files, "the last validate")
    assert len(changes) == 1 and changes[0].startswith(
        f"data.tokenizer: {tokenizer} changed since the last validate"
    )
    assert "restore the file, or run `campaign validate` again" in changes[0]

    script.unlink()
    gone = read_evidence(data_dir, data, files=files)
    assert {f.key: f.sha256 for f in gone.gate_files}["rehearsal.command[1]"] == "missing"
    assert any(
        c.startswith("rehearsal.command[1]: ") for c in gate_file_changes(recorded, gone.gate_files, "x")
    )


def test_a_gate_file_that_is_a_fifo_is_never_opened(prepared, tmp_path):
    data, data_dir = prepared
    fifo = tmp_path / "tokenizer.json"
    os.mkfifo(fifo)
    evidence = read_evidence(data_dir, data, files=[("data.tokenizer", fifo)])  # returns: nothing blocks
    assert evidence.gate_files[0].sha256 == "not a file"

"""Evidence covers what runs: every file a trainer command runs, imports from outside the Python environment or
names is in the digest, whatever the module layout; and `execute.command` itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaign.command_files import trainer_files
from campaign.config import DataConfig, SourceConfig, load_config
from campaign.data import prepare_data
from campaign.evidence import gate_file_changes, gate_files, read_evidence
from tests.helpers.paths import DEMO


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _found(command: list[str], cwd: Path) -> dict[str, str]:
    return {str(path.relative_to(cwd)): key for key, path in trainer_files(command, cwd)}


def test_a_helper_module_the_script_imports_is_covered(tmp_path):
    _write(
        tmp_path, {"wrap.py": "import sys\nimport helper\nhelper.main()\n", "helper.py": "def main(): pass\n"}
    )
    assert _found(["python", "wrap.py"], tmp_path) == {
        "wrap.py": "rehearsal.command[1]",
        "helper.py": "rehearsal.command[1] imports helper",  # sys: the Python environment, not followed
    }


@pytest.mark.parametrize(
    ("files", "command", "expected"),
    [
        (  # a package with relative imports, started with -m
            {
                "pkg/__init__.py": "",
                "pkg/__main__.py": "from .core import run\nrun()\n",
                "pkg/core.py": "from . import util\nfrom .sub.deep import x\n",
                "pkg/util.py": "",
                "pkg/sub/__init__.py": "",
                "pkg/sub/deep.py": "x = 1\n",
            },
            ["python", "-m", "pkg"],
            {"pkg/__main__.py", "pkg/core.py", "pkg/util.py", "pkg/sub/__init__.py", "pkg/sub/deep.py"},
        ),
        (  # from-import of a submodule, a dynamic import by literal name, a folder put on sys.path
            {
                "train.py": "import importlib, sys\nsys.path.insert(0, 'vendor')\nfrom lib import model\n"
                "import dep\nplugin = importlib.import_module('plugins.fast')\n",
                "lib/__init__.py": "",
                "lib/model.py": "",
                "vendor/dep.py": "",
                "plugins/fast.py": "",
            },
            ["python", "train.py"],
            {"train.py", "lib/__init__.py", "lib/model.py", "vendor/dep.py", "plugins/fast.py"},
        ),
        (  # files named by a literal: a runpy target and a config, and what the target imports
            {
                "train.py": "import runpy\nrunpy.run_path('real.py')\nopen('settings.yaml').read()\n",
                "real.py": "import helper2\n",
                "helper2.py": "",
                "settings.yaml": "lr: 1\n",
            },
            ["python", "train.py"],
            {"train.py", "real.py", "helper2.py", "settings.yaml"},
        ),
        (  # a shell script that starts a Python script
            {
                "run.sh": "#!/bin/sh\nexec python wrap.py --config conf.json\n",
                "wrap.py": "import helper\n",
                "helper.py": "",
                "conf.json": "{}",
            },
            ["./run.sh"],
            {"run.sh", "wrap.py", "helper.py", "conf.json"},
        ),
    ],
    ids=["package-relative", "dynamic-and-sys-path", "named-files", "shell-script"],
)
def test_every_module_layout_is_followed(tmp_path, files, command, expected):
    _write(tmp_path, files)
    assert expected <= set(_found(command, tmp_path)), _found(command, tmp_path)


def test_installed_packages_are_not_followed(tmp_path):
    _write(tmp_path, {"t.py": "import numpy, json, campaign.plan\nimport yaml\n"})
    assert _found(["python", "t.py"], tmp_path) == {"t.py": "rehearsal.command[1]"}


@pytest.fixture()
def prepared(tmp_path: Path) -> tuple[DataConfig, Path]:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps({"text": "words of prose here " * 30}) + "\n")
    data = DataConfig(
        sources=(SourceConfig(name="web", path=str(folder / "*.jsonl"), format="jsonl", weight=1.0),),
        tokenizer="utf8-bytes",
    )
    prepare_data(data, tmp_path / "ws" / "data")
    return data, tmp_path / "ws" / "data"


def test_replacing_an_imported_helper_moves_the_digest_and_names_it(prepared, tmp_path):
    data, data_dir = prepared
    _write(tmp_path, {"wrap.py": "import helper\nhelper.main()\n", "helper.py": "def main(): train()\n"})
    loaded = load_config(DEMO, [f"rehearsal.command=[python, {tmp_path / 'wrap.py'}]"])
    validated = read_evidence(data_dir, data, files=gate_files(loaded.config, tmp_path))
    (tmp_path / "helper.py").write_text("import sys\ndef main(): sys.exit(0)\n")
    now = read_evidence(data_dir, data, files=gate_files(loaded.config, tmp_path))
    assert now.digest != validated.digest
    (change,) = gate_file_changes(validated.gate_files_record(), now.gate_files, "the last validate")
    assert change.startswith(f"rehearsal.command[1] imports helper: {tmp_path / 'helper.py'} changed since")


def test_execute_command_and_its_files_are_in_the_digest(prepared, tmp_path):
    data, data_dir = prepared
    _write(tmp_path, {"run.py": "import core\n", "core.py": "", "other.py": ""})
    base = load_config(DEMO)
    committed_cfg = load_config(DEMO, [f"execute.command=[python, {tmp_path / 'run.py'}]"])
    plain = read_evidence(data_dir, data, files=gate_files(base.config, tmp_path))
    committed = read_evidence(data_dir, data, files=gate_files(committed_cfg.config, tmp_path))
    assert committed.digest != plain.digest
    keys = {f.key for f in committed.gate_files}
    assert {"execute.command", "execute.command[1]", "execute.command[1] imports core"} <= keys

    (tmp_path / "core.py").write_text("x = 1\n")  # the executed trainer's module changed after commit
    now = read_evidence(data_dir, data, files=gate_files(committed_cfg.config, tmp_path))
    assert now.digest != committed.digest
    assert any(
        "execute.command[1] imports core" in c
        for c in gate_file_changes(committed.gate_files_record(), now.gate_files, "commit")
    )

    other = load_config(DEMO, [f"execute.command=[python, {tmp_path / 'other.py'}]"])
    swapped = read_evidence(data_dir, data, files=gate_files(other.config, tmp_path))
    assert swapped.digest != committed.digest
    changes = gate_file_changes(committed.gate_files_record(), swapped.gate_files, "commit")
    assert any(c.startswith('execute.command is now ["python", ') and "other.py" in c for c in changes), (
        changes
    )

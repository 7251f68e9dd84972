"""validate reuses a gate's recorded result only while every digest it was recorded against is unchanged.

Driven through the CLI on a real prepared workspace (the session's Prefect test harness), as a user meets it: the
table says of each gate whether it was run or reused, `--rerun` forces, and any change to what a gate read (the
config, the data, an input, the trainer, the code version) makes the gates run again, so a reused result never
passes a gate whose evidence changed.
"""

import re
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from campaign.gates import REQUIRED_GATES
from campaign_cli.cli import main
from tests.helpers.paths import DEMO, FAST_REHEARSAL, NUMPY_TRAINER, set_args
from tests.helpers.saved import SavedFolder

ROW = re.compile(
    r"^(\w+)\s+(PASS|FAIL)\s+(run|reused \(recorded \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\))\s", re.M
)


def _inputs(case: Path) -> list[str]:
    """The demo on its own corpus, rehearsed by its own copy of the fast trainer (so a test can edit it)."""
    root = case / "inputs"
    return [
        f"data.demo_corpus_dir={root}",
        f"data.sources.0.path={root}/web/*.jsonl",
        f"data.sources.1.path={root}/docs/*.parquet",
        *FAST_REHEARSAL,
        f"rehearsal.command=[{sys.executable}, {case / 'trainer.py'}]",
    ]


def _validate(ws: Path, sets: list[str], capsys, *extra: str) -> tuple[int, dict[str, tuple[str, str]]]:
    """validate's exit code and its table: {gate: (PASS/FAIL, run/reused ...)}."""
    capsys.readouterr()
    code = main(["validate", str(DEMO), "--workspace", str(ws), *set_args(sets), *extra])
    table = {gate: (verdict, how) for gate, verdict, how in ROW.findall(capsys.readouterr().out)}
    return code, table


def _reused(table: dict[str, tuple[str, str]]) -> set[str]:
    return {gate for gate, (_, how) in table.items() if how.startswith("reused")}


@pytest.fixture(scope="module")
def _validated_case(tmp_path_factory) -> tuple[list[str], SavedFolder]:
    case = tmp_path_factory.mktemp("reuse") / "case"
    case.mkdir()
    shutil.copy(NUMPY_TRAINER, case / "trainer.py")
    sets = _inputs(case)
    assert main(["prepare", str(DEMO), "--workspace", str(case / "w"), *set_args(sets)]) == 0
    assert main(["validate", str(DEMO), "--workspace", str(case / "w"), *set_args(sets)]) == 0
    return sets, SavedFolder(case, "validated")


@pytest.fixture()
def validated(_validated_case) -> tuple[Path, list[str]]:
    sets, saved = _validated_case
    return saved.restore(), list(sets)


def test_an_unchanged_workspace_reuses_every_gate_but_identity_and_says_when_each_was_recorded(
    validated, capsys
):
    case, sets = validated
    ws = case / "w"
    result = ws / "rehearsal" / "result.json"
    before = result.stat().st_ino
    code, table = _validate(ws, sets, capsys)
    assert code == 0
    assert list(table) == list(REQUIRED_GATES)  # every gate is printed
    assert table["data_identity"] == ("PASS", "run")  # the evidence is read each time: its digest is the key
    assert _reused(table) == set(REQUIRED_GATES) - {"data_identity"}
    assert result.stat().st_ino == before  # the rehearsal did not train again
    # reused twice: still the time of the run that judged it
    code, again = _validate(ws, sets, capsys)
    assert code == 0 and again == table
    # the reused verdicts are recorded for this validate: commit books the window on them
    assert main(["commit", str(DEMO), "--workspace", str(ws), *set_args(sets)]) == 0


def test_rerun_forces_the_named_gates_or_all_of_them(validated, capsys):
    case, sets = validated
    ws = case / "w"
    code, table = _validate(ws, sets, capsys, "--rerun", "rehearsal", "data_quality")
    assert code == 0
    assert _reused(table) == set(REQUIRED_GATES) - {"data_identity", "rehearsal", "data_quality"}
    code, table = _validate(ws, sets, capsys, "--rerun")
    assert code == 0 and _reused(table) == set()


def test_an_unknown_gate_or_a_gate_without_rerun_is_bad_input(validated, capsys):
    case, _ = validated
    capsys.readouterr()
    assert main(["validate", str(DEMO), "--workspace", str(case / "w"), "--rerun", "rehersal"]) == 2
    err = capsys.readouterr().err
    assert "no gate named rehersal" in err and "--rerun" in err
    assert main(["validate", str(DEMO), "--workspace", str(case / "w"), "rehearsal"]) == 2
    assert "--rerun" in capsys.readouterr().err


def test_a_changed_config_runs_every_gate_again(validated, capsys):
    case, sets = validated
    code, table = _validate(case / "w", [*sets, "gates.data.min_documents=1"], capsys)
    assert code == 0 and _reused(table) == set()


def test_a_changed_trainer_runs_every_gate_again(validated, capsys):
    case, sets = validated
    trainer = case / "trainer.py"
    trainer.write_text(trainer.read_text() + "\n# edited after validate\n")
    code, table = _validate(case / "w", sets, capsys)
    assert code == 0 and _reused(table) == set()
    assert table["rehearsal"] == ("PASS", "run")


def test_a_changed_prepared_file_is_never_passed_by_a_reused_result(validated, capsys):
    case, sets = validated
    clean = next((case / "w" / "data" / "clean").glob("*.parquet"))
    table_ = pq.read_table(clean)
    pq.write_table(table_.slice(0, table_.num_rows - 1), clean)
    code, table = _validate(case / "w", sets, capsys)
    assert code == 1
    assert table["data_identity"] == ("FAIL", "run") and _reused(table) == set()


def test_a_changed_input_of_prepare_is_never_passed_by_a_reused_result(validated, capsys):
    """An input's change does not alter the data digest (the manifest records it); the identity gate finds it, and
    then nothing is reused."""
    case, sets = validated
    docs = next((case / "inputs" / "docs").glob("*.parquet"))
    table_ = pq.read_table(docs)
    pq.write_table(table_.slice(0, table_.num_rows - 1), docs)
    code, table = _validate(case / "w", sets, capsys)
    assert code == 1
    assert table["data_identity"][0] == "FAIL" and _reused(table) == set()


def test_another_code_version_runs_every_gate_again(validated, capsys, monkeypatch):
    import tasks.validate

    case, sets = validated
    monkeypatch.setattr(tasks.validate, "code_version", lambda: "another version of campaign")
    code, table = _validate(case / "w", sets, capsys)
    assert code == 0 and _reused(table) == set()


def test_a_gate_whose_written_files_are_gone_runs_again(validated, capsys):
    case, sets = validated
    (case / "w" / "rehearsal" / "result.json").unlink()
    code, table = _validate(case / "w", sets, capsys)
    assert code == 0
    assert table["rehearsal"] == ("PASS", "run") and "rehearsal" not in _reused(table)
    assert (case / "w" / "rehearsal" / "result.json").is_file()

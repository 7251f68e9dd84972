"""Gates that cannot be fooled: each case is an attack that once got a window booked or executed.

Every test drives the CLI as a user would (in-process, on the session's Prefect test harness) and asserts the
exit code and what the message names.
"""

import json
import re
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from campaign_cli.cli import main
from tests.helpers.paths import DEMO, FAST_REHEARSAL, future_start, set_args
from tests.helpers.saved import SavedFolder


def _run(stage: str, ws: Path, sets: list[str]) -> int:
    return main([stage, str(DEMO), "--workspace", str(ws), *set_args(sets)])


def _inputs(root: Path) -> list[str]:
    """Overrides that point the demo at its own copy of the demo corpus under `root`."""
    return [
        f"data.demo_corpus_dir={root}",
        f"data.sources.0.path={root}/web/*.jsonl",
        f"data.sources.1.path={root}/docs/*.parquet",
        *FAST_REHEARSAL,
    ]


@pytest.fixture()
def own_inputs(tmp_path) -> list[str]:
    return _inputs(tmp_path / "inputs")


@pytest.fixture(scope="module")
def _demo_case(tmp_path_factory) -> tuple[list[str], SavedFolder, SavedFolder]:
    """One prepare, then one validate, of the demo on its own corpus (`case/w`, `case/inputs`), each saved."""
    case = tmp_path_factory.mktemp("gate") / "case"
    inputs = _inputs(case / "inputs")
    assert _run("prepare", case / "w", inputs) == 0
    prepared = SavedFolder(case, "prepared")
    assert _run("validate", case / "w", inputs) == 0
    return inputs, prepared, SavedFolder(case, "validated")


@pytest.fixture()
def prepared(_demo_case) -> tuple[Path, list[str]]:
    """A folder holding the workspace `w` as prepare left it and its corpus `inputs`, with the overrides naming
    them (the same paths for every test: a test of this module that starts with a plain prepare starts here)."""
    inputs, saved, _ = _demo_case
    return saved.restore(), list(inputs)


@pytest.fixture()
def validated(_demo_case) -> tuple[Path, list[str]]:
    """The same after a validate that passed."""
    inputs, _, saved = _demo_case
    return saved.restore(), list(inputs)


def test_mixture_is_judged_against_the_weights_of_this_command(prepared, capsys):
    case, own_inputs = prepared
    ws = case / "w"  # prepared
    skewed = [*own_inputs, "data.sources.0.weight=0.95", "data.sources.1.weight=0.05"]
    capsys.readouterr()
    assert _run("validate", ws, skewed) == 1
    assert re.search(r"data_mixture\s+FAIL", capsys.readouterr().out)
    assert _run("commit", ws, skewed) == 3
    assert _run("execute", ws, skewed) == 3
    assert _run("validate", ws, own_inputs) == 0  # the weights prepare used still pass


def test_a_new_validate_replaces_the_verdict_for_the_same_digests(prepared, capsys):
    """Append 3,000 empty records and re-prepare: the clean files are unchanged, the rejected ones are not."""
    case, own_inputs = prepared
    ws = case / "w"  # prepared
    own_inputs = [*own_inputs[1:], "data.demo_corpus_dir=null"]  # from now on the inputs are not regenerated
    assert _run("prepare", ws, own_inputs) == 0
    assert _run("validate", ws, own_inputs) == 0
    web = case / "inputs" / "web" / "part-001.jsonl"
    original = web.read_bytes()
    web.write_bytes(original + b"".join(b'{"id": "empty-%d", "text": ""}\n' % i for i in range(3000)))
    assert _run("prepare", ws, own_inputs) == 0
    capsys.readouterr()
    assert _run("validate", ws, own_inputs) == 1
    assert "rejected > gates.data.max_rejected_fraction" in capsys.readouterr().err
    assert _run("commit", ws, own_inputs) == 3
    assert _run("execute", ws, own_inputs) == 3
    # ...and the reverse: fix the data, validate passes, commit goes through
    web.write_bytes(original)
    assert _run("prepare", ws, own_inputs) == 0
    assert _run("validate", ws, own_inputs) == 0
    assert _run("commit", ws, own_inputs) == 0


def test_the_same_digests_failing_later_block_commit(validated):
    """A validate that fails for digests that passed before is the verdict that counts."""
    case, own_inputs = validated
    ws = case / "w"  # prepared and validated
    with duckdb.connect(str(ws / "campaign.duckdb")) as con:
        before = con.execute("SELECT count(DISTINCT run_id) FROM gates").fetchone()[0]
    assert _run("validate", ws, own_inputs) == 0
    with duckdb.connect(str(ws / "campaign.duckdb")) as con:
        assert con.execute("SELECT count(DISTINCT run_id) FROM gates").fetchone()[0] == before + 1


def test_glob_characters_in_the_workspace_path_judge_only_that_workspace(tmp_path, capsys):
    """`W/ws[1]` next to `W/ws1`: each judged on its own files, never its sibling's."""
    good, bad = tmp_path / "W" / "ws1", tmp_path / "W" / "ws[1]"
    for ws in (good, bad):
        assert main(["prepare", str(DEMO), "--workspace", str(ws), *set_args(FAST_REHEARSAL)]) == 0
    # the shipped demo's corpus is generated inside the workspace, in a folder campaign marks as its own
    assert (bad / "inputs" / ".campaign-demo-corpus").is_file()
    manifest = json.loads((bad / "data" / "manifest.json").read_text())
    assert manifest["inputs"] and all(e["path"].startswith(str(bad / "inputs")) for e in manifest["inputs"])
    assert main(["validate", str(DEMO), "--workspace", str(good), *set_args(FAST_REHEARSAL)]) == 0
    (bad / "data" / "clean" / "web.parquet").unlink()  # the bracketed workspace's data is now broken
    capsys.readouterr()
    assert main(["validate", str(DEMO), "--workspace", str(bad), *set_args(FAST_REHEARSAL)]) == 1
    assert "data/clean/web.parquet is missing" in capsys.readouterr().out
    assert main(["commit", str(DEMO), "--workspace", str(bad), *set_args(FAST_REHEARSAL)]) == 3
    assert main(["commit", str(DEMO), "--workspace", str(good), *set_args(FAST_REHEARSAL)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_validate_recomputes_its_figures_from_the_files(prepared, capsys):
    case, own_inputs = prepared
    ws = case / "w"  # prepared
    sets = [*own_inputs, "gates.data.min_tokens=1e9"]
    manifest_path = ws / "data" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for source in manifest["sources"]:
        source["tokens_kept"] *= 1_000_000
    manifest["totals"]["tokens_kept"] *= 1_000_000
    manifest_path.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert _run("validate", ws, sets) == 1
    out = capsys.readouterr().out
    assert "min_tokens" in out  # the tokens counted from the files, not the manifest's claim


def test_a_clean_file_edited_to_claim_more_tokens_fails(prepared, capsys):
    case, own_inputs = prepared
    ws = case / "w"  # prepared
    path = ws / "data" / "clean" / "web.parquet"
    table = pq.read_table(path)
    inflated = pa.compute.multiply(table.column("n_tokens"), 1000)
    pq.write_table(table.set_column(table.schema.get_field_index("n_tokens"), "n_tokens", inflated), path)
    capsys.readouterr()
    assert _run("validate", ws, own_inputs) == 1
    out = capsys.readouterr().out
    assert "data_identity" in out and "changed since prepare" in out
    assert "carry an n_tokens that the tokenizer does not give" in out
    assert _run("commit", ws, own_inputs) == 3


def test_a_file_added_to_the_clean_folder_is_named_and_never_deleted(prepared, capsys):
    case, own_inputs = prepared
    ws = case / "w"  # prepared
    mine = ws / "data" / "clean" / "my_curated_corpus.parquet"
    shutil.copy(ws / "data" / "clean" / "web.parquet", mine)
    capsys.readouterr()
    assert _run("validate", ws, own_inputs) == 1
    assert "my_curated_corpus.parquet is not in manifest.json" in capsys.readouterr().out
    assert _run("prepare", ws, own_inputs) == 0
    assert mine.exists()  # campaign did not write it, so campaign does not delete it


def test_changing_an_input_after_validate_blocks_commit_and_execute(validated, capsys):
    case, own_inputs = validated
    ws = case / "w"  # prepared and validated
    assert _run("commit", ws, own_inputs) == 0
    docs = next((case / "inputs" / "docs").glob("*.parquet"))
    table = pq.read_table(docs)
    pq.write_table(table.slice(0, table.num_rows - 1), docs)
    capsys.readouterr()
    assert _run("execute", ws, own_inputs) == 3
    assert "changed since prepare" in capsys.readouterr().err


def test_prepare_refuses_a_folder_that_is_not_a_workspace(tmp_path, own_inputs, capsys):
    theirs = tmp_path / "theirs"
    (theirs / "data" / "clean").mkdir(parents=True)
    precious = theirs / "data" / "clean" / "my_curated_corpus.parquet"
    precious.write_bytes(b"a user's own file")
    for stage in ("prepare", "run"):
        assert _run(stage, theirs, own_inputs) == 2
    assert "not a campaign workspace" in capsys.readouterr().err
    assert precious.read_bytes() == b"a user's own file"
    assert sorted(p.name for p in theirs.rglob("*")) == ["clean", "data", "my_curated_corpus.parquet"]


def test_the_demo_corpus_is_written_only_into_a_folder_campaign_made(tmp_path, capsys):
    mine = tmp_path / "mine"
    (mine / "web").mkdir(parents=True)
    (mine / "web" / "part-000.jsonl").write_text('{"text": "my own data"}\n')
    assert _run("prepare", tmp_path / "w", _inputs(mine)) == 2
    assert "data.demo_corpus_dir" in capsys.readouterr().err
    assert (mine / "web" / "part-000.jsonl").read_text() == '{"text": "my own data"}\n'


def test_refused_stages_leave_a_missing_workspace_missing(tmp_path, own_inputs):
    for stage in ("validate", "commit", "execute"):
        assert _run(stage, tmp_path / "nothing", own_inputs) == 3
    assert not (tmp_path / "nothing").exists()


@pytest.mark.timeout(900)  # a commit and execute, then a whole second lifecycle
def test_analyse_reports_the_window_executed_last(validated):
    case, own_inputs = validated
    ws = case / "w"  # prepared and validated: its first window books `window.start: auto`
    windows = []
    rounds = [own_inputs, [*own_inputs, f"window.start={future_start(58)}"]]
    for sets, stages in zip(
        rounds, [("commit", "execute"), ("prepare", "validate", "commit", "execute")], strict=True
    ):
        for stage in stages:
            assert _run(stage, ws, sets) == 0, stage
        with duckdb.connect(str(ws / "campaign.duckdb")) as con:
            windows.append(
                con.execute("SELECT commitment_id FROM commitments ORDER BY created_at DESC").fetchone()[0]
            )
        assert (ws / "sim" / windows[-1] / "events-0.parquet").is_file()
    assert windows[0] != windows[1]
    # execute the first window again (its simulation is reused): that is now the window to analyse
    assert _run("execute", ws, own_inputs) == 0
    assert main(["analyse", "--workspace", str(ws)]) == 0
    first = json.loads((ws / "report" / "analysis.json").read_text())
    assert first["commitment_id"] == windows[0]
    assert main(["analyse", "--workspace", str(ws)]) == 0
    again = (ws / "report" / "analysis.json").read_text()
    assert json.loads(again) == first  # identical runs give identical figures, to the last digit

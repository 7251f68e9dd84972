"""Every refusal: no commitment, a changed Parquet file, a changed config, a failed gate; no flag bypasses them."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from campaign.gates import REQUIRED_GATES
from campaign_cli.cli import main
from tests.helpers.paths import DEMO, set_args


@pytest.fixture(scope="module")
def committed(tmp_path_factory, demo_inputs, demo_prepared):
    """A workspace that went through prepare, validate and commit (module-scoped: built once)."""
    # its own folder, so its own cluster calendar
    ws = demo_prepared.restore_to(tmp_path_factory.mktemp("committed") / "ws")
    for stage in ("validate", "commit"):
        assert main([stage, str(DEMO), "--workspace", str(ws), *set_args(demo_inputs)]) == 0, stage
    return ws


@pytest.fixture()
def prepared(demo_prepared, tmp_path) -> Path:
    """A copy of the run's prepared demo workspace (conftest.py), in the test's own folder."""
    return demo_prepared.restore_to(tmp_path / "w")


def test_execute_without_commitment_says_no_gate_was_ever_run(prepared, demo_inputs, capsys):
    ws = prepared
    capsys.readouterr()
    assert main(["execute", str(DEMO), "--workspace", str(ws), *set_args(demo_inputs)]) == 3
    err = capsys.readouterr().err
    assert "no commitment" in err
    # never validated: one line that says so and what to run, not one line per gate
    assert "never validated: no gate has been run" in err and "run `campaign validate`" in err
    assert not any(f"gate '{gate}'" in err for gate in REQUIRED_GATES)
    assert "Traceback" not in err


def _listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else None


@pytest.mark.parametrize("folder", ["missing", "empty", "marker-only"])
def test_execute_on_an_empty_workspace_is_refused_and_leaves_it_as_it_was(
    tmp_path, demo_inputs, capsys, folder
):
    ws = tmp_path / "w"
    if folder != "missing":
        ws.mkdir()
    if folder == "marker-only":  # a workspace that never finished a prepare
        from campaign import store

        store.adopt_workspace(store.Workspace(ws), "demo")
    before = _listing(ws)
    capsys.readouterr()
    assert main(["execute", str(DEMO), "--workspace", str(ws), *set_args(demo_inputs)]) == 3
    err = capsys.readouterr().err
    assert err.count("run `campaign prepare CONFIG`") == 1 and "Traceback" not in err
    assert _listing(ws) == before  # no catalog, no lock, no .prefect: refused before anything starts


def test_a_refusal_is_printed_once_on_the_terminal(tmp_path, demo_inputs):
    """A real terminal, Prefect's console logging included: the refusal is said once, by the command."""
    import os
    import subprocess
    import sys

    from prefect.settings import PREFECT_API_URL

    ws = tmp_path / "w"
    ws.mkdir()
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "campaign_cli.cli",
            "execute",
            str(DEMO),
            "--workspace",
            str(ws),
            *set_args(demo_inputs),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 3
    assert result.stderr.count("no campaign workspace here") == 1, result.stderr
    assert "Finished in state" not in result.stderr and "Traceback" not in result.stderr
    assert list(ws.iterdir()) == []


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("nosuch.key=1", "nosuch"),
        ("cluster.nodes=-1", "cluster.nodes"),
        ("gates.data.max_rejected_fraction=7", "gates.data.max_rejected_fraction"),
    ],
)
def test_bad_input_is_refused_before_the_run_naming_the_field(tmp_path, demo_inputs, capsys, override, field):
    ws = tmp_path / "w"
    assert main(["run", str(DEMO), "--workspace", str(ws), *set_args([*demo_inputs, override])]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err
    assert not ws.exists()


def test_commit_without_validate_is_refused(prepared, demo_inputs, capsys):
    ws = prepared
    capsys.readouterr()
    assert main(["commit", str(DEMO), "--workspace", str(ws), *set_args(demo_inputs)]) == 3
    err = capsys.readouterr().err
    assert "commit refused" in err and "never validated: no gate has been run" in err
    assert "run `campaign validate`" in err


def test_commit_after_a_failed_gate_is_refused(prepared, demo_inputs, capsys):
    ws = prepared  # prepare reads no cluster setting
    sets = set_args([*demo_inputs, "cluster.accelerator.hbm_gib=4"])
    assert main(["validate", str(DEMO), "--workspace", str(ws), *sets]) == 1
    capsys.readouterr()
    assert main(["commit", str(DEMO), "--workspace", str(ws), *sets]) == 3
    assert "gate 'memory' failed" in capsys.readouterr().err


def test_changed_config_makes_execute_name_the_config_digest(committed, demo_inputs, capsys):
    capsys.readouterr()
    sets = set_args([*demo_inputs, "cluster.spare_nodes=5"])
    assert main(["execute", str(DEMO), "--workspace", str(committed), *sets]) == 3
    err = capsys.readouterr().err
    assert "config digest changed since commit" in err and "Traceback" not in err


def test_changed_parquet_makes_execute_name_the_data_digest_and_file(
    committed, demo_inputs, capsys, tmp_path
):
    clean = committed / "data" / "clean" / "web.parquet"
    original = clean.read_bytes()
    table = pq.read_table(clean)
    texts = table.column("text").to_pylist()
    texts[0] = texts[0] + " (edited after commit)"
    pq.write_table(table.set_column(table.schema.get_field_index("text"), "text", pa.array(texts)), clean)
    try:
        capsys.readouterr()
        assert main(["execute", str(DEMO), "--workspace", str(committed), *set_args(demo_inputs)]) == 3
        err = capsys.readouterr().err
        assert "gate evidence digest changed since commit" in err and "web.parquet" in err
    finally:
        clean.write_bytes(original)
    # The untouched workspace executes.
    assert main(["execute", str(DEMO), "--workspace", str(committed), *set_args(demo_inputs)]) == 0


def test_no_flag_bypasses_a_gate(capsys):
    for flag in ("--force", "--skip-gates", "--no-verify", "--yes"):
        assert main(["execute", str(DEMO), flag]) == 2
    capsys.readouterr()


def test_a_second_process_on_the_workspace_exits_4_naming_the_holder(prepared, demo_inputs, capsys):
    import subprocess
    import sys
    import textwrap

    ws = prepared
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import time
        from pathlib import Path
        from campaign import store
        with store.locked(store.Workspace(Path({str(ws)!r})), "campaign run"):
            print("held", flush=True)
            time.sleep(60)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        capsys.readouterr()
        assert main(["validate", str(DEMO), "--workspace", str(ws), *set_args(demo_inputs)]) == 4
        err = capsys.readouterr().err
        assert f"workspace is in use by pid {holder.pid}" in err and "campaign run" in err
    finally:
        holder.kill()
        holder.wait()

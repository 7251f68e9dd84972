"""Task-level tests: each task's function called directly (`task.fn`), with Prefect's run logger disabled."""

import pytest
from prefect.logging import disable_run_logger

from campaign import store
from campaign.config import load_config
from campaign.errors import Refused
from campaign.gate_result import GateResult
from tasks.commit import check_gates
from tasks.execute import check_commitment
from tasks.prepare import clean_sources, ensure_demo_inputs
from tasks.validate import configuration_gates, load_evidence, volume_gates
from tests.helpers.paths import DEMO
from tests.helpers.saved import SavedFolder


@pytest.fixture(scope="module")
def _prepared(tmp_path_factory, demo_inputs):
    """The prepare tasks run once for the module, the workspace saved: a test may write into its own copy."""
    loaded = load_config(DEMO, demo_inputs)
    ws = store.adopt_workspace(store.Workspace(tmp_path_factory.mktemp("tasks") / "w"), "demo")
    with disable_run_logger():
        data = loaded.config.data.in_workspace(ws.root)
        ensure_demo_inputs.fn(data, loaded.config.seed)
        record = clean_sources.fn(data, ws)
    return loaded, SavedFolder(ws.root, "prepared"), record


@pytest.fixture
def prepared(_prepared):
    loaded, saved, record = _prepared
    return loaded, store.Workspace(saved.restore()), record


def test_clean_sources_returns_a_small_record_not_data(prepared):
    _, ws, record = prepared
    assert record.n_input == record.n_kept + record.n_rejected
    assert record.data_digest and (ws.data_dir / "manifest.json").exists()


def test_volume_gates_read_the_files(prepared):
    loaded, ws, _ = prepared
    with disable_run_logger():
        evidence = load_evidence.fn(loaded.config, ws)
        volume, mixture = volume_gates.fn(loaded.config, evidence)
    assert volume.passed and mixture.passed and "documents" in volume.summary
    assert evidence.problems == () and len(evidence.tables("clean")) == 2


def test_configuration_gates_pass_for_the_demo_and_fail_on_memory():
    with disable_run_logger():
        results, plan = configuration_gates.fn(load_config(DEMO).config)
        assert all(r.passed for r in results) and plan.fits
        results, _ = configuration_gates.fn(load_config(DEMO, ["cluster.accelerator.hbm_gib=4"]).config)
    assert {r.gate for r in results if not r.passed} == {"memory"}


def test_check_gates_and_commitment_refuse_before_validate(prepared):
    loaded, ws, _ = prepared
    with pytest.raises(Refused, match="never validated: no gate has been run"):
        check_gates.fn(ws, loaded)
    with pytest.raises(Refused, match="no commitment for this workspace"):
        check_commitment.fn(ws, loaded)


def test_a_trainer_script_replaced_after_validate_makes_commit_refuse_naming_it(
    prepared, demo_inputs, tmp_path
):
    """Every file a gate read is part of the digest its verdict is recorded against (here the trainer's script)."""
    from campaign.gates import REQUIRED_GATES, identity_gate

    _, ws, _ = prepared
    script = tmp_path / "train_small.py"
    script.write_text("# the trainer that was rehearsed\n")
    loaded = load_config(DEMO, [*demo_inputs, f"rehearsal.command=[python, {script}]"])
    with disable_run_logger():
        evidence = load_evidence.fn(loaded.config, ws)
        identity = identity_gate(evidence)
        rows = [identity] + [GateResult(g, True, "ok") for g in REQUIRED_GATES if g != identity.gate]
        store.record_gates(ws, "validate-1", loaded.digest, evidence.digest, rows)
        assert check_gates.fn(ws, loaded) == evidence.digest  # every gate passed for exactly these files
        script.write_text("# another trainer\n")
        with pytest.raises(Refused) as refused:
            check_gates.fn(ws, loaded)
    assert f"rehearsal.command[1]: {script} changed since the last validate" in refused.value.message


def test_fit_failure_profile_writes_the_profile_and_publishes_the_fit(tmp_path):
    from campaign.config import FailureCategoryConfig
    from campaign.errors import DataError
    from tasks.failures import fit_failure_profile
    from tests.helpers.incident_logs import known_log, write_log

    _, jobs, incidents = known_log(tmp_path / "log", jobs=300)
    with disable_run_logger():
        out = fit_failure_profile.fn(str(jobs), str(incidents), "demo-h100", str(tmp_path / "profile.yaml"))
        import yaml

        assert [
            FailureCategoryConfig.model_validate(c)
            for c in yaml.safe_load((tmp_path / "profile.yaml").read_text())
        ]
        assert out["profile"] == str(tmp_path / "profile.yaml") and out["fit"]["incidents"] > 0
        bad_jobs, bad_incidents = write_log(
            tmp_path / "bad", ["a,2026-03-01T00:00:00Z,2026-03-01T01:00:00Z,8"], ["x,a,y,"]
        )
        with pytest.raises(DataError, match=r"incidents.csv:2: time is not an ISO 8601 time"):
            fit_failure_profile.fn(
                str(bad_jobs), str(bad_incidents), "demo-h100", str(tmp_path / "never.yaml")
            )
    assert not (tmp_path / "never.yaml").exists()


def test_a_flow_run_cancelled_in_prefect_is_a_stop_request_for_its_real_run():
    """What a cancel from the UI does to a real run `campaign execute` supervises in its own process (no signal
    arrives there): the supervisor's stop request polls the flow run's state through the API and answers once it
    is cancelling."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelling, Running

    from campaign.execution.stopping import StopRequest
    from tasks.execute import _cancel_poll

    @flow(name="a-window-being-executed")
    def window() -> None:
        return None

    with get_client(sync_client=True) as client:
        run = client.create_flow_run(window, state=Running())
        stop = StopRequest(poll=_cancel_poll(str(run.id)), poll_every_s=0.0)
        assert stop.requested() is None  # running: the job goes on
        client.set_flow_run_state(run.id, Cancelling(), force=True)
        assert stop.requested() == f"the flow run {run.id} was cancelled"
    assert _cancel_poll(None) is None  # outside a flow run there is nothing to poll


@pytest.mark.parametrize("target", ["helper", "execute"])
def test_a_helper_module_or_the_execute_command_changed_after_validate_refuses_commit_naming_it(
    prepared, demo_inputs, tmp_path, monkeypatch, target
):
    """The trainer's script imports its real body from a helper module; or execute.command is set after validate:
    commit refuses (exit 3) naming the helper, or the command."""
    from campaign.gates import REQUIRED_GATES, identity_gate

    _, ws, _ = prepared
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wrap.py").write_text("import helper\nhelper.main()\n")
    (tmp_path / "helper.py").write_text("def main():\n    print('the trainer that was rehearsed')\n")
    loaded = load_config(DEMO, [*demo_inputs, "rehearsal.command=[python, wrap.py]"])
    with disable_run_logger():
        evidence = load_evidence.fn(loaded.config, ws)
        identity = identity_gate(evidence)
        rows = [identity] + [GateResult(g, True, "ok") for g in REQUIRED_GATES if g != identity.gate]
        store.record_gates(ws, "validate-1", loaded.digest, evidence.digest, rows)
        assert check_gates.fn(ws, loaded) == evidence.digest
        if target == "helper":
            (tmp_path / "helper.py").write_text("import sys\ndef main():\n    sys.exit(0)\n")
        else:
            loaded = load_config(
                DEMO,
                [*demo_inputs, "rehearsal.command=[python, wrap.py]", "execute.command=[python, fake.py]"],
            )
        with pytest.raises(Refused) as refused:
            check_gates.fn(ws, loaded)
    assert refused.value.exit_code == 3
    expected = (
        f"rehearsal.command[1] imports helper: {tmp_path / 'helper.py'} changed since the last validate"
        if target == "helper"
        else 'execute.command is now ["python", "fake.py"], not absent (rehearsal.command) as at the last validate'
    )
    assert expected in refused.value.message, refused.value.message


@pytest.mark.parametrize("change", ["command", "module"])
def test_execute_refuses_an_execute_command_or_its_module_changed_since_commit(
    prepared, demo_inputs, tmp_path, monkeypatch, change
):
    """The trainer a real run starts is part of the commitment: another execute.command, or a module it imports
    replaced after commit, makes execute refuse (exit 3) naming it."""
    from datetime import timedelta

    from campaign.gates import REQUIRED_GATES, identity_gate

    _, ws, _ = prepared
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.py").write_text("import core\ncore.train()\n")
    (tmp_path / "core.py").write_text("def train():\n    print('the committed trainer')\n")
    sets = [*demo_inputs, "execute.command=[python, run.py]"]
    loaded = load_config(DEMO, sets)
    with disable_run_logger():
        evidence = load_evidence.fn(loaded.config, ws)
        identity = identity_gate(evidence)
        rows = [identity] + [GateResult(g, True, "ok") for g in REQUIRED_GATES if g != identity.gate]
        store.record_gates(ws, "validate-1", loaded.digest, evidence.digest, rows)
        now = store.now()
        store.record_commitment(
            ws,
            store.Commitment(
                "c-1", now, now + timedelta(days=2), loaded.digest, evidence.digest, "test", "r", now
            ),
        )
        assert check_commitment.fn(ws, loaded).commitment_id == "c-1"
        if change == "command":
            loaded = load_config(DEMO, [*demo_inputs, "execute.command=[python, other.py]"])
        else:
            (tmp_path / "core.py").write_text("def train():\n    pass\n")
        with pytest.raises(Refused) as refused:
            check_commitment.fn(ws, loaded)
    assert refused.value.exit_code == 3
    expected = (
        'execute.command is now ["python", "other.py"], not ["python", "run.py"] as at commit'
        if change == "command"
        else f"execute.command[1] imports core: {tmp_path / 'core.py'} changed since commit"
    )
    assert expected in refused.value.message, refused.value.message

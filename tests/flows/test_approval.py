"""Commit with `commit.require_approval`: the flow pauses for a person's answer (the Prefect UI's form)."""

import threading
import time

import pytest

from flows.cli import main

from .conftest import DEMO, set_args


def _resume_when_paused(answer: dict) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateName
    from prefect.flow_runs import resume_flow_run

    deadline = time.monotonic() + 120
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            paused = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(name=FlowRunFilterStateName(any_=["Paused"]))))
            if paused:
                resume_flow_run(paused[0].id, run_input=answer)
                return
            time.sleep(0.5)
    raise AssertionError("commit never paused for approval")


@pytest.mark.parametrize(("approved", "code"), [(True, 0), (False, 3)])
def test_commit_waits_for_a_person(tmp_path, demo_inputs, approved, code, capsys):
    ws = tmp_path / "w"
    sets = set_args([*demo_inputs, "commit.require_approval=true"])
    for stage in ("prepare", "validate"):
        assert main([stage, str(DEMO), "--workspace", str(ws), *sets]) == 0
    approver = threading.Thread(target=_resume_when_paused,
                                args=({"approved": approved, "approver": "alice"},), daemon=True)
    approver.start()
    capsys.readouterr()
    assert main(["commit", str(DEMO), "--workspace", str(ws), *sets]) == code
    approver.join(timeout=5)
    out = capsys.readouterr()
    if approved:
        assert "approved by alice" in out.out
    else:
        assert "booking rejected by alice" in out.err

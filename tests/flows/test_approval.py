"""Commit with `commit.require_approval`: the flow publishes what is to be approved, then pauses for a person's answer
(the Prefect UI's form) without holding the workspace, and re-checks everything after the answer."""

import contextlib
import json
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from campaign_cli.cli import main
from tests.helpers.paths import DEMO, REPO, future_start, set_args

# A named start (the shipped demo books `auto`), so the request shows the window it would book.
START = future_start(30)
WINDOW = (
    f"{START.replace('Z', '+00:00')} .. "
    f"{(datetime.fromisoformat(START) + timedelta(days=2)).isoformat().replace('Z', '+00:00')}"
)

PROBE = """
import sys
from campaign import store
from campaign.analysis.analysis import analysis_workspace
from campaign.errors import CampaignError
for root in sys.argv[1:]:
    try:
        with store.locked(store.Workspace(__import__("pathlib").Path(root)), "probe", wait_s=0.2):
            print(root + "\\tlock free")
        analysis_workspace(root)
        print(root + "\\tanalysable")
    except CampaignError as err:
        print(root + "\\t" + str(err.exit_code) + " " + err.render().replace("\\n", " "))
"""


def _holding(ws: Path) -> list:
    """The bookings holding capacity on the calendar of the workspace's cluster (beside the workspace)."""
    from campaign import calendar as cal

    (path,) = (ws.parent / "calendars").glob("*.duckdb")
    return [b for b in cal.read_calendar(path).bookings if b.holds]


def _paused_run(client, deadline: float):
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateName

    while time.monotonic() < deadline:
        paused = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(name=FlowRunFilterStateName(any_=["Paused"]))
            )
        )
        if paused:
            return paused[0]
        time.sleep(0.3)
    raise AssertionError("commit never paused for approval")


def _run_input(client, run_id, key: str, wait_s: float = 60.0):
    """A run input of a paused run. Prefect sets the Paused state first and saves the form's inputs right after
    (prefect/flow_runs.py, `pause_flow_run`), so a page opened in between finds none yet: look again, as a
    reload of the UI would."""
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return client.read_flow_run_input(run_id, key)
        except (ObjectNotFound, PrefectHTTPStatusError) as err:
            status = getattr(getattr(err, "response", None), "status_code", 404)
            if status != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _while_paused(ws: Path, other_ws: Path, api_url: str, seen: dict, answer: dict) -> None:
    """Look at everything a team member would while the run waits, then answer."""
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run

    try:
        with get_client(sync_client=True) as client:
            run = _paused_run(client, time.monotonic() + 300)
            seen["run"] = run.id
            keyset = run.state.state_details.run_input_keyset
            seen["description"] = _run_input(client, run.id, keyset["description"])
            schema = _run_input(client, run.id, keyset["schema"])
            seen["schema"] = json.loads(schema) if isinstance(schema, str) else schema
            seen["artifacts"] = [
                a.data for a in client.read_artifacts() if (a.key or "").startswith("approval-")
            ]
            seen["marker"] = json.loads((ws / "approval-pending.json").read_text())
            seen["held"] = _holding(ws)
            seen["lock_holder"] = (ws / ".lock.json").exists()
            # Another process, as `campaign analyse` does it (its check, then the lock): the lock of this workspace is
            # free, analyse says where the run waits (exit 2: nothing executed yet) instead of "busy" (exit 4), and
            # on another workspace it works.
            started = time.monotonic()
            probe = subprocess.run(
                [sys.executable, "-c", PROBE, str(ws), str(other_ws)],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=300,
                check=True,
            )
            seen["analyse_s"] = time.monotonic() - started
            seen["probe"] = probe.stdout.splitlines()
            resume_flow_run(run.id, run_input=answer)
    except BaseException as exc:  # reported by the test body
        seen["error"] = repr(exc)
        if "run" in seen:  # answer anyway, so the commit ends now and the test reports the error
            with contextlib.suppress(Exception):
                resume_flow_run(
                    seen["run"], run_input={"decision": "reject", "approver": "test", "comment": repr(exc)}
                )


@pytest.fixture(scope="module")
def other_workspace(tmp_path_factory) -> Path:
    from tests.helpers.analysis_fixtures import executed_workspace

    return executed_workspace(tmp_path_factory.mktemp("approval_other") / "ws").root


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, demo_inputs, demo_prepared) -> tuple[Path, list[str]]:
    """One prepared and validated workspace for the module: a rejection books nothing, so the tests share it."""
    ws = demo_prepared.restore_to(tmp_path_factory.mktemp("approval") / "ws")
    # A short approval timeout: should the test's "person" fail, the commit gives up in minutes, not an hour.
    sets = set_args(
        [
            *demo_inputs,
            "commit.require_approval=true",
            "commit.approval_timeout_s=180",
            f"window.start={START}",
        ]
    )
    assert main(["validate", str(DEMO), "--workspace", str(ws), *sets]) == 0
    return ws, sets


def _commit_answered(
    ws: Path, sets: list[str], other_ws: Path, answer: dict, capsys
) -> tuple[int, dict, object]:
    from prefect.settings import PREFECT_API_URL

    seen: dict = {}
    person = threading.Thread(
        target=_while_paused, args=(ws, other_ws, PREFECT_API_URL.value(), seen, answer), daemon=True
    )
    person.start()
    capsys.readouterr()
    code = main(["commit", str(DEMO), "--workspace", str(ws), *sets])
    person.join(timeout=5)
    assert "error" not in seen, seen.get("error")
    return code, seen, capsys.readouterr()


def _shows_the_request(seen: dict) -> None:
    """The form's description and the artifact carry the window, GPUs, days, cost, every gate, the digests."""
    for text in (seen["description"], *seen["artifacts"]):
        assert WINDOW in text
        assert "GPUs" in text and "Reserved cost" in text and "p90" in text
        assert "Config digest" in text and "Gate evidence digest" in text
    for gate in ("data_quality", "layout", "memory", "schedule", "rehearsal"):
        assert f"- **{gate}**: passed \u2014 " in seen["description"]  # a list in the narrow form: it wraps
        assert all(
            f"| {gate} | passed |" in text for text in seen["artifacts"]
        )  # a table on the artifact page
    assert "Book demo" in json.dumps(seen["schema"])  # the decision's own help names the window too
    # A required choice without a default: a form sent with only a name answers nothing.
    assert set(seen["schema"]["properties"]) == {"decision", "approver", "comment"}
    assert seen["schema"]["properties"]["decision"]["enum"] == ["approve", "reject"]
    assert "default" not in seen["schema"]["properties"]["decision"]
    assert {"decision", "approver"} <= set(seen["schema"]["required"])


def test_a_rejection_fails_the_run_with_who_and_why_and_the_wait_holds_nothing(
    prepared, other_workspace, capsys
):
    ws, sets = prepared
    answer = {"decision": "reject", "approver": "alice", "comment": "wait for Q3"}
    code, seen, out = _commit_answered(ws, sets, other_workspace, answer, capsys)
    assert code == 3
    assert "booking rejected by alice: wait for Q3" in out.err
    assert not list((ws / "commitments").glob("c-*.json"))
    _shows_the_request(seen)
    # While it waited: no lock held, a marker naming the run, and analyse answered at once on both workspaces.
    assert seen["lock_holder"] is False
    assert seen["marker"]["written_by"] == "campaign commit" and seen["marker"]["flow_run_id"]
    lock_free, same, other_lock, other = seen["probe"]
    assert lock_free == f"{ws}\tlock free" and other_lock == f"{other_workspace}\tlock free"
    assert same.startswith(f"{ws}\t2 ") and "waits for approval" in same, same
    assert seen["marker"]["flow_run_id"] in same
    assert other == f"{other_workspace}\tanalysable", other
    assert not (ws / "approval-pending.json").exists()  # cleared once answered
    # While it waited, the dates it showed were held on the calendar; the no released them.
    (held,) = seen["held"]
    assert held.status == "held" and held.start.isoformat() in WINDOW and held.end.isoformat() in WINDOW
    assert any(f"`{held.booking_id}`" in text for text in seen["artifacts"])
    assert _holding(ws) == []
    print(f"analyse subprocesses took {seen['analyse_s']:.1f} s")


def test_approved_but_the_data_changed_meanwhile_is_refused(prepared):
    """The lock is let go while waiting, so what was approved is checked again before booking."""
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run

    ws, sets = prepared
    clean = min((ws / "data" / "clean").glob("*.parquet"))
    original = clean.read_bytes()

    def change_then_approve():
        with get_client(sync_client=True) as client:
            run = _paused_run(client, time.monotonic() + 300)
            clean.write_bytes(original + b"\0")
            resume_flow_run(run.id, run_input={"decision": "approve", "approver": "bob"})

    person = threading.Thread(target=change_then_approve, daemon=True)
    person.start()
    try:
        assert main(["commit", str(DEMO), "--workspace", str(ws), *sets]) == 3
    finally:
        person.join(timeout=5)
        clean.write_bytes(original)
    assert not list((ws / "commitments").glob("c-*.json"))
    assert _holding(ws) == []  # the refused re-check released the hold


def test_an_approval_books_with_the_approver_and_comment(prepared, capsys):
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run

    ws, sets = prepared

    seen: dict = {}

    def approve():
        with get_client(sync_client=True) as client:
            run = _paused_run(client, time.monotonic() + 300)
            seen["held"] = _holding(ws)
            resume_flow_run(
                run.id, run_input={"decision": "approve", "approver": "alice", "comment": "looks right"}
            )

    person = threading.Thread(target=approve, daemon=True)
    person.start()
    capsys.readouterr()
    assert main(["commit", str(DEMO), "--workspace", str(ws), *sets]) == 0
    person.join(timeout=5)
    assert "approved by alice" in capsys.readouterr().out
    (booked,) = [
        json.loads(p.read_text())
        for p in (ws / "commitments").glob("c-*.json")
        if not p.name.endswith("-power.json")
    ]
    assert booked["approved_by"] == "alice" and booked["approval_comment"] == "looks right"
    # The yes booked exactly the hold the approver saw: same booking, dates and nodes.
    (held,) = seen["held"]
    (booking,) = _holding(ws)
    assert booking.status == "booked" and booking.commitment_id == booked["commitment_id"]
    assert (booking.booking_id, booking.start, booking.end, booking.nodes) == (
        held.booking_id,
        held.start,
        held.end,
        held.nodes,
    )
    from campaign import store

    (row,) = store.commitments(store.Workspace(ws))
    assert (row.approved_by, row.approval_comment) == (
        "alice",
        "looks right",
    )  # the catalog, not only the file


def test_a_lifecycle_run_says_it_awaits_approval_while_its_commit_waits():
    """The parent run's state is named for the wait while its commit subflow is paused, and Running again after."""
    from prefect import flow
    from prefect.client.orchestration import get_client

    from flows.commit import WAITING_STATE, show_waiting_on_parent

    @flow
    def commit_like() -> tuple:
        parent = show_waiting_on_parent("commit run x waits for approval: Book demo")
        with get_client(sync_client=True) as client:
            waiting = client.read_flow_run(parent).state
            show_waiting_on_parent(None, parent)
            after = client.read_flow_run(parent).state
        return waiting.type.value, waiting.name, waiting.message, after.name

    @flow
    def lifecycle_like() -> tuple:
        return commit_like()

    assert lifecycle_like() == (
        "RUNNING",
        WAITING_STATE,
        "commit run x waits for approval: Book demo",
        "Running",
    )
    assert show_waiting_on_parent("no parent") is None  # commit on its own: nothing to show

"""What an approver is shown, the marker that says a run waits, and the workspace lock let go while it waits."""

import subprocess
import sys
from datetime import timedelta
from types import SimpleNamespace

import pytest

from campaign import store
from campaign.approval import PENDING_FILE, approval_request, clear_pending, read_pending, write_pending
from campaign.config import load_config
from campaign.errors import WorkspaceBusy
from campaign.gates import REQUIRED_GATES
from tests.helpers.paths import DEMO, future_start

HOLD = """
import sys, time
from pathlib import Path
from campaign import store
with store.locked(store.Workspace(Path(sys.argv[1])), "other process", wait_s=float(sys.argv[2])):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def _gates(failed: str | None = None) -> dict:
    out = {g: SimpleNamespace(passed=g != failed, details={"summary": f"{g} figure"}) for g in REQUIRED_GATES}
    out["schedule"].details["window_length"] = {"p90_completion_days": 1.83}
    return out


def test_the_request_names_window_gpus_days_p90_cost_gates_and_digests():
    config = load_config(DEMO, [f"window.start={future_start(30)}"]).config
    request = approval_request(config, "c" * 64, "d" * 64, _gates(failed="memory"), 1.76)
    text = request.markdown()
    start = config.window.start
    assert f"{start.isoformat()} .. {(start + timedelta(days=2)).isoformat()} (2 days)" in text
    booked = config.cluster.booked_nodes * config.cluster.gpus_per_node
    assert f"{config.cluster.gpus:,} for the job, {booked:,} booked with spares" in text
    assert "1.76 days (plan); p90 1.83 days (replicas)" in text
    assert f"${booked * 48 * config.cluster.cost.gpu_hour_usd:,.2f}" in text
    assert "| memory | **FAILED** | memory figure |" in text and "| layout | passed | layout figure |" in text
    assert f"({len(REQUIRED_GATES) - 1}/{len(REQUIRED_GATES)} passed)" in text
    assert "`" + "c" * 64 + "`" in text and "`" + "d" * 64 + "`" in text
    assert "<" not in text.replace("&lt;", "")  # Markdown for the UI: no raw HTML


def test_an_auto_start_is_shown_as_found_when_booking():
    text = approval_request(load_config(DEMO).config, "c" * 64, "d" * 64, _gates(), 1.76).markdown()
    assert (
        "| Window | auto (the earliest start that fits on the cluster's calendar, found when booking) (2 days) |"
        in text
    )


def test_with_a_calendar_hold_the_request_shows_exactly_its_dates_gpus_and_cost():
    from datetime import UTC, datetime

    from campaign.calendar import HELD, Booking

    config = load_config(DEMO).config  # window.start: auto, resolved by the hold
    start = datetime(2027, 1, 4, 6, 30, tzinfo=UTC)
    hold = Booking("b-1", "c-1", "campaign", "demo", 19, start, start + timedelta(days=2), status=HELD)
    request = approval_request(config, "c" * 64, "d" * 64, _gates(), 1.76, hold=hold)
    text = request.markdown()
    assert "auto" not in text
    assert "| Window | 2027-01-04T06:30:00+00:00 .. 2027-01-06T06:30:00+00:00 (2 days) |" in text
    gpus = 19 * config.cluster.gpus_per_node
    assert f"{gpus:,} booked with spares" in text
    assert (
        f"| Reserved cost | ${gpus * 48 * config.cluster.cost.gpu_hour_usd:,.2f} ({gpus:,} GPUs x 48.0 h"
        in text
    )
    assert "| Calendar hold | `b-1` (c-1) on cluster" in text and "a yes books exactly them" in text
    assert "2027-01-04T06:30:00+00:00 .. 2027-01-06T06:30:00+00:00" in request.headline()


def test_a_missing_gate_is_shown_as_not_run():
    gates = _gates()
    del gates["rehearsal"]
    text = approval_request(load_config(DEMO).config, "c" * 64, "d" * 64, gates, None).markdown()
    assert "| rehearsal | **FAILED** | not run for these digests |" in text and "unknown (plan)" in text
    gates["schedule"].details["window_length"] = {"p90_completion_days": None}  # judged: beyond the window
    text = approval_request(load_config(DEMO).config, "c" * 64, "d" * 64, gates, 1.5).markdown()
    assert "p90 beyond the window (replicas)" in text


def test_the_marker_is_removed_only_by_the_run_that_wrote_it(tmp_path):
    write_pending(tmp_path, "run-1", "http://ui/runs/flow-run/run-1", "Book demo")
    pending = read_pending(tmp_path)
    assert pending.describe().startswith(
        "commit run run-1 waits for approval at http://ui/runs/flow-run/run-1"
    )
    clear_pending(tmp_path, "run-2")
    assert (tmp_path / PENDING_FILE).exists()
    clear_pending(tmp_path, "run-1")
    assert not (tmp_path / PENDING_FILE).exists()
    (tmp_path / PENDING_FILE).write_text('{"flow_run_id": "x"}')  # not campaign's: neither read nor removed
    assert read_pending(tmp_path) is None
    clear_pending(tmp_path, "x")
    assert (tmp_path / PENDING_FILE).exists()


def _other(ws: store.Workspace, wait_s: float, hold_s: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ws.root), str(wait_s), str(hold_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_released_lets_another_process_in_and_takes_the_lock_back_at_the_same_depth(tmp_path):
    ws = store.adopt_workspace(store.Workspace(tmp_path / "ws"), "demo")
    with store.locked(ws, "campaign run"), store.locked(ws, "campaign commit"):
        with store.released(ws, "campaign commit (approved)"):
            other = _other(ws, 5, 0)
            out, err = other.communicate(timeout=60)
            assert other.returncode == 0 and out.strip() == "held", err
            assert not (ws.root / ".lock.json").exists()
        assert "campaign commit (approved)" in (ws.root / ".lock.json").read_text()
        blocked = _other(ws, 0.2, 0)
        assert blocked.wait(timeout=60) != 0  # held again
    assert not (ws.root / ".lock.json").exists()


def test_released_reports_the_holder_when_it_cannot_take_the_lock_back(tmp_path, monkeypatch):
    monkeypatch.setenv("CAMPAIGN_LOCK_WAIT_S", "0.2")
    ws = store.adopt_workspace(store.Workspace(tmp_path / "ws"), "demo")
    with (
        pytest.raises(WorkspaceBusy, match="other process"),
        store.locked(ws, "campaign run"),
        store.released(ws, "campaign commit (approved)"),
    ):
        other = _other(ws, 5, 5)
        assert other.stdout.readline().strip() == "held"
    other.kill()
    other.wait()

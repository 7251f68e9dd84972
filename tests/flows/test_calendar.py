"""The cluster calendar through the CLI: two campaigns on one cluster, a race between two processes, cancel,
the early-finish gap, and bad input (each with its exit code, the value named and the calendar unchanged)."""

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path

import duckdb
import pytest

from campaign_cli.cli import main
from tests.helpers.paths import DEMO, REPO, future_start, set_args
from tests.helpers.saved import SavedFolder

# A fixed start a month ahead (the demo itself books `auto`), and the day its 2-day window ends.
START = future_start(30)
AFTER = future_start(32)
SHARED = ["cluster.total_nodes=32", f"window.start={START}"]
# Half the job: 8 nodes (64 GPUs, dp 32) and a target it reaches inside the 2-day window. This test is about
# capacity, so the window-length rule (tested with the shipped configs in tests/unit/test_calendar.py) is off here.
SHRUNK = ["cluster.nodes=8", "plan.layout.dp=32", "plan.target_tokens=3e11", "gates.config.window_replicas=0"]


def _ready(ws: Path, sets: list[str], prepared: SavedFolder) -> None:
    """The run's prepared demo copied to `ws`, then validated: these tests book windows, prepare is not their subject
    (no setting here is a data setting, and prepare reads only those)."""
    prepared.restore_to(ws)
    assert main(["validate", str(DEMO), "--workspace", str(ws), *set_args(sets)]) == 0


def _revalidate(ws: Path, sets: list[str]) -> None:
    """Validate a prepared workspace for settings that change no data setting (cluster, plan, window): its
    prepared data stands, so only the gates run again."""
    assert main(["validate", str(DEMO), "--workspace", str(ws), *set_args(sets)]) == 0


def _commit(ws: Path, sets: list[str]) -> int:
    return main(["commit", str(DEMO), "--workspace", str(ws), *set_args(sets)])


def _show(root: Path, capsys, *extra: str) -> dict:
    capsys.readouterr()
    assert main(["calendar", "show", "--workspaces", str(root), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _bookings(calendar: Path) -> list[tuple]:
    with duckdb.connect(str(calendar), read_only=True) as con:
        return con.execute("SELECT commitment_id, nodes, status FROM bookings ORDER BY created_at").fetchall()


@pytest.fixture(scope="module")
def _team(tmp_path_factory, demo_inputs, demo_prepared) -> tuple[SavedFolder, SavedFolder]:
    """A team folder with workspace `a` prepared and validated for SHARED, saved; then `b` beside it, saved."""
    root = tmp_path_factory.mktemp("calendar") / "team"
    sets = [*demo_inputs, *SHARED]
    _ready(root / "a", sets, demo_prepared)
    one = SavedFolder(root, "a")
    # `b` validated for the same settings is `a`'s catalog and files: a copy (the calendar tells workspaces apart by
    # their path; the only other paths in a validated workspace are hints for people, rehearsal/env.json and GX's
    # checks/clean_data.json, which nothing reads).
    shutil.copytree(root / "a", root / "b", symlinks=True)
    return one, SavedFolder(root, "ab")


@pytest.fixture()
def team_a(_team) -> Path:
    """The team folder (the same path for every test) with `a` ready to commit, no calendar yet."""
    return _team[0].restore()


@pytest.fixture()
def team_ab(_team) -> Path:
    """The same with `a` and `b` ready to commit."""
    return _team[1].restore()


def test_two_campaigns_on_one_cluster(team_ab, demo_inputs, capsys):
    root = team_ab
    a, b = root / "a", root / "b"  # both prepared and validated for `sets`
    sets = [*demo_inputs, *SHARED]
    assert _commit(a, sets) == 0
    first = _bookings(root / "calendars" / "demo-h100-16.duckdb")[0][0]
    capsys.readouterr()
    # Same window, 19 + 19 nodes on a 32-node cluster: refused, naming the first and the earliest free start.
    assert _commit(b, sets) == 3
    err = capsys.readouterr().err
    assert f"held by commitment {first} of campaign demo" in err
    assert f"Earliest free start at or after {START}: {AFTER}" in err
    assert "Traceback" not in err
    # Shrunk to fit (8 + 3 nodes beside 19): both commit and both show.
    _revalidate(b, [*sets, *SHRUNK])
    assert _commit(b, [*sets, *SHRUNK]) == 0
    report = _show(root, capsys)
    assert sorted((x["campaign"], x["nodes"], x["status"]) for x in report["bookings"]) == [
        ("demo", 11, "booked"),
        ("demo", 19, "booked"),
    ]
    totals = report["totals"]
    assert totals["cluster_nodes"] == 32 and report["horizon"]["hours"] == 48.0
    assert totals["busy_node_hours"] + totals["idle_node_hours"] == 32 * report["horizon"]["hours"]
    assert totals["busy_node_hours"] == (19 + 11) * 48
    prices = report["prices"]
    for gap in report["gaps"]:
        gpu = gap["idle_node_hours"] * prices["gpus_per_node"] * prices["gpu_hour_usd"]
        energy = gap["idle_node_hours"] * prices["idle_node_w"] / 1e6 * prices["energy_usd_per_mwh"]
        assert abs(gap["cost_usd"] - (gpu + energy)) <= 0.005
    assert Path(report["gantt_png"]).read_bytes()[:4] == b"\x89PNG"

    # propose: what a new campaign of this size would face (both bookings hold the configured window).
    capsys.readouterr()
    assert main(["calendar", "propose", str(DEMO), "--workspace", str(a), "--json", *set_args(sets)]) == 0
    proposal = json.loads(capsys.readouterr().out)
    assert sorted(proposal["requested"]["held_by"]) == sorted(x["commitment_id"] for x in report["bookings"])
    assert proposal["requested"]["fits"] is False and proposal["nodes"] == 19
    # The cluster is free until START: the earliest start is the first midnight from now (the demo's window.align).
    earliest = proposal["earliest"]["start"]
    assert proposal["not_before"] <= earliest < START and earliest.endswith("T00:00:00Z")
    assert proposal["least_idle"]["gap_idle_node_hours"] <= proposal["earliest"]["gap_idle_node_hours"]
    # The text: the cluster's line once, then the configured start's verdict.
    assert main(["calendar", "propose", str(DEMO), "--workspace", str(a), *set_args(sets)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cluster ") and sum(line.startswith("cluster ") for line in lines) == 1, lines
    assert lines[1].startswith("  window.start in the config"), lines

    # execute: the job finishes early, its booking records the actual end, the rest shows as an early-finish gap.
    assert main(["execute", str(DEMO), "--workspace", str(a), *set_args(sets)]) == 0
    report = _show(root, capsys)
    executed = next(x for x in report["bookings"] if x["commitment_id"] == first)
    assert executed["status"] == "executed" and executed["actual_end"] < executed["end"]
    early = [g for g in report["gaps"] if g["kind"] == "early_finish"]
    assert early and early[0]["start"] == executed["actual_end"] and early[0]["released_by"] == first

    # cancel: recorded, never deleted; execute then refuses the cancelled commitment.
    shrunk = next(x for x in report["bookings"] if x["nodes"] == 11)["commitment_id"]
    assert main(["calendar", "cancel", shrunk, "--reason", "data redo", "--workspaces", str(root)]) == 0
    capsys.readouterr()
    assert main(["execute", str(DEMO), "--workspace", str(b), *set_args([*sets, *SHRUNK])]) == 3
    assert f"commitment {shrunk} was cancelled" in capsys.readouterr().err
    statuses = {c: s for c, _, s in _bookings(root / "calendars" / "demo-h100-16.duckdb")}
    assert statuses == {first: "executed", shrunk: "cancelled"}


@pytest.mark.timeout(900)  # two validates and the refusals
def test_bad_calendar_input_names_the_value_and_changes_nothing(team_a, demo_inputs, capsys):
    root = team_a
    ws = root / "a"  # prepared and validated for `sets`
    sets = [*demo_inputs, *SHARED]
    assert _commit(ws, sets) == 0
    calendar = root / "calendars" / "demo-h100-16.duckdb"
    before = _bookings(calendar)

    def refused(code: int, args: list[str], *named: str) -> None:
        capsys.readouterr()
        assert main(args) == code, args
        err = capsys.readouterr().err
        assert all(n in err for n in named), err
        assert "fix:" in err and "Traceback" not in err
        assert _bookings(calendar) == before

    refused(
        2,
        ["calendar", "show", "--workspaces", str(root), "--from", "2027-02-01", "--to", "2027-01-01"],
        "2027-01-01",
        "2027-02-01",
        "--to",
    )
    refused(
        2,
        ["calendar", "cancel", "c-000000000000", "--reason", "x", "--workspaces", str(root)],
        "unknown commitment 'c-000000000000'",
    )
    refused(2, ["calendar", "show", "--cluster", "nowhere", "--workspaces", str(root)], "nowhere.duckdb")
    # Another cluster's calendar: the same name, a different size.
    other = [*demo_inputs, "cluster.total_nodes=64", f"window.start={future_start(60)}"]
    _revalidate(ws, other)
    refused(
        2,
        ["commit", str(DEMO), "--workspace", str(ws), *set_args(other)],
        "calendar of cluster 'demo-h100-16' (32 nodes",
        "total_nodes: calendar 32, config 64",
    )
    # A start in the past.
    past = [*sets, "window.start=2021-01-04T00:00:00Z"]
    _revalidate(ws, past)
    refused(
        2,
        ["commit", str(DEMO), "--workspace", str(ws), *set_args(past)],
        "window.start",
        "2021-01-04T00:00:00+00:00, which is in the past",
    )
    # A booking larger than the cluster: a maintenance window of 40 nodes on 32.
    refused(
        2,
        [
            "calendar",
            "maintenance",
            str(DEMO),
            "--workspace",
            str(ws),
            "--start",
            future_start(90)[:10],
            "--hours",
            "4",
            "--nodes",
            "40",
            "--reason",
            "rack swap",
            *set_args(sets),
        ],
        "40 nodes is larger than the cluster 'demo-h100-16' (32 nodes)",
    )
    # A maintenance window in the past: the option the user typed is named, not a config key.
    refused(
        2,
        [
            "calendar",
            "maintenance",
            str(DEMO),
            "--workspace",
            str(ws),
            "--start",
            "2020-01-01",
            "--hours",
            "4",
            "--reason",
            "rack swap",
            *set_args(sets),
        ],
        "--start: the window starts at 2020-01-01T00:00:00+00:00, which is in the past",
        "pass a future --start",
    )
    # A campaign larger than the cluster is caught when its config loads.
    refused(
        2,
        ["commit", str(DEMO), "--workspace", str(ws), *set_args([*demo_inputs, "cluster.total_nodes=12"])],
        "cluster.total_nodes",
        "less than nodes + spare_nodes",
    )


def test_maintenance_is_a_booking_and_auto_books_around_it(tmp_path, demo_inputs, demo_prepared, capsys):
    root = tmp_path / "team"
    ws = root / "a"
    sets = [*demo_inputs, "cluster.total_nodes=32"]  # the shipped demo: window.start auto, align day
    # The whole cluster down for 6 hours from tomorrow's midnight: the first midnight a 2-day window fits is the
    # one after (the same answer if the clock crosses midnight during the test).
    assert (
        main(
            [
                "calendar",
                "maintenance",
                str(DEMO),
                "--workspace",
                str(ws),
                "--start",
                future_start(1),
                "--hours",
                "6",
                "--reason",
                "firmware",
                *set_args(sets),
            ]
        )
        == 0
    )
    _ready(ws, sets, demo_prepared)
    assert _commit(ws, sets) == 0
    report = _show(root, capsys)
    kinds = sorted(x["kind"] for x in report["bookings"])
    assert kinds == ["campaign", "maintenance"]
    mine = next(x for x in report["bookings"] if x["kind"] == "campaign")
    assert mine["start"] == future_start(2)
    # The commitment records the start the booking got; a second commit reuses it (nothing booked twice).
    with duckdb.connect(str(ws / "campaign.duckdb"), read_only=True) as con:
        (recorded,) = con.execute("SELECT window_start FROM commitments").fetchone()
    assert recorded.astimezone(UTC).isoformat().replace("+00:00", "Z") == mine["start"]
    assert _commit(ws, sets) == 0
    assert len(_bookings(root / "calendars" / "demo-h100-16.duckdb")) == 2


def _env() -> dict:
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_LEVEL": "WARNING"}


def test_two_commits_launched_at_once_from_two_processes_book_once(team_ab, demo_inputs):
    root = team_ab
    sets = [*demo_inputs, *SHARED]
    workspaces = [root / "a", root / "b"]  # both prepared and validated for `sets`
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "campaign_cli.cli",
                "commit",
                str(DEMO),
                "--workspace",
                str(ws),
                *set_args(sets),
            ],
            env=_env(),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for ws in workspaces
    ]
    deadline = time.monotonic() + 600
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=max(1, deadline - time.monotonic()))
        results.append((proc.returncode, out, err))
    assert sorted(r[0] for r in results) == [0, 3], results
    booked = _bookings(root / "calendars" / "demo-h100-16.duckdb")
    assert len(booked) == 1
    loser = next(r for r in results if r[0] == 3)
    assert f"held by commitment {booked[0][0]}" in loser[2] and "Earliest free start" in loser[2]


@pytest.mark.parametrize("command", ["show", "propose", "cancel", "maintenance"])
def test_every_calendar_command_has_help(command, capsys):
    assert main(["calendar", command, "--help"]) == 0
    assert "Usage" in capsys.readouterr().out


def test_an_unchanged_calendar_is_printed_without_redrawing_and_a_change_redraws_it(
    team_a, demo_inputs, capsys
):
    root = team_a
    assert _commit(root / "a", [*demo_inputs, *SHARED]) == 0
    first = _show(root, capsys)
    png = Path(first["gantt_png"])
    drawn = png.stat().st_ino
    assert main(["calendar", "show", "--workspaces", str(root), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == first and "not redrawn" in out.err
    assert png.stat().st_ino == drawn  # the chart was not drawn again
    # a booking changes: the report and its chart are drawn again
    booking = first["bookings"][0]["commitment_id"]
    assert main(["calendar", "cancel", booking, "--reason", "moved", "--workspaces", str(root)]) == 0
    again = _show(root, capsys)
    assert again["bookings"] != first["bookings"] and png.stat().st_ino != drawn

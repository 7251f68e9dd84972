"""The UI stack of `make ui` for real (deployments/ui.py: a Prefect server on a free loopback port, the `campaign`
work pool, `prefect deploy --all`, a process worker), the demo lifecycle run through it with its approval answered
through the API, and the UI itself looked at in headless Chromium (Debian's `chromium`). Screenshots are kept in
build/e2e/ (the test prints where)."""

import html
import json
import re
import shutil
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from deployments import ui
from tests.helpers.paths import FAST_REHEARSAL, REPO, future_start

# A named window start (the shipped demo books `auto`), always in the future; the demo window is two days.
START = future_start(30)
WINDOW = (
    f"{START.replace('Z', '+00:00')} .. "
    f"{(datetime.fromisoformat(START) + timedelta(days=2)).isoformat().replace('Z', '+00:00')}"
)

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = REPO / "build" / "e2e"
# No GPU rasterization (Debian's wrapper turns it on): emulated in software it costs CPU for nothing here
# (tests/e2e/test_approval_form.py says how much).
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-gpu-rasterization",
    "--disable-software-rasterizer",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """`make ui` in a private folder and port; `make stop` afterwards, checked to stop exactly what it started."""
    import os

    home = tmp_path_factory.mktemp("prefect_ui")
    env = ui.start(home, ui.free_port(), worker_limit=3)
    saved = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_HOME")}
    os.environ.update({k: env[k] for k in saved})  # this process's client too
    started = [json.loads((home / f"{n}.pid").read_text())["pid"] for n in ("server", "worker")]
    from prefect.settings import PREFECT_API_URL, temporary_settings

    try:
        # In-process settings too: in a whole-suite run, the flow tests' session harness has set its own API URL
        # in the settings context, which outranks the environment.
        with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}):
            yield env
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        stopped = ui.stop(home)
        assert len(stopped) == 2, stopped
        assert not any(ui._running(pid) for pid in started)


def _client():
    from prefect.client.orchestration import get_client

    return get_client(sync_client=True)


def _flow_runs(client, flow: str | None = None, name_like: str | None = None, state: str | None = None):
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterName,
        FlowRunFilterState,
        FlowRunFilterStateName,
    )

    run_filter = FlowRunFilter(
        name=FlowRunFilterName(like_=name_like) if name_like else None,
        state=FlowRunFilterState(name=FlowRunFilterStateName(any_=[state])) if state else None,
    )
    return client.read_flow_runs(
        flow_run_filter=run_filter, flow_filter=FlowFilter(name=FlowFilterName(any_=[flow])) if flow else None
    )


def _wait_final(client, run_id, timeout_s: float = 480):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = client.read_flow_run(run_id)
        if run.state and run.state.is_final():
            return run
        time.sleep(1)
    raise AssertionError(f"flow run {run_id} did not finish in {timeout_s} s")


def _deployment(client, name: str):
    return next(d for d in client.read_deployments() if d.name == name)


@pytest.fixture(scope="module")
def params(tmp_path_factory):
    demo = tmp_path_factory.mktemp("demo_inputs")
    ws = tmp_path_factory.mktemp("e2e_ws") / "w"
    return {
        "config": "configs/campaigns/demo.yaml",
        "workspace": str(ws),
        "settings": [{"key": "commit.require_approval", "value": True}],
        "overrides": [
            f"data.demo_corpus_dir={demo}",
            f"data.sources.0.path={demo}/web/*.jsonl",
            f"data.sources.1.path={demo}/docs/*.parquet",
            f"window.start={START}",
            *FAST_REHEARSAL,
        ],
    }


RESULTS: dict = {}


@pytest.mark.timeout(900)  # starts the server, the pool and a worker (module fixture)
def test_every_deployment_is_deployed_and_bad_input_is_refused_before_the_run(stack):
    from prefect.exceptions import PrefectHTTPStatusError

    specs = [s["name"] for s in __import__("deployments.serve", fromlist=["x"]).deployment_specs()]
    with _client() as client:
        deployed = {d.name: d for d in client.read_deployments()}
        assert set(specs) <= set(deployed)
        assert {a.name for a in client.read_automations()} >= {
            "demo-validate-after-prepare",
            "demo-analyse-after-execute",
        }
        lifecycle = deployed["demo-lifecycle"]
        RESULTS["lifecycle_deployment"] = lifecycle.id
        assert lifecycle.tags == ["campaign", "demo", "lifecycle"] and lifecycle.description
        assert any(s.active for d in deployed.values() for s in d.schedules)
        assert deployed["demo-execute-window"].global_concurrency_limit.limit == 1

        def started_by_hand() -> int:
            # The server's scheduler may add the active schedules' runs at any moment (auto_scheduled): not ours.
            return sum(1 for run in client.read_flow_runs() if not run.auto_scheduled)

        before = started_by_hand()
        for bad, field in (
            ({"config": "configs/campaigns/nope.yaml"}, "params.config"),
            ({"overrides": ["cluster.nodez=4"]}, "params.overrides[0]"),
            ({"settings": [{"key": "cluster.nodes", "value": -3}]}, "params.settings[0]"),
        ):
            with pytest.raises(PrefectHTTPStatusError) as err:
                client.create_flow_run_from_deployment(lifecycle.id, parameters={"params": bad})
            assert f"Validation failed for field '{field}'" in err.value.response.text
        assert started_by_hand() == before  # nothing started


@pytest.mark.timeout(900)  # a whole lifecycle through deployments
def test_the_demo_lifecycle_waits_for_approval_then_executes_its_window_once(stack, params):

    from campaign import store

    ws = Path(params["workspace"])
    with _client() as client:
        parent = client.create_flow_run_from_deployment(
            _deployment(client, "demo-lifecycle").id, parameters={"params": params}
        )
        deadline = time.monotonic() + 300
        paused = []
        while not paused and time.monotonic() < deadline:
            paused = _flow_runs(client, flow="commit", state="Paused")
            assert not client.read_flow_run(parent.id).state.is_final()
            time.sleep(1)
        assert paused, "the commit never paused for approval"
        # While it waits: the marker names the run, and another process can take the workspace at once.
        marker = json.loads((ws / "approval-pending.json").read_text())
        assert marker["flow_run_id"] == str(paused[0].id) and marker["url"].startswith(
            stack["PREFECT_UI_URL"]
        )
        with store.locked(store.Workspace(ws), "e2e probe", wait_s=1):
            pass
        artifact = next(a for a in client.read_artifacts() if a.key == "approval-demo")
        assert WINDOW in artifact.data
        # The lifecycle run says what it waits for, not a bare "Running".
        waiting = client.read_flow_run(parent.id).state
        assert waiting.name == "Awaiting approval" and "waits for approval" in (waiting.message or ""), (
            waiting
        )
        RESULTS.update(paused_run=paused[0].id, artifact_id=artifact.id, parent=parent.id)
        _resume(
            paused[0].id, run_input={"decision": "approve", "approver": "e2e", "comment": "window checked"}
        )
        final = _wait_final(client, parent.id)
        assert final.state.is_completed(), final.state.message
        assert (ws / "report" / "report.md").exists()
        booked = [
            json.loads(p.read_text())
            for p in (ws / "commitments").glob("c-*.json")
            if not p.name.endswith("-power.json")
        ]
        assert [b["approved_by"] for b in booked] == ["e2e"]
        # Exactly one execution of the window: the lifecycle's own; none scheduled, no second analyse.
        assert len(_flow_runs(client, flow="execute")) == 1
        assert _flow_runs(client, name_like="window-c-") == []
        time.sleep(3)  # an automation would fire within a second or two of the completion event
        assert len(_flow_runs(client, flow="analyse")) == 1
    import duckdb

    with duckdb.connect(str(ws / "campaign.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM executions").fetchone()[0] == 1


def _resume(run_id, run_input: dict) -> None:
    """Answer a paused run. Prefect sets the Paused state before it saves the form's schema (prefect/flow_runs.py,
    `pause_flow_run`), and the server refuses an answer without one ("Run input schema not found"): a person
    who answers that fast is asked again, so this answers again."""
    from prefect.flow_runs import resume_flow_run

    deadline = time.monotonic() + 60
    while True:
        try:
            return resume_flow_run(run_id, run_input=run_input)
        except RuntimeError as err:
            if "schema not found" not in str(err) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def _approve_when_paused(client, parent_id, approver: str, comment: str):
    """Poll until a commit run waits for approval (the parent must not end first), then answer yes."""

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        paused = _flow_runs(client, flow="commit", state="Paused")
        if paused:
            _resume(paused[0].id, run_input={"decision": "approve", "approver": approver, "comment": comment})
            return paused[0]
        run = client.read_flow_run(parent_id)
        assert not run.state.is_final(), run.state
        time.sleep(1)
    raise AssertionError("the commit never paused for approval")


def test_a_commit_deployment_schedules_its_execute_window_once(stack, params):
    """Run as its own deployment (same config, so the same gates), commit books the same window again and
    schedules `demo-execute-window` at its start, once."""
    with _client() as client:
        run = client.create_flow_run_from_deployment(
            _deployment(client, "demo-commit").id, parameters={"params": params}
        )
        _approve_when_paused(client, run.id, "e2e", "second look")
        assert _wait_final(client, run.id, 300).state.is_completed()
        scheduled = _flow_runs(client, name_like="window-c-")
        assert [(r.state.type.value, r.expected_start_time.isoformat()) for r in scheduled] == [
            ("SCHEDULED", START.replace("Z", "+00:00"))
        ]
        assert client.read_deployment(scheduled[0].deployment_id).name == "demo-execute-window"


def test_a_failed_gate_fails_the_validate_run(stack, params):
    failing = {
        **params,
        "settings": [],
        "overrides": [*params["overrides"], "gates.data.min_documents=1000000000"],
    }
    with _client() as client:
        run = client.create_flow_run_from_deployment(
            _deployment(client, "demo-validate").id, parameters={"params": failing}
        )
        final = _wait_final(client, run.id, 300)
        assert final.state.is_failed() and "data_volume" in (final.state.message or "")
        RESULTS["failed_validate"] = run.id


def _dom(url: str, profile: Path) -> str:
    out = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=15000", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _shot(url: str, profile: Path, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"{name}.png"
    out = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=15000",
            "--window-size=1400,1000",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0 and shot.is_file(), out.stderr[-2000:]
    return shot


def _text(dom: str) -> str:
    """The page's visible text: no scripts or styles, no tags, entities decoded, whitespace collapsed."""
    dom = re.sub(r"<(script|style)[^>]*>.*?</\1>", "", dom, flags=re.DOTALL)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom)))


@pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it)"
)
def test_the_ui_in_chromium_shows_the_runs_the_approval_and_the_report(stack, params, tmp_path):
    assert {"parent", "paused_run", "artifact_id", "failed_validate"} <= set(RESULTS), (
        "earlier tests did not run"
    )
    base = stack["PREFECT_UI_URL"]
    pages = {
        "lifecycle-run": f"{base}/runs/flow-run/{RESULTS['parent']}",
        "approval-artifact": f"{base}/artifacts/artifact/{RESULTS['artifact_id']}",
        "failed-validate-run": f"{base}/runs/flow-run/{RESULTS['failed_validate']}",
        "lifecycle-form": f"{base}/deployments/deployment/{RESULTS['lifecycle_deployment']}/run",
        "report": (Path(params["workspace"]) / "report" / "report.html").as_uri(),
    }
    texts = {
        name: _text(_dom(url, tmp_path / f"dom-{name}")) for name, url in pages.items() if name != "report"
    }
    assert "Completed" in texts["lifecycle-run"], texts["lifecycle-run"][:2000]
    assert WINDOW in texts["approval-artifact"]
    assert "Reserved cost" in texts["approval-artifact"]
    assert "Failed" in texts["failed-validate-run"], texts["failed-validate-run"][:2000]
    # The run form: the help keeps `<campaign name>` (not eaten as an HTML tag), no None toggle on the workspace.
    assert "workspace/<campaign name>" in texts["lifecycle-form"], texts["lifecycle-form"][:3000]
    assert "type None" not in texts["lifecycle-form"]
    shots = [_shot(url, tmp_path / f"shot-{name}", name) for name, url in pages.items()]
    print("screenshots:", *shots)

"""The commit's approval form answered in the real Prefect UI, in headless Chromium driven by chromedriver (Debian's
`chromium` and `chromium-driver`): a Prefect server with its UI, a flow run paused on exactly the form the commit
builds (`flows.commit.approval_form`), and a person who opens the run, presses Resume and fills the form.

A name alone does not answer (the decision has no default: the run stays paused, holding its dates); a rejection
needs a comment; reject and approve each reach the run as chosen; and the request in the modal wraps within it
(nothing is cut off on the right). Screenshots go to build/e2e/ (the test prints where)."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deployments import ui
from tests.helpers.paths import REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
SHOTS = REPO / "build" / "e2e"

# The paused run: what the commit flow pauses on (its form for a request like the demo's), and what it received.
PAUSED_RUN = """
import sys
from prefect import flow
from prefect.flow_runs import pause_flow_run
from campaign.approval import ApprovalRequest, GateLine
from flows.commit import approval_form

GATES = [
    ("data_quality", "12 of 12 expectations met on 2,431 documents (Great Expectations suite demo-clean)"),
    ("data_volume", "4,812,331 tokens >= 1,000,000 required (481.2% of the minimum)"),
    ("layout", "tp=2 pp=1 dp=8 fits: 61.2 GiB of 80 GiB HBM per GPU (76.5%), 41.0% MFU"),
    ("memory", "peak 61.2 GiB <= 76.0 GiB usable (80 GiB HBM less 4.0 GiB reserve)"),
    ("schedule", "expected 1.31 days at ETTR 0.912 (p90 1.62 days over 200 replicas) within the 2-day window"),
    ("rehearsal", "killed at step 37 and resumed from step 30 with identical loss (max |dloss| 0.0)"),
]
REQUEST = ApprovalRequest(
    campaign="demo", window_start="2027-01-03T00:00:00+00:00", window_end="2027-01-05T00:00:00+00:00",
    window_days=2.0, gpus=16, booked_gpus=24, expected_days=1.31, p90_days=1.62, cost_usd=2304.0,
    gpu_hour_usd=2.0, gates=tuple(GateLine(g, True, f) for g, f in GATES),
    config_digest="3f1c0a9e4b7d" * 5 + "a1b2", data_digest="0d9e8f7a6b5c" * 5 + "c3d4",
    expected_days_range=(1.2, 1.45), plan_basis="modelled step time from the layout search (no measured run)",
    hold_id="h-0123456789ab", commitment_id="c-0123456789ab", cluster="demo-cluster",
)


@flow(name="approval-form-check", flow_run_name=sys.argv[1])
def paused() -> str:
    answer = pause_flow_run(wait_for_input=approval_form(REQUEST), timeout=600, poll_interval=1, key="approval")
    return answer.model_dump_json()


print("ANSWER " + paused(), flush=True)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A Prefect server with its UI on a free port (as `make ui` starts it, without deployments or a worker)."""
    home = tmp_path_factory.mktemp("approval_ui")
    port = ui.free_port()
    env = ui.environment(home, port)
    ui._spawn(
        home,
        "server",
        [ui._bin("prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        ui.server_environment(home, port),
    )
    try:
        deadline = time.monotonic() + 180
        while not ui._healthy(env["PREFECT_API_URL"]):
            assert time.monotonic() < deadline, (home / "server.log").read_text()[-2000:]
            time.sleep(0.5)
        yield env
    finally:
        assert ui.stop(home)


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    # Debian's chromium wrapper turns on GPU rasterization (/etc/chromium.d/default-flags): without a GPU its GPU
    # process then emulates one in software (SwiftShader) and drew the UI's run graph continuously, 85 of the
    # file's 125 CPU-seconds (benchmarks/results/2026-12-05-test-cpu.md). Software compositing draws the same page.
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-gpu-rasterization",
        "--disable-software-rasterizer",
        "--window-size=1400,1000",
        "--no-first-run",
    ):
        options.add_argument(flag)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.implicitly_wait(30)
    try:
        yield driver
    finally:
        driver.quit()


class PausedRun:
    """A flow run paused on the approval form, in its own process (as the commit's is)."""

    def __init__(self, env: dict[str, str], name: str) -> None:
        self.env = env
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PAUSED_RUN, name],
            cwd=REPO,
            env={**env, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.name = name

    def run(self):
        """The flow run once it is paused with its form saved (Prefect saves the form right after pausing)."""
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

        deadline = time.monotonic() + 180
        with get_client(sync_client=True) as client:
            while time.monotonic() < deadline:
                assert self.proc.poll() is None, self.proc.stdout.read() if self.proc.stdout else ""
                runs = client.read_flow_runs(
                    flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[self.name]))
                )
                if runs and runs[0].state and runs[0].state.is_paused():
                    keyset = runs[0].state.state_details.run_input_keyset or {}
                    try:
                        client.read_flow_run_input(runs[0].id, keyset["schema"])
                        return runs[0]
                    except Exception:
                        pass  # not saved yet
                time.sleep(0.5)
        raise AssertionError(f"{self.name} never paused for approval")

    def state(self, run_id):
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            return client.read_flow_run(run_id).state

    def answer(self) -> dict:
        out, _ = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, out[-3000:]
        (line,) = [line for line in out.splitlines() if line.startswith("ANSWER ")]
        return json.loads(line.removeprefix("ANSWER "))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def paused(server):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    started: list[PausedRun] = []

    def start(name: str) -> PausedRun:
        started.append(PausedRun(server, name))
        return started[-1]

    with temporary_settings({PREFECT_API_URL: server["PREFECT_API_URL"]}):
        try:
            yield start
        finally:
            for run in started:
                run.close()


def _open_form(driver, base: str, run_id):
    """The Resume modal, once the request in it has rendered: the UI fetches the run's input description after it
    draws the modal, so on a busy machine the request's block can be there and still empty."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base}/runs/flow-run/{run_id}")
    driver.find_element(By.XPATH, "//button[normalize-space()='Resume']").click()
    modal = driver.find_element(By.CSS_SELECTOR, ".p-modal")
    WebDriverWait(driver, 60).until(
        lambda _: modal.find_element(By.CSS_SELECTOR, ".p-modal__body .markdown-renderer").text.strip()
    )
    return modal


def _field(modal, label: str):
    """The form field under the label `label`."""
    from selenium.webdriver.common.by import By

    return modal.find_element(
        By.XPATH, f".//div[contains(@class,'p-label')][.//span[starts-with(normalize-space(), '{label}')]]"
    )


def _type(modal, label: str, text: str) -> None:
    from selenium.webdriver.common.by import By

    box = _field(modal, label).find_element(By.TAG_NAME, "textarea")
    box.clear()
    box.send_keys(text)


def _choose(modal, option: str) -> None:
    """Pick `option` in the Decision select (a native <select> in Prefect's UI), as a person does."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    (shown,) = [s for s in _field(modal, "Decision").find_elements(By.TAG_NAME, "select") if s.is_displayed()]
    Select(shown).select_by_visible_text(option)


def _submit_refused(driver, modal, expected: str) -> None:
    """Submit, and see the UI say why the answer is refused: under the field (the UI's own check of the form) or in
    a notice (the server's check of the whole answer, e.g. a rejection without a comment)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    modal.find_element(By.XPATH, ".//button[normalize-space()='Submit']").click()
    try:
        WebDriverWait(driver, 30).until(lambda d: expected in d.find_element(By.TAG_NAME, "body").text)
    except TimeoutException:
        raise AssertionError(
            f"the form did not say {expected!r}: {_shot(driver, 'approval-form-failed')}\n{modal.text[-1500:]}"
        ) from None


def _submit(driver, modal) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    modal.find_element(By.XPATH, ".//button[normalize-space()='Submit']").click()
    WebDriverWait(driver, 30).until(lambda d: not d.find_elements(By.CSS_SELECTOR, ".p-modal"))


def _overflow(driver, modal) -> dict:
    """How far the request in the modal reaches beyond its column, and the elements that do."""
    from selenium.webdriver.common.by import By

    article = modal.find_element(By.CSS_SELECTOR, ".p-modal__body .markdown-renderer")
    return driver.execute_script(
        """const a = arguments[0], right = a.getBoundingClientRect().right;
        const out = [...a.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > right + 1)
          .map(e => e.tagName + ': ' + e.textContent.slice(0, 60));
        return {scroll: a.scrollWidth - a.clientWidth, beyond: out.slice(0, 5), text: a.innerText};""",
        article,
    )


def _shot(driver, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))
    return SHOTS / f"{name}.png"


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
    ),
]


@pytest.mark.timeout(600)
def test_a_name_alone_does_not_reject_and_a_rejection_needs_a_comment(server, paused, browser):
    waiting = paused("approval-form-reject")
    run = waiting.run()
    modal = _open_form(browser, server["PREFECT_UI_URL"], run.id)
    # The request wraps within the modal: every figure readable, nothing beyond the column's right edge.
    layout = _overflow(browser, modal)
    assert layout["scroll"] <= 1 and layout["beyond"] == [], layout
    for shown in (
        "2027-01-03T00:00:00+00:00 .. 2027-01-05T00:00:00+00:00 (2 days)",
        "within the 2-day window",
    ):
        assert shown in layout["text"]
    print("screenshot:", _shot(browser, "approval-form"))
    # Only a name: the form says a decision is needed, and the run still waits (nothing rejected, hold kept).
    _type(modal, "Approver", "alice")
    _submit_refused(browser, modal, "'decision' is a required property")
    print("screenshot:", _shot(browser, "approval-form-name-only"))
    assert waiting.state(run.id).is_paused()
    # A rejection without a comment is refused too.
    _choose(modal, "reject")
    _submit_refused(browser, modal, "Validation failed for field 'comment'")
    print("screenshot:", _shot(browser, "approval-form-reject-without-comment"))
    assert waiting.state(run.id).is_paused()
    _type(modal, "Comment", "wait for Q3")
    _submit(browser, modal)
    assert waiting.answer() == {"decision": "reject", "approver": "alice", "comment": "wait for Q3"}


@pytest.mark.timeout(600)
def test_approve_in_the_form_reaches_the_run(server, paused, browser):
    waiting = paused("approval-form-approve")
    run = waiting.run()
    modal = _open_form(browser, server["PREFECT_UI_URL"], run.id)
    _choose(modal, "approve")
    _type(modal, "Approver", "bob")
    _submit(browser, modal)
    assert waiting.answer() == {"decision": "approve", "approver": "bob", "comment": ""}

"""Do the analyse summary's figures show in the Prefect UI? A manual check against a real `prefect server`.

Starts `prefect server start` (SQLite in a temporary PREFECT_HOME, a free local port), analyses a demo window with
the analyse flow, opens the `campaign-report-<campaign>` markdown artifact's page in headless Chromium (Debian's
`chromium`), and reports: how many <img> the UI rendered with an SVG data URI, and how much of the page's artifact
column is figure (white plot backgrounds on the UI's dark theme; a stripped or broken image leaves none). The
screenshot is kept for a look. Needs a minute or two and a browser, so it is not a test.
Run: .venv/bin/python benchmarks/analyse/prefect_ui_images.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ANALYSE = """
import sys
from pathlib import Path
from tests.helpers.analysis_fixtures import executed_workspace
from flows.analyse import AnalyseParams, analyse_flow
ws = executed_workspace(Path(sys.argv[1]))
print(analyse_flow(AnalyseParams(workspace=str(ws.root)))["campaign"])
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(api: str, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{api}/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1.0)
    raise SystemExit(f"prefect server at {api} did not become healthy in {timeout_s:.0f} s")


def artifact_id(api: str, key: str) -> str:
    body = json.dumps({"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC", "limit": 1}).encode()
    req = urllib.request.Request(
        f"{api}/artifacts/filter", data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        found = json.load(r)
    if not found:
        raise SystemExit(f"no artifact {key!r} on the server")
    return found[0]["id"]


def figure_share(png: Path) -> float:
    """Share of the artifact column's pixels that are near-white (the figures' backgrounds on the dark UI)."""
    import numpy as np
    from PIL import Image

    image = Image.open(png).convert("L")
    w, h = image.size
    column = np.asarray(image.crop((int(w * 0.2), 0, int(w * 0.78), h)))
    return float(np.mean(column > 235))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--out", default=None, help="Folder for the screenshot and the DOM (default: a temp folder)."
    )
    args = parser.parse_args()
    if CHROMIUM is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install chromium)")
    tmp = Path(tempfile.mkdtemp(prefix="prefect-ui-images-"))
    out = Path(args.out) if args.out else tmp
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp / "prefect"),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PYTHONPATH": str(REPO),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=(tmp / "server.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        started = time.perf_counter()
        wait_healthy(api)
        print(f"prefect server on {api} in {time.perf_counter() - started:.0f} s")
        run = subprocess.run(
            [sys.executable, "-c", ANALYSE, str(tmp / "ws")],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode:
            raise SystemExit(f"the analyse flow failed:\n{run.stderr[-3000:]}")
        campaign = run.stdout.strip().splitlines()[-1]
        ident = artifact_id(api, f"campaign-report-{campaign}")
        page = f"http://127.0.0.1:{port}/artifacts/artifact/{ident}"
        dom = subprocess.run(
            [
                CHROMIUM,
                *FLAGS,
                f"--user-data-dir={tmp / 'profile-dom'}",
                "--virtual-time-budget=20000",
                "--dump-dom",
                page,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        ).stdout
        (out / "artifact-dom.html").write_text(dom)
        shot = out / "artifact.png"
        subprocess.run(
            [
                CHROMIUM,
                *FLAGS,
                f"--user-data-dir={tmp / 'profile-shot'}",
                "--virtual-time-budget=20000",
                "--window-size=1300,3200",
                "--hide-scrollbars",
                f"--screenshot={shot}",
                page,
            ],
            capture_output=True,
            timeout=180,
            check=False,
        )
        svg_imgs = re.findall(r'<img[^>]*src="data:image/svg\+xml;base64,', dom)
        png_imgs = re.findall(r'<img[^>]*src="data:image/png;base64,', dom)
        share = figure_share(shot) if shot.is_file() else 0.0
        print(f"artifact page {page}")
        print(f"  <img> with an SVG data URI: {len(svg_imgs)}; with a PNG data URI: {len(png_imgs)}")
        print(
            f"  figure pixels in the artifact column: {share:.1%} (a page whose images were stripped: under 1%)"
        )
        print(f"  screenshot: {shot}")
        ok = len(svg_imgs) >= 4 and share > 0.05
        print("  verdict:", "the figures render in the Prefect UI" if ok else "FIGURES MISSING")
        if not ok:
            raise SystemExit(1)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()

"""What a CLI command pays for its Prefect API, measured side by side in alternating runs.

Each variant runs in a fresh interpreter, as a command would:
- `fresh`: a private server on an empty SQLite database (what every command paid before: migrations and block
  registration on each start, under a temporary PREFECT_HOME);
- `template`: a private server on a copy of the migrated template database (campaign_cli/local_api.py today);
- `refusal`: `campaign execute` on a folder that is no workspace (refused before any server starts);
- `reuse`: `campaign execute` with PREFECT_API_URL naming a running server (here: the refusal path again, which
  never contacts it, so this is the command's own start-up cost);
- `flow, private` and `flow, reuse`: a command that runs a flow end to end (`campaign simulate demo --replicas 2
  --json`), without PREFECT_API_URL (its private API) and with it naming a `prefect server start` started here
  beforehand; their difference is what a user pays for not having a server running.

Run: .venv/bin/python benchmarks/local_api/bench_local_api.py [--repeats 3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
START = """
import os, sys, time
sys.path.insert(0, {repo!r})
t = time.perf_counter()
from pathlib import Path
from campaign_cli import local_api
if {fresh}:
    local_api._prepare_home = lambda home: (home.mkdir(parents=True, exist_ok=True), True)[1]
with local_api.local_api(Path({home!r})):
    print(time.perf_counter() - t)
"""


def _python(code: str, env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _command(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(args, capture_output=True, env=env, check=False)
    return time.perf_counter() - start


def _server(home: Path) -> tuple[subprocess.Popen, str]:
    """A long-lived `prefect server start` as a user would keep running (e.g. `make ui`), on a free port."""
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    home.mkdir(parents=True)
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("prefect")), "server", "start", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("prefect server start did not answer in 120 s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    campaign = str(Path(sys.executable).with_name("campaign"))
    demo = str(REPO / "configs" / "campaigns" / "demo.yaml")
    times: dict[str, list[float]] = {
        "fresh": [],
        "template": [],
        "refusal": [],
        "reuse": [],
        "flow, private": [],
        "flow, reuse": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        env["CAMPAIGN_CACHE_DIR"] = str(Path(tmp) / "cache")
        _python(
            START.format(repo=str(REPO), fresh=False, home=str(Path(tmp) / "warm")), env
        )  # builds the template
        server, url = _server(Path(tmp) / "server")
        flow = [campaign, "simulate", demo, "--replicas", "2", "--json", "--workspace", f"{tmp}/sim"]
        _command(flow, env)  # the workspace's first run: both variants below find it
        for i in range(repeats):  # alternating, so the machine's load falls on every variant alike
            times["flow, private"].append(_command(flow, env))
            times["flow, reuse"].append(_command(flow, {**env, "PREFECT_API_URL": url}))
            times["fresh"].append(_python(START.format(repo=str(REPO), fresh=True, home=f"{tmp}/f{i}"), env))
            times["template"].append(
                _python(START.format(repo=str(REPO), fresh=False, home=f"{tmp}/t{i}"), env)
            )
            times["refusal"].append(_command([campaign, "execute", demo, "--workspace", f"{tmp}/none"], env))
            times["reuse"].append(
                _command(
                    [campaign, "execute", demo, "--workspace", f"{tmp}/none"],
                    {**env, "PREFECT_API_URL": "http://127.0.0.1:9/api"},
                )
            )
        server.terminate()
        server.wait(timeout=30)
    base = statistics.median(times["fresh"])
    for name, values in times.items():
        med = statistics.median(values)
        print(
            f"{name:9s} median {med:6.2f} s  ({med / base:5.2f} x fresh)  runs: "
            + ", ".join(f"{v:.2f}" for v in values)
        )
    extra = statistics.median(times["flow, private"]) - statistics.median(times["flow, reuse"])
    print(
        f"a flow command without PREFECT_API_URL pays {extra:.2f} s more than with a running server (medians)"
    )
    print(f"1-minute system load at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

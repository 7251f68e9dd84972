"""What a CLI command pays for its Prefect API, measured side by side in alternating runs.

Each variant runs in a fresh interpreter, as a command would:
- `template`: starting a local server on a copy of the migrated template database (what the first command on a
  workspace pays), with CAMPAIGN_SERVER_IDLE_S=0 so each stops when its caller ends;
- `refusal`: `campaign execute` on a folder that is no workspace (refused before any server is asked);
- `first` and `second`: two consecutive `campaign simulate demo --replicas 2` on one workspace, the first after
  `campaign server stop` (it starts the workspace's server), the second finding it running; each measured to its
  first flow line ("Beginning flow run") and to its end;
- `external`: the same command with PREFECT_API_URL naming a `prefect server start` started here beforehand.
- `fresh` (with --fresh): a local server on an empty SQLite database (migrations and block registration).

Run: .venv/bin/python benchmarks/local_api/bench_local_api.py [--repeats 3] [--fresh]
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
    local_api.prepare_home = lambda home: (home.mkdir(parents=True, exist_ok=True), True)[1]
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


def _flow_command(args: list[str], env: dict) -> tuple[float, float]:
    """Seconds to the command's first flow line on its terminal, and to its end."""
    start = time.perf_counter()
    first = float("nan")
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if first != first and "Beginning flow run" in line:
                first = time.perf_counter() - start
    return first, time.perf_counter() - start


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
    parser.add_argument("--fresh", action="store_true", help="also time a server on an empty database")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    campaign = str(Path(sys.executable).with_name("campaign"))
    demo = str(REPO / "configs" / "campaigns" / "demo.yaml")
    times: dict[str, list[float]] = {"template": [], "refusal": []}
    flows: dict[str, list[tuple[float, float]]] = {"first": [], "second": [], "external": []}
    if args.fresh:
        times["fresh"] = []
    with tempfile.TemporaryDirectory() as tmp:
        # the user's template database (built once per Prefect version, on the first command ever): not timed here
        once = {**env, "CAMPAIGN_SERVER_IDLE_S": "0"}
        _python(START.format(repo=str(REPO), fresh=False, home=str(Path(tmp) / "warm")), once)  # the template
        server, url = _server(Path(tmp) / "server")
        ws = f"{tmp}/sim"
        flow = [campaign, "simulate", demo, "--replicas", "2", "--workspace", ws]
        _command(flow, env)  # the workspace's first run: every variant below finds it
        for i in range(args.repeats):  # alternating, so the machine's load falls on every variant alike
            _command([campaign, "server", "stop", "--workspace", ws], env)
            flows["first"].append(_flow_command(flow, env))
            flows["second"].append(_flow_command(flow, env))
            flows["external"].append(_flow_command(flow, {**env, "PREFECT_API_URL": url}))
            if args.fresh:
                times["fresh"].append(
                    _python(START.format(repo=str(REPO), fresh=True, home=f"{tmp}/f{i}"), once)
                )
            times["template"].append(
                _python(START.format(repo=str(REPO), fresh=False, home=f"{tmp}/t{i}"), once)
            )
            times["refusal"].append(_command([campaign, "execute", demo, "--workspace", f"{tmp}/none"], env))
        _command([campaign, "server", "stop"], env)
        server.terminate()
        server.wait(timeout=30)
    for name, values in times.items():
        print(
            f"{name:9s} median {statistics.median(values):6.2f} s  runs: "
            + ", ".join(f"{v:.2f}" for v in values)
        )
    for name, pairs in flows.items():
        firsts, walls = [p[0] for p in pairs], [p[1] for p in pairs]
        print(
            f"{name:9s} first flow line median {statistics.median(firsts):6.2f} s, end {statistics.median(walls):6.2f} s"
            "  runs: " + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in pairs)
        )
    print(f"1-minute system load at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

"""What a CLI command pays for its Prefect API (issue 11, item 7), measured side by side in alternating runs.

Each variant runs in a fresh interpreter, as a command would:
- `fresh`: a private server on an empty SQLite database (what every command paid before: migrations and block
  registration on each start, under a temporary PREFECT_HOME);
- `template`: a private server on a copy of the migrated template database (flows/local_api.py today);
- `refusal`: `campaign execute` on a folder that is no workspace (refused before any server starts);
- `reuse`: `campaign execute` with PREFECT_API_URL naming a running server (here: the refusal path again, which
  never contacts it, so this is the command's own start-up cost).

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
from flows import local_api
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    campaign = str(Path(sys.executable).with_name("campaign"))
    demo = str(REPO / "configs" / "campaigns" / "demo.yaml")
    times: dict[str, list[float]] = {"fresh": [], "template": [], "refusal": [], "reuse": []}
    with tempfile.TemporaryDirectory() as tmp:
        env["CAMPAIGN_CACHE_DIR"] = str(Path(tmp) / "cache")
        _python(START.format(repo=str(REPO), fresh=False, home=str(Path(tmp) / "warm")), env)  # builds the template
        for i in range(repeats):  # alternating, so the machine's load falls on every variant alike
            times["fresh"].append(_python(START.format(repo=str(REPO), fresh=True, home=f"{tmp}/f{i}"), env))
            times["template"].append(_python(START.format(repo=str(REPO), fresh=False, home=f"{tmp}/t{i}"), env))
            times["refusal"].append(_command([campaign, "execute", demo, "--workspace", f"{tmp}/none"], env))
            times["reuse"].append(_command([campaign, "execute", demo, "--workspace", f"{tmp}/none"],
                                           {**env, "PREFECT_API_URL": "http://127.0.0.1:9/api"}))
    base = statistics.median(times["fresh"])
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:9s} median {med:6.2f} s  ({med / base:5.2f} x fresh)  runs: "
              + ", ".join(f"{v:.2f}" for v in values))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

"""The second of two consecutive commands, before and after a change: seconds to its first flow line.

`campaign simulate configs/campaigns/demo.yaml --replicas 2` on one workspace whose server is already running (the
first command started it), run from two source trees by this interpreter, alternating so the machine's load falls
on both alike: this checkout, and `--before REV` exported with `git archive` (its modules shadow this checkout's
through PYTHONPATH). Medians of `--repeats` pairs, with each run's figures.

Run: .venv/bin/python benchmarks/local_api/bench_second_command.py --before REV [--repeats 3]
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


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    return {**env, "PYTHONPATH": str(root), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _flow_command(root: Path, ws: str) -> tuple[float, float]:
    """Seconds to the command's first flow line ("Beginning flow run") and to its end."""
    demo = str(root / "configs" / "campaigns" / "demo.yaml")
    args = [sys.executable, "-m", "campaign_cli.cli", "simulate", demo, "--replicas", "2", "--workspace", ws]
    start = time.perf_counter()
    first = float("nan")
    with subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env(root), text=True, cwd=root
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if first != first and "Beginning flow run" in line:
                first = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{args} exited {proc.returncode}")
    return first, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="the git revision to compare this checkout with")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", args.before], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
        roots = {"before": before, "after": REPO}
        ws = f"{tmp}/sim"
        for (
            root
        ) in roots.values():  # the first command starts the server; each tree compiles its kernels once
            _flow_command(root, ws)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in roots}
        for _ in range(args.repeats):
            for name, root in roots.items():
                runs[name].append(_flow_command(root, ws))
        subprocess.run(
            [sys.executable, "-m", "campaign_cli.cli", "server", "stop", "--workspace", ws],
            env=_env(REPO),
            capture_output=True,
            check=False,
        )
    for name, pairs in runs.items():
        print(
            f"{name:7s} first flow line median {statistics.median(p[0] for p in pairs):.2f} s, end median "
            f"{statistics.median(p[1] for p in pairs):.2f} s  runs: "
            + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in pairs)
        )


if __name__ == "__main__":
    main()

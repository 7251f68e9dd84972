"""The demo figures and the report screenshot that README.md and docs/report-and-sql.md show, regenerated from a
real demo run, so they cannot go stale.

    .venv/bin/python benchmarks/readme_figures.py               # `campaign run` the demo, then rewrite the documents
    .venv/bin/python benchmarks/readme_figures.py --reuse       # read an already executed workspace instead
    .venv/bin/python benchmarks/readme_figures.py --reuse --check   # exit 1 if a document differs from the run

The run is exactly `make run`'s (`campaign run configs/campaigns/demo.yaml`), into `--workspace` (default
`workspace/readme-demo`). Each generated part of a document sits between `<!-- demo:NAME -->` and
`<!-- /demo:NAME -->` and is rewritten whole; `docs/images/report.png` is the run's report.html in headless Chromium
and `docs/images/prefect-artifact.png` its report artifact in the Prefect UI (a throwaway server; `--no-ui` skips).
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
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "configs" / "campaigns" / "demo.yaml"
DOCUMENTS = (REPO / "README.md", REPO / "docs" / "report-and-sql.md")
SCREENSHOT = REPO / "docs" / "images" / "report.png"
SCREEN_PX = (1100, 1700)
ARTIFACT_SHOT = REPO / "docs" / "images" / "prefect-artifact.png"  # docs/prefect-ui.md
ARTIFACT_PX = (1300, 1500)

# The queries docs/report-and-sql.md shows with their output (as `campaign sql` prints it).
QUERIES = (
    "select gate, passed, summary from gate_figures",
    "select reason, sum(n_documents) as documents,\n"
    "    round(sum(n_documents) * 100.0 / (select sum(n_input) from data_mixture), 1) as pct_of_input\n"
    "    from rejections_by_reason group by reason order by documents desc limit 5",
    "select day,\n"
    "    sum(n_interruptions) filter (where kind = 'unexpected') as unexpected,\n"
    "    sum(n_interruptions) filter (where kind = 'planned') as planned,\n"
    "    string_agg(distinct category, ', ') as categories\n"
    "    from interruptions_by_day group by day order by day",
)
BLOCK = re.compile(r"(<!-- demo:(?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- /demo:(?P=name) -->)", re.DOTALL)


def demo_figures(result: dict[str, Any]) -> dict[str, Any]:
    """The figures the documents quote, read from the run's analysis.json (`campaign analyse --json`)."""
    mixture = result["data"]["mixture"]
    gates = result["gates"]
    return {
        "documents": sum(m["n_documents"] for m in mixture),
        "input_documents": sum(m["n_input"] for m in mixture),
        "rejected": sum(m["n_rejected"] for m in mixture),
        "tokens": sum(m["n_tokens"] for m in mixture),
        "gates_passed": sum(bool(g["passed"]) for g in gates),
        "gates": len(gates),
        "ettr": result["ettr"],
        "plan_ettr": result["planned"]["expected_ettr"],
        "utilisation": result["window_utilisation"],
        "lost_usd": result["cost_usd"]["lost"],
        "released_h": result["released_early_h"],
        "released_usd": result["cost_usd"]["released_early"],
        "completion_days": result["completion_days"],
        "window_days": result["window_days"],
        "gpus": result["gpus"],
        "seed": result["seed"],
        "replica": result["replica"],
    }


def blocks(figures: dict[str, Any], sql_outputs: list[str]) -> dict[str, str]:
    """Each generated block's text, by name."""
    f = figures
    finished = (
        f"finished on day {f['completion_days']:.2f} of {f['window_days']:g}"
        if f["completion_days"] is not None
        else "did not finish"
    )
    readme = (
        f"On a fresh clone the demo keeps {f['documents']:,} of {f['input_documents']:,} documents "
        f"({f['tokens']:,} tokens; {f['rejected']:,} rejected, each with its reason), passes "
        f"{f['gates_passed']} of {f['gates']} gates, and its simulated window on {f['gpus']:,} GPUs (replica "
        f"{f['replica']}, seed {f['seed']}) {finished} at ETTR {f['ettr']:.3f} (the plan expected "
        f"{f['plan_ettr']:.3f}), using {f['utilisation']:.1%} of the window's GPU-hours and losing "
        f"${f['lost_usd']:,.0f} to failures. These figures and the screenshot below come from a real run "
        "(`benchmarks/readme_figures.py`)."
    )
    headline = (
        "- **ETTR** (the headline) = productive job time / the job's wall time from its start to completion or the "
        f"window's\n  end: {f['ettr']:.3f} (plan {f['plan_ettr']:.3f}).\n"
        "- **window utilisation** = productive GPU-hours / ((job + spare GPUs) x window hours): "
        f"{f['utilisation']:.1%}.\n"
        "- **lost to failures** = GPU-hours of lost rework, detection and restart, and waiting, x the GPU-hour "
        f"price: ${f['lost_usd']:,.0f}.\n"
        "- **released early**: after an early finish the whole allocation goes back to the cluster "
        f"({f['released_h']:.1f} h, ${f['released_usd']:,.0f} on the\n  demo). It is never a loss of the job.\n"
    )
    sql = "```\n" + "\n\n".join(
        f'$ campaign sql --workspace workspace/demo "{query}"\n{output}'
        for query, output in zip(QUERIES, sql_outputs, strict=True)
    )
    return {"readme-figures": textwrap.fill(readme, 115) + "\n", "headline": headline, "sql": sql + "\n```\n"}


def rewrite(text: str, generated: dict[str, str]) -> str:
    """`text` with every `<!-- demo:NAME -->` block's body replaced by `generated[NAME]` (others left alone)."""

    def body(m: re.Match[str]) -> str:
        name = m.group("name")
        return m.group(1) + generated[name] + m.group(4) if name in generated else m.group(0)

    return BLOCK.sub(body, text)


def block_bodies(text: str) -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in BLOCK.finditer(text)}


def run_demo(workspace: Path) -> None:
    """`make run`'s command, with a calendar of its own beside the workspace (`<workspace>-calendars/`), so the
    run books nothing on the calendar `make run` uses."""
    campaign = Path(sys.executable).with_name("campaign")
    command = [str(campaign), "run", str(DEMO), "--workspace", str(workspace)]
    calendars = workspace.with_name(workspace.name + "-calendars")
    calendars.mkdir(parents=True, exist_ok=True)
    print("running:", " ".join(command), flush=True)
    env = {**os.environ, "CAMPAIGN_CALENDAR": f"{calendars}/", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    subprocess.run(command, cwd=REPO, check=True, env=env)


def sql_outputs(workspace: Path) -> list[str]:
    from campaign.analysis.catalog_sql import format_table, run_query

    return [format_table(*run_query(workspace, query)) for query in QUERIES]


def screenshot(url: str, out: Path, size: tuple[int, int], *flags: str) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install chromium): no screenshot taken")
    with tempfile.TemporaryDirectory(prefix="readme-chromium-") as profile:
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={size[0]},{size[1]}",
                *flags,
                f"--screenshot={out}",
                url,
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _api(url: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def artifact_screenshot(workspace: Path, out: Path) -> None:
    """The run's report artifact in the Prefect UI: a throwaway Prefect server with its UI, `campaign analyse`
    publishing to it, and its artifact page in headless Chromium."""
    with tempfile.TemporaryDirectory(prefix="readme-prefect-") as home:
        port = _free_port()
        env = {
            **os.environ,
            "PREFECT_HOME": home,
            "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
            "PREFECT_UI_URL": f"http://127.0.0.1:{port}",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        }
        bin_dir = Path(sys.executable).parent
        server = subprocess.Popen(
            [str(bin_dir / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    _api(f"http://127.0.0.1:{port}/api/health")
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise SystemExit(
                            "the Prefect server for the artifact screenshot did not start"
                        ) from None
                    time.sleep(1)
            # A report whose inputs are unchanged is not drawn (or published) again: forget the record of its
            # inputs, so analyse draws it and publishes its artifact to this server.
            (workspace / "report" / "report-inputs.json").unlink(missing_ok=True)
            analyse = [str(bin_dir / "campaign"), "analyse", "--workspace", str(workspace)]
            subprocess.run(analyse, cwd=REPO, env=env, check=True, capture_output=True)
            (artifact,) = _api(
                f"http://127.0.0.1:{port}/api/artifacts/filter",
                {
                    "artifacts": {"key": {"any_": ["campaign-report-demo"]}},
                    "sort": "CREATED_DESC",
                    "limit": 1,
                },
            )
            url = f"http://127.0.0.1:{port}/artifacts/artifact/{artifact['id']}"
            screenshot(url, out, ARTIFACT_PX, "--virtual-time-budget=20000")
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, default=REPO / "workspace" / "readme-demo")
    parser.add_argument("--reuse", action="store_true", help="read an executed workspace; run nothing")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a document differs")
    parser.add_argument(
        "--no-ui", action="store_true", help="skip the Prefect UI screenshot (it starts a server)"
    )
    args = parser.parse_args(argv)
    workspace = args.workspace.resolve()
    if not args.reuse:
        run_demo(workspace)
    result = json.loads((workspace / "report" / "analysis.json").read_text(encoding="utf-8"))
    generated = blocks(demo_figures(result), sql_outputs(workspace))
    stale = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        new = rewrite(text, generated)
        if new != text:
            stale.append(path.relative_to(REPO))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check:
        print("stale: " + ", ".join(map(str, stale)) if stale else "the documents match the run")
        return 1 if stale else 0
    report = (workspace / "report" / "report.html").as_uri()
    screenshot(report, SCREENSHOT, SCREEN_PX, "--host-resolver-rules=MAP * ~NOTFOUND")
    if not args.no_ui:
        artifact_screenshot(workspace, ARTIFACT_SHOT)
    print(f"rewrote {', '.join(map(str, stale)) or 'nothing (already current)'}; screenshots in docs/images/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

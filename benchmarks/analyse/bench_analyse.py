"""The full analysis of a simulated 54-day, 16,384-GPU window (Llama 3 405B config), DuckDB against pandas.

The catalog holds the window's event log, its power per minute for the whole window and per second for one day
(stored under a second commitment id, so the same SQL reads it). Timed, alternating, on the same inputs:
- campaign: `analyse_window` (every figure of analysis.json from the catalog's views) plus the per-second day's
  stats from the same power.sql;
- campaign, the whole analyse task without Prefect: `gather_report_inputs` (the analysis, the event log, the power
  band aggregated in DuckDB, the 1-s series rebuilt by simulating the committed config again, the smoothing
  comparison) and `write_report` (every figure, report.html, report.md); timed in this process after one warm-up,
  and once more in a fresh process (imports included, as `campaign analyse` pays them);
- pandas: the same figures from the same rows read with pandas (`read_parquet` of the files execute writes), and
  the results checked equal.
Run: .venv/bin/python benchmarks/analyse/bench_analyse.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from campaign import goodput, store
from campaign.analysis.analysis import analyse_window, create_views, query
from campaign.analysis.report import write_report
from campaign.analysis.report_inputs import gather_report_inputs
from campaign.config import load_config
from campaign.plan import make_plan
from campaign.sim import simulate
from campaign.sim.power import one_second_series, sampled_power
from campaign.sim.summary import ReplicaSummary
from campaign.window import window_inputs, with_start

REPO = Path(__file__).resolve().parents[2]
DAY_S = 86_400


def build(root: Path) -> tuple[store.Workspace, ReplicaSummary, np.ndarray]:
    loaded = load_config(REPO / "configs/campaigns/llama3-405b.yaml")
    # The shipped config books its start (`auto`); a booked start as commit would record it.
    config = with_start(loaded.config, datetime(2027, 1, 4, tzinfo=UTC))
    plan = make_plan(config)
    result = simulate(window_inputs(config, plan), replica=0)
    summary = replace(
        result.summary, checkpoint_interval_optimal_s=plan.checkpoint.optimal_interval_s, plan=plan.to_json()
    )
    ws = store.adopt_workspace(store.Workspace(root), config.name)
    start = config.window.start
    config_json = json.dumps(config.model_dump(mode="json", by_alias=True), sort_keys=True)
    minute = sampled_power(result.power_curve, 60.0)
    second = one_second_series(result.power_curve)
    day = pd.DataFrame(
        {"t_s": np.arange(DAY_S, 2 * DAY_S, dtype=float), "power_mw": second[DAY_S : 2 * DAY_S]}
    )
    for cid, power in (("c-bench", minute), ("c-bench-1s", day)):
        store.record_commitment(
            ws,
            store.Commitment(
                cid,
                start,
                start + timedelta(days=config.window.days),
                loaded.digest + cid,
                "d" * 64,
                "bench",
                "commit",
                datetime(2027, 1, 1, tzinfo=UTC),
                config_json,
            ),
        )
        store.record_replica(ws, "execute", cid, 0, config.seed, summary, result.events, power)
    store.record_execution(ws, "execute", "c-bench", 0, reused=False)
    result.events.to_parquet(root / "events.parquet")
    minute.to_parquet(root / "power-60s.parquet")
    day.to_parquet(root / "power-1s.parquet")
    (root / "summary.json").write_text(json.dumps(summary.to_json(), default=str))
    return ws, summary, second


def campaign_analysis(ws: store.Workspace) -> dict:
    with store.catalog(ws, read_only=True) as con:
        result = analyse_window(con, str(ws.catalog_path)).to_json()
        row = con.execute(query("power"), {"commitment_id": "c-bench-1s", "replica": 0}).fetchone()
    result["one_second_day"] = {"peak": row[0], "mean": row[1], "min": row[2], "max_ramp_mw_per_s": row[4]}
    return result


def campaign_sql_same_figures(ws: store.Workspace) -> dict:
    """Only the figures the pandas path computes, from the catalog's SQL files and views (a like-for-like timing)."""
    with store.catalog(ws, read_only=True) as con:
        create_views(con)
        params = {"commitment_id": "c-bench", "replica": 0}
        by_kind = con.execute(query("interruptions"), params).fetchall()
        by_day = con.execute(
            "SELECT day, sum(n_interruptions) FROM interruptions_by_day GROUP BY day"
        ).fetchall()
        minute = con.execute(query("power"), params).fetchone()
        second = con.execute(query("power"), {"commitment_id": "c-bench-1s", "replica": 0}).fetchone()
        summary = json.loads(con.execute("SELECT summary FROM executed_window").fetchone()[0])
    wall_s = goodput.job_wall_s(summary["window_s"], summary.get("completion_s"))
    buckets = goodput.goodput_buckets_gpu_h(
        summary["job_time_s"],
        summary["gpus"],
        summary["spare_gpus"],
        summary["window_s"],
        summary.get("completion_s"),
    )
    return {
        "ettr": goodput.ettr(summary["job_time_s"]["productive"], wall_s),
        "buckets": buckets,
        "by_kind": by_kind,
        "by_day": by_day,
        "minute": minute,
        "second": second,
    }


def _power_stats(p: pd.DataFrame) -> dict:
    p = p.sort_values("t_s")
    ramp = (p["power_mw"].diff().abs() / p["t_s"].diff()).max()
    return {
        "peak": p["power_mw"].max(),
        "mean": p["power_mw"].mean(),
        "min": p["power_mw"].min(),
        "max_ramp_mw_per_s": ramp,
    }


def pandas_analysis(root: Path) -> dict:
    summary = json.loads((root / "summary.json").read_text())
    events = pd.read_parquet(root / "events.parquet")
    minute = pd.read_parquet(root / "power-60s.parquet")
    day = pd.read_parquet(root / "power-1s.parquet")
    failures = events[events["kind"] == "failure"]
    by_category = failures.groupby("category").size()
    completion_s = summary.get("completion_s")
    window_s = summary["window_s"]
    wall_s = window_s if completion_s is None else min(completion_s, window_s)
    gpus, spares = summary["gpus"], summary["spare_gpus"]
    job = summary["job_time_s"]
    buckets = {
        k: job[k] * gpus / 3600.0 for k in ("productive", "lost_rework", "checkpoint", "restart", "waiting")
    }
    buckets["idle"] = spares * wall_s / 3600.0 + (gpus + spares) * (window_s - wall_s) / 3600.0
    days = (events.loc[events["kind"].isin(["failure", "planned_start"]), "t_s"] // DAY_S).value_counts()
    minute_stats = _power_stats(minute)
    energy = minute["power_mw"].sum() * 60.0 / 3600.0
    return {
        "ettr": job["productive"] / wall_s,
        "goodput_breakdown_gpu_h": buckets,
        "interruptions": {
            "unexpected": len(failures),
            "planned": int((events["kind"] == "planned_start").sum()),
            "by_category": by_category.to_dict(),
        },
        "observed_job_mtbf_h": wall_s / 3600 / len(failures) if len(failures) else None,
        "by_day": days.sort_index().to_dict(),
        "minute": minute_stats,
        "energy_mwh_sampled": energy,
        "one_second_day": _power_stats(day),
    }


def check_equal(ours: dict, theirs: dict) -> None:
    assert math.isclose(ours["ettr"], theirs["ettr"], rel_tol=1e-12)
    for k, v in theirs["goodput_breakdown_gpu_h"].items():
        assert math.isclose(ours["goodput_breakdown_gpu_h"][k], v, rel_tol=1e-9), k
    assert ours["interruptions"]["by_category"] == theirs["interruptions"]["by_category"]
    assert ours["interruptions"]["unexpected"] == theirs["interruptions"]["unexpected"]
    assert math.isclose(ours["observed_job_mtbf_h"], theirs["observed_job_mtbf_h"], rel_tol=1e-12)
    for k in ("peak", "min", "max_ramp_mw_per_s"):
        assert math.isclose(ours["one_second_day"][k], theirs["one_second_day"][k], rel_tol=1e-9), k
    assert math.isclose(ours["one_second_day"]["mean"], theirs["one_second_day"]["mean"], rel_tol=1e-9)


COLD = """
import sys, time
start = time.perf_counter()
from pathlib import Path
from campaign.analysis.report import write_report
from campaign.analysis.report_inputs import gather_report_inputs
from campaign.store import Workspace
write_report(Path(sys.argv[2]), gather_report_inputs(Workspace(Path(sys.argv[1]))))
print(time.perf_counter() - start)
"""


def cold_run(ws_root: Path, out: Path) -> float:
    """The analysis and report once in a fresh interpreter: what `campaign analyse` pays beyond Prefect."""
    run = subprocess.run(
        [sys.executable, "-c", COLD, str(ws_root), str(out)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    if run.returncode:
        raise SystemExit(f"the fresh-process run failed:\n{run.stderr[-3000:]}")
    return float(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats
    with tempfile.TemporaryDirectory(prefix="bench-analyse-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        ws, summary, second = build(root / "ws")
        print(
            f"built the catalog in {time.perf_counter() - t0:.1f} s: {summary.gpus:,} GPUs, "
            f"{summary.window_s / DAY_S:.0f} days, {summary.interruptions.unexpected} unexpected "
            "interruptions"
        )
        with store.catalog(ws, read_only=True) as con:
            n = con.execute(
                "SELECT commitment_id, count(*) FROM sim_power GROUP BY ALL ORDER BY 1"
            ).fetchall()
            n_events = con.execute(
                "SELECT count(*) FROM sim_events WHERE commitment_id = 'c-bench'"
            ).fetchone()[0]
        print(f"rows: {n_events:,} events; power {dict(n)}")
        ours, theirs = campaign_analysis(ws), pandas_analysis(root / "ws")
        check_equal(ours, theirs)
        inputs = gather_report_inputs(
            ws
        )  # warm-up: imports matplotlib, fills DuckDB's and the simulator's caches
        assert inputs.zoom_note == "" and np.array_equal(inputs.one_second, second)
        write_report(root / "report", inputs)
        task = "analysis + report (task)"
        times: dict[str, list[float]] = {
            "campaign: full analysis": [],
            "campaign: same figures (SQL)": [],
            "pandas: same figures": [],
            task: [],
        }
        cpu_s: dict[str, list[float]] = {
            k: [] for k in times
        }  # CPU seconds of this process (DuckDB's threads too)
        for _ in range(repeats):  # alternating, so all see the same machine load
            for name, fn in (
                ("campaign: full analysis", lambda: campaign_analysis(ws)),
                ("campaign: same figures (SQL)", lambda: campaign_sql_same_figures(ws)),
                ("pandas: same figures", lambda: pandas_analysis(root / "ws")),
                (task, lambda: write_report(root / "report", gather_report_inputs(ws))),
            ):
                start, cpu = time.perf_counter(), time.process_time()
                fn()
                times[name].append(time.perf_counter() - start)
                cpu_s[name].append(time.process_time() - cpu)
        cold = cold_run(ws.root, root / "report-cold")
        print(f"\nmedian of {repeats} alternating runs (figures checked equal):")
        for name, ts in times.items():
            print(
                f"  {name:28s} {statistics.median(ts):7.3f} s   (min {min(ts):.3f}, max {max(ts):.3f}; "
                f"CPU {statistics.median(cpu_s[name]):.3f} s)"
            )
        print(
            f"  {'analysis + report, fresh':28s} {cold:7.3f} s   (one run in a new process, imports included; "
            "target: under 5 s)"
        )
        ratio = statistics.median(times["pandas: same figures"]) / statistics.median(
            times["campaign: same figures (SQL)"]
        )
        print(f"  pandas / campaign SQL on the same figures: {ratio:.2f}x (above 1: DuckDB faster)")
        print(f"  report.html: {(root / 'report' / 'report.html').stat().st_size / 1e6:.2f} MB")
        print(
            f"  goodput sum check: {goodput.buckets_sum_gpu_h(ours['goodput_breakdown_gpu_h']):,.0f} GPU-h = "
            f"{ours['window_gpu_h']:,.0f}"
        )


if __name__ == "__main__":
    main()

"""The analysis of an executed window: honest headline figures, failures against the plan, the checkpoint interval,
bad input, and the documented views."""

from __future__ import annotations

import dataclasses
import json
import math

import duckdb
import numpy as np
import pandas as pd
import pytest

from campaign import goodput
from campaign.analysis.analysis import analyse_window, analysis_workspace, window_figures
from campaign.analysis.recorded_config import RecordedConfig
from campaign.analysis.statistics import checkpoint_overhead, optimal_interval_s, poisson_interval
from campaign.errors import ConfigError, DataError
from campaign.sim.summary import Interruptions, ReplicaSummary
from campaign.store import catalog
from tests.helpers.analysis_fixtures import empty_catalog, executed_workspace


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    ws = executed_workspace(tmp_path_factory.mktemp("analysed") / "w")
    with catalog(ws, read_only=True) as con:
        return ws, analyse_window(
            con, str(ws.catalog_path)
        ).to_json()  # analysis.json, as the contract reads it


# ------------------------------------------------------------------------------------------- statistics


def test_poisson_interval_matches_the_exact_quantiles():
    assert poisson_interval(0.0) == (0, 0)
    assert poisson_interval(10.0) == (4, 17)  # Poisson(10): P(X<=3)=0.0103, P(X<=16)=0.973, P(X<=17)=0.986
    lo, hi = poisson_interval(1000.0)
    assert (
        937 <= lo <= 939 and 1062 <= hi <= 1063
    )  # normal approximation 1000 -/+ 1.96 * sqrt(1000) = 938, 1062


@pytest.mark.parametrize("mean", [0.3, 2.5, 41.0, 419.0])
def test_poisson_interval_covers_at_least_the_asked_share(mean):
    lo, hi = poisson_interval(mean)
    k = np.arange(0, int(mean * 3 + 50))
    pmf = np.exp(k * math.log(mean) - mean - np.array([math.lgamma(x + 1) for x in k]))
    assert pmf[(k >= lo) & (k <= hi)].sum() >= 0.95
    assert pmf[k < lo].sum() <= 0.025 + 1e-12 and pmf[k > hi].sum() <= 0.025 + 1e-12


def test_poisson_interval_rejects_a_bad_mean():
    with pytest.raises(ValueError):
        poisson_interval(float("nan"))


def test_daly_overhead_is_smallest_at_the_optimum():
    best = optimal_interval_s(60.0, 3600.0 * 3)
    at_best = checkpoint_overhead(best, 60.0, 600.0, 3600.0 * 3)
    assert at_best < checkpoint_overhead(best * 2, 60.0, 600.0, 3600.0 * 3)
    assert at_best < checkpoint_overhead(best / 2, 60.0, 600.0, 3600.0 * 3)


# ----------------------------------------------------------------------------------- honest headline figures


def _summary(completion_s: float | None) -> ReplicaSummary:
    job = {
        "productive": 80_000.0,
        "lost_rework": 2_000.0,
        "checkpoint": 1_000.0,
        "restart": 3_000.0,
        "waiting": 4_000.0,
        "idle": 0.0,
    }
    # window_figures recomputes the ETTR, buckets and interruptions from the job seconds and the events
    return ReplicaSummary(
        replica=0,
        seed=0,
        window_s=100_000.0,
        gpus=100,
        spare_gpus=20,
        ettr=0.0,
        window_utilisation=0.0,
        job_wall_s=0.0,
        goodput_breakdown_gpu_h={},
        job_time_s=job,
        interruptions=Interruptions(0, 0, {}),
        observed_job_mtbf_h=None,
        checkpoint_interval_s=600.0,
        n_checkpoints=0,
        n_spares_exhausted=0,
        n_quarantined=0,
        rework_s_per_failure=None,
        lost_at_window_end_s=0.0,
        tokens_trained=1e12,
        tokens_target=1e12,
        completed=completion_s is not None,
        completion_s=completion_s,
        target_reached_s=None,
        power_mw={"peak": 1.0, "mean": 0.8, "min": 0.2, "max_ramp_mw_per_s": 0.1},
        energy_mwh=1.0,
        cost_usd={"compute": 120 * 100_000 / 3600 * 2.0, "energy": 5.0, "lost": 0.0},
    )


def _events() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "t_s": [0.0, 10.0, 20.0, 30.0],
            "kind": ["job_start", "failure", "failure", "planned_start"],
            "category": ["", "gpu", "gpu", ""],
            "scope": ["", "gpu", "gpu", ""],
            "node": [-1, 1, 2, -1],
            "tokens_trained": [0.0, 1.0, 2.0, 3.0],
            "detail": ["", "", "", ""],
        }
    )


def test_an_early_finish_is_released_capacity_not_a_loss():
    r = window_figures(_summary(completion_s=90_000.0), _events(), None)
    detail = r.goodput_breakdown_gpu_h
    assert r.ettr == pytest.approx(80_000 / 90_000)  # over the job's wall time, not the window
    assert r.ettr_whole_window == pytest.approx(0.8)
    assert detail["idle_released"] == pytest.approx(120 * 10_000 / 3600)
    assert detail["idle_spares"] == pytest.approx(20 * 90_000 / 3600)
    assert r.cost_usd.lost == pytest.approx((2_000 + 3_000 + 4_000) * 100 / 3600 * 2.0)
    assert r.cost_usd.released_early == pytest.approx(detail["idle_released"] * 2.0, abs=0.005)  # cents
    assert r.released_early_h == pytest.approx(10_000 / 3600)
    total = 120 * 100_000 / 3600
    assert math.fsum(r.goodput_breakdown_gpu_h[k] for k in goodput.CONTRACT_KEYS) == pytest.approx(total)
    assert goodput.buckets_sum_gpu_h(detail) == pytest.approx(total)
    assert r.window_utilisation == pytest.approx(detail["productive"] / total)


def test_a_window_that_ran_out_has_no_released_time():
    r = window_figures(_summary(completion_s=None), _events(), None)
    assert r.goodput_breakdown_gpu_h["idle_released"] == 0.0
    assert r.ettr == pytest.approx(0.8) and r.completion_days is None
    assert any(rec["topic"] == "window length" and "too short" in rec["advice"] for rec in _recs(r))


def _recs(r):
    from campaign.analysis.analysis import recommendations

    return recommendations(r)


def test_the_demo_window_keeps_every_contract_key_and_the_buckets_sum(analysed):
    _, r = analysed
    for key in (
        "ettr",
        "goodput_breakdown_gpu_h",
        "interruptions",
        "observed_job_mtbf_h",
        "checkpoint_interval_s",
        "power_mw",
        "energy_mwh",
        "cost_usd",
        "tokens_trained",
        "tokens_target",
        "window_utilisation",
    ):
        assert key in r, key
    assert set(r["goodput_breakdown_gpu_h"]) == set(
        goodput.ALL_KEYS
    )  # the contract's six and the split of idle
    assert {"used", "optimal"} <= set(r["checkpoint_interval_s"])
    assert {"peak", "mean", "min", "max_ramp_mw_per_s"} <= set(r["power_mw"])
    assert {"compute", "energy", "lost"} <= set(r["cost_usd"])
    assert {"unexpected", "planned", "by_category"} <= set(r["interruptions"])
    total = (r["gpus"] + r["spare_gpus"]) * r["window"]["hours"]
    assert math.fsum(r["goodput_breakdown_gpu_h"][k] for k in goodput.CONTRACT_KEYS) == pytest.approx(
        total, rel=1e-9
    )
    assert goodput.buckets_sum_gpu_h(r["goodput_breakdown_gpu_h"]) == pytest.approx(total, rel=1e-9)
    json.dumps(r)  # JSON-ready


def test_the_demo_headline_agrees_with_the_simulator_and_leaves_the_idle_tail_out_of_the_loss(analysed):
    ws, r = analysed
    with catalog(ws, read_only=True) as con:
        summary = json.loads(con.execute("SELECT summary FROM sim_replicas").fetchone()[0])
    # the simulator's own 'ettr while elapsed' (main) or 'ettr' (new definition) is the same quantity
    assert r["ettr"] == pytest.approx(summary.get("ettr_elapsed", summary["ettr"]), rel=1e-12)
    assert r["completed"]  # the demo finishes early, so there is an idle tail...
    lost = (
        sum(r["goodput_breakdown_gpu_h"][k] for k in ("lost_rework", "restart", "waiting"))
        * r["gpu_hour_usd"]
    )
    assert r["cost_usd"]["lost"] == pytest.approx(lost)  # ...and it is not in the lost cost
    assert r["cost_usd"]["lost"] < r["cost_usd"]["released_early"]
    assert r["interruptions"]["unexpected"] == sum(f["observed"] for f in r["failures"])


def test_failures_are_set_against_the_configs_rates(analysed):
    _, r = analysed
    names = {f["category"] for f in r["failures"]}
    assert set(r["interruptions"]["by_category"]) <= names
    for f in r["failures"]:
        assert f["expected"] is not None and f["interval_lo"] <= f["expected"] + 1 and f["interval_hi"] >= 0
        assert f["is_within"] == (f["interval_lo"] <= f["observed"] <= f["interval_hi"])
    planned_mtbf = r["planned_job_mtbf_h"]
    assert sum(f["expected"] for f in r["failures"]) == pytest.approx(
        r["job_wall_h"] / planned_mtbf, rel=1e-9
    )


def test_the_checkpoint_interval_is_judged_at_the_observed_mtbf(analysed):
    _, r = analysed
    ck = r["checkpoint"]
    assert ck["optimal_for_observed_mtbf_s"] == pytest.approx(
        optimal_interval_s(ck["write_s"], r["observed_job_mtbf_h"] * 3600)
    )
    assert ck["extra_gpu_h"] >= 0 and ck["extra_cost_usd"] == pytest.approx(
        ck["extra_gpu_h"] * r["gpu_hour_usd"]
    )
    topics = {rec["topic"] for rec in r["recommendations"]}
    assert {"checkpoint interval", "spares", "window length"} <= topics
    assert all(rec["figure"] for rec in r["recommendations"])


def test_data_and_gates_sections_come_from_the_catalog(analysed):
    _, r = analysed
    assert [g["gate"] for g in r["gates"]] == ["layout", "memory"]
    assert [g["passed"] for g in r["gates"]] == [True, False] and r["gates"][1]["summary"] == "too big"
    assert r["data"] == {"mixture": [], "rejections": []} or isinstance(r["data"]["mixture"], list)


def test_spares_that_ran_out_are_costed():
    events = pd.concat(
        [
            _events(),
            pd.DataFrame(
                {
                    "t_s": [40.0, 3640.0],
                    "kind": ["waiting_start", "waiting_end"],
                    "category": ["", ""],
                    "scope": ["", ""],
                    "node": [-1, -1],
                    "tokens_trained": [3.0, 3.0],
                    "detail": ["slots_without_node=2", ""],
                }
            ),
        ]
    )
    config = RecordedConfig.from_mapping({"cluster": {"gpus_per_node": 10, "nodes": 10, "failures": []}})
    r = window_figures(_summary(None), events, config)
    sp = r.spares
    assert sp.n_waits == 1 and sp.more_spare_nodes_needed == 2 and sp.spare_nodes == 2
    assert sp.waiting_for_spare_gpu_h == pytest.approx(3600 * 100 / 3600)
    assert sp.cost_of_more_usd == pytest.approx(2 * 10 * 100_000 / 3600 * 2.0)
    assert sp.would_pay is False  # 100 GPU-h of waiting is cheaper than two more nodes for the whole window


# -------------------------------------------------------------------------------------------- bad input


def _snapshot(root):
    return {p.relative_to(root): p.stat().st_mtime_ns for p in root.rglob("*")} if root.exists() else None


def test_a_missing_folder_is_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="no such workspace") as err:
        analysis_workspace(tmp_path / "nope")
    assert err.value.exit_code == 2 and "--workspace" in err.value.fix
    assert not (tmp_path / "nope").exists()


def test_an_empty_folder_is_bad_input_and_stays_empty(tmp_path):
    with pytest.raises(ConfigError, match="empty"):
        analysis_workspace(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_no_executed_window_is_bad_input_and_nothing_is_written(tmp_path):
    ws = empty_catalog(tmp_path / "w")
    before = _snapshot(ws.root)
    with pytest.raises(DataError, match="no executed window") as err:
        analysis_workspace(ws.root)
    assert err.value.exit_code == 2 and "campaign execute" in err.value.fix
    assert _snapshot(ws.root) == before


def test_an_older_catalog_is_bad_input_and_is_not_migrated(tmp_path):
    root = tmp_path / "old"
    root.mkdir()
    con = duckdb.connect(str(root / "campaign.duckdb"))
    con.execute(
        "CREATE TABLE gates (gate VARCHAR, passed BOOLEAN, config_digest VARCHAR, data_digest VARCHAR, "
        "details JSON, checked_at TIMESTAMPTZ)"
    )
    con.close()
    before = _snapshot(root)
    with pytest.raises(DataError, match="older campaign") as err:
        analysis_workspace(root)
    assert "schema version 1" in err.value.message and "executions" in err.value.message
    assert _snapshot(root) == before


def test_a_catalog_held_by_a_writer_is_busy_not_damaged(tmp_path):
    import subprocess
    import sys

    from campaign.analysis.catalog_sql import run_query
    from campaign.errors import WorkspaceBusy

    ws = empty_catalog(tmp_path / "w")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                "print('open', flush=True); time.sleep(60)"
            ),
            str(ws.catalog_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(WorkspaceBusy) as err:
            analysis_workspace(ws.root)
        assert err.value.exit_code == 4 and "another program" in err.value.message
        with pytest.raises(WorkspaceBusy):
            run_query(ws.root, "select 1")
    finally:
        holder.kill()
        holder.wait()


def test_a_window_that_trained_past_its_target_is_not_called_too_short():
    # sim.stop_at_target: false (the Llama 3 config): the job trains to the window's end, past the target
    summary = _summary(completion_s=None)
    r = window_figures(
        dataclasses.replace(summary, tokens_trained=summary.tokens_target * 1.2), _events(), None
    )
    advice = next(rec for rec in _recs(r) if rec["topic"] == "window length")
    assert "past its target" in advice["advice"] and "120%" in advice["figure"]

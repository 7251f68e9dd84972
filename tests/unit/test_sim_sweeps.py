"""Sweeps: parsing and bad input, the grid, the best row, and a checkpoint-interval sweep against Daly."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from campaign.errors import ConfigError
from campaign.sim import job_failure_rate_per_s, simulate_batch, summarise_replicas
from campaign.sim.best import mark_best, replica_outcomes
from campaign.sim.sweeps import (
    check_numeric_key,
    parse_sweep,
    sweep_grid,
    sweep_row,
    sweep_table_markdown,
)
from tests.helpers.sim_inputs import category, make_inputs


def test_parse_and_grid():
    a = parse_sweep("plan.checkpoint.interval_s=600, 1200,1800")
    assert a.key == "plan.checkpoint.interval_s" and a.values == (600, 1200, 1800)
    b = parse_sweep("plan.power_smoothing.floor_fraction=0.5,0.8")
    grid = sweep_grid([a, b])
    assert len(grid) == 6 and grid[0] == {
        "plan.checkpoint.interval_s": 600,
        "plan.power_smoothing.floor_fraction": 0.5,
    }
    assert grid[1]["plan.power_smoothing.floor_fraction"] == 0.8  # first axis slowest


@pytest.mark.parametrize(
    "spec,where,fix",
    [
        ("plan.checkpoint.interval_s=600,abc", "--sweep plan.checkpoint.interval_s", "numeric"),
        ("plan.checkpoint.interval_s", "--sweep", "dotted.key=v1"),
        ("plan.checkpoint.interval_s=1,1", "--sweep plan.checkpoint.interval_s", "once"),
        ("plan.checkpoint.interval_s=nan", "--sweep plan.checkpoint.interval_s", "finite"),
    ],
)
def test_bad_sweeps_name_the_key_and_the_fix(spec, where, fix):
    with pytest.raises(ConfigError) as err:
        parse_sweep(spec)
    assert str(err.value).startswith(where + ":") and fix in str(err.value)


def test_swept_key_must_exist_and_be_numeric():
    dump = {
        "name": "x",
        "plan": {"checkpoint": {"interval_s": "auto", "async": False}},
        "cluster": {"spare_nodes": 2},
    }
    check_numeric_key(dump, "cluster.spare_nodes")
    check_numeric_key(dump, "plan.checkpoint.interval_s")  # number-or-auto
    for key, needle in (
        ("plan.checkpoint.interval_x", "no such key"),
        ("name", "not a number"),
        ("plan.checkpoint.async", "not a number"),
    ):
        with pytest.raises(ConfigError) as err:
            check_numeric_key(dump, key)
        assert f"--sweep {key}:" in str(err.value) and needle in str(err.value)
    with pytest.raises(ConfigError):
        sweep_grid([parse_sweep("a.b=1"), parse_sweep("a.b=2")])


def _rows(values, inputs_for, replicas=6):
    rows, outcomes = [], []
    for i, v in enumerate(values):
        inputs = inputs_for(v)
        summaries = simulate_batch(inputs, range(replicas))
        rows.append(sweep_row(i, {"k": v}, summarise_replicas(summaries, inputs.window_s)))
        outcomes.append(replica_outcomes(summaries, inputs.window_s))
    return mark_best(rows, outcomes)


def test_best_is_most_likely_to_finish_then_highest_ettr():
    base = make_inputs(target_tokens=1.5e10, failures=(category("gpu", "gpu", 15.0, repair_h=36),))
    rows = _rows([0, 4], lambda s: dataclasses.replace(base, spare_nodes=s))
    assert sum(r["is_best"] for r in rows) == 1
    best = next(r for r in rows if r["is_best"])
    assert best["p_complete_in_window"] == max(r["p_complete_in_window"] for r in rows)
    table = sweep_table_markdown(rows)
    assert table.count("\n") == len(rows) + 1 and "**best**" in table


def test_a_checkpoint_interval_sweep_finds_its_optimum_within_15_percent_of_daly():
    # One failure stream (job MTBF 2 h), a 60-s blocking write, no maintenance or drift, an unfinished job;
    # common random numbers across intervals (same seeds). The simulated optimum is the peak of a parabola in
    # log(interval) fitted to mean ETTR over a grid symmetric in log around Daly's interval (on the exact renewal
    # curve this fit lands within 1% of the true optimum); tolerance 15% of Daly's interval.
    inputs = make_inputs(
        nodes=16,
        window_s=20 * 86_400.0,
        checkpoint_write_s=60.0,
        planned_per_day=0.0,
        diurnal_amplitude=0.0,
        failures=(category("bug", "job", 1.0, detect_s=60, restart_s=120, repair_h=0),),
        target_tokens=1e30,
    )
    rate = job_failure_rate_per_s(inputs)
    scale = (1 / 7200) / rate  # rescale the rate so the job MTBF is 2 h
    bug = inputs.failures[0].model_copy(update={"per_gpu_year": inputs.failures[0].per_gpu_year * scale})
    inputs = dataclasses.replace(inputs, failures=(bug,))
    mtbf, delta = 1.0 / job_failure_rate_per_s(inputs), 60.0
    assert mtbf == pytest.approx(7200, rel=1e-9)
    daly = (
        math.sqrt(2 * delta * mtbf) * (1 + math.sqrt(delta / (2 * mtbf)) / 3 + delta / (2 * mtbf) / 9) - delta
    )
    grid = np.geomspace(0.5, 2.0, 9) * daly
    rows = _rows(
        list(grid), lambda tau: dataclasses.replace(inputs, checkpoint_interval_s=float(tau)), replicas=40
    )
    ettr = np.array([r["ettr_mean"] for r in rows])
    a, b, _ = np.polyfit(np.log(grid), ettr, 2)
    assert a < 0
    optimum = math.exp(-b / (2 * a))
    assert optimum == pytest.approx(daly, rel=0.15)


def test_a_snapshot_sweep_ranks_by_the_share_that_reaches_the_target_not_by_ettr():
    # A snapshot window never completes (P(finish) 0 at every point): the ranking reads p_target_in_window, the
    # figure simulate and the schedule gate share, instead of falling through to ETTR.
    base = make_inputs(target_tokens=1.5e10, failures=(category("gpu", "gpu", 15.0, repair_h=36),))
    base = dataclasses.replace(base, stop_at_target=False)
    rows, outcomes = [], []
    for i, target in enumerate(
        (base.tokens_per_s * base.window_s * 2.0, base.tokens_per_s * base.window_s * 0.03)
    ):
        inputs = dataclasses.replace(base, target_tokens=target)
        summaries = simulate_batch(inputs, range(4))
        rows.append(
            sweep_row(i, {"k": i}, summarise_replicas(summaries, inputs.window_s, stop_at_target=False))
        )
        outcomes.append(replica_outcomes(summaries, inputs.window_s))
    assert [r["p_complete_in_window"] for r in rows] == [0.0, 0.0]
    assert [r["p_target_in_window"] for r in rows] == [0.0, 1.0]
    assert [r["window_suffices"] for r in rows] == [False, True]
    # a higher ETTR does not outrank reaching the target
    outcomes[0] = dataclasses.replace(outcomes[0], ettr_mean=tuple(e + 0.1 for e in outcomes[1].ettr_mean))
    assert [r["is_best"] for r in mark_best(rows, outcomes)] == [False, True]
    table = sweep_table_markdown(mark_best(rows, outcomes))
    assert "P(target)" in table and "too short" in table and "suffices" in table

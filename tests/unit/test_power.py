"""Power levels, the exact 1-s series, the ramp limiter and the floor, alone and inside the simulator."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from campaign.sim import (
    COMM_POWER_FRACTION,
    COMPUTE_POWER_FRACTION,
    one_second_series,
    power_levels,
    ramp_delay_s,
    simulate,
)
from campaign.sim.power import rate_limited_curve, sampled_power, step_curve
from tests.helpers.sim_inputs import make_inputs


def test_phase_levels_follow_the_published_trace_fractions():
    inputs = make_inputs(comm_fraction=0.25)
    levels = power_levels(inputs)
    tdp = inputs.gpu_tdp_w
    assert 0.83 <= COMPUTE_POWER_FRACTION <= 0.92 and 0.24 <= COMM_POWER_FRACTION <= 0.33  # Choukse et al.
    assert levels.running_gpu_w == pytest.approx(0.75 * 0.9 * tdp + 0.25 * 0.3 * tdp)
    assert levels.checkpoint_gpu_w == inputs.gpu_idle_w and levels.idle_gpu_w == inputs.gpu_idle_w


def test_floor_lifts_troughs_and_checkpoints_but_not_idle():
    levels = power_levels(make_inputs(comm_fraction=0.5, floor_fraction=0.6))
    tdp = 700.0
    assert levels.running_gpu_w == pytest.approx(0.5 * 0.9 * tdp + 0.5 * 0.6 * tdp)
    assert levels.checkpoint_gpu_w == pytest.approx(0.6 * tdp)
    assert levels.idle_gpu_w == 90.0


def test_facility_power_is_it_power_times_pue():
    levels = power_levels(make_inputs(pue=1.25))
    mw = levels.facility_mw(job_nodes_up=10, job_gpu_w=500.0, idle_nodes=2)
    expected = (10 * (8 * 500 + 2800) + 2 * (8 * 90 + 2800)) * 1.25 / 1e6
    assert mw == pytest.approx(expected, rel=1e-12)


def test_one_second_series_is_the_exact_interval_mean_of_a_step_function():
    curve = step_curve(np.array([0.0, 2.5, 4.0]), np.array([0.0, 10.0, 4.0]), end_s=6.5)
    series = one_second_series(curve)
    assert series.tolist() == pytest.approx([0.0, 0.0, 5.0, 10.0, 4.0, 4.0, 4.0])
    assert curve.energy_mwh * 3600 == pytest.approx(1.5 * 10 + 2.5 * 4)
    sampled = sampled_power(curve, 2.0)
    assert sampled.t_s.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert sampled.power_mw.tolist() == pytest.approx([0.0, 7.5, 4.0, 4.0])


def test_rate_limiter_caps_every_second_to_second_change_and_holds_falls_up():
    t = np.array([0.0, 10.0, 30.0])
    mw = np.array([2.0, 12.0, 2.0])
    plain = step_curve(t, mw, 60.0)
    limited = rate_limited_curve(t, mw, 60.0, ramp_mw_per_s=1.0, start_mw=2.0)
    series = one_second_series(limited)
    assert np.abs(np.diff(series)).max() <= 1.0 + 1e-9
    assert series.max() == pytest.approx(12.0)  # 10 s of ramp, then 10 s at the target
    # Rising is slowed (less energy), falling is held up (more energy): same ramps, so equal here.
    assert limited.energy_mwh == pytest.approx(plain.energy_mwh, rel=1e-12)
    held = rate_limited_curve(np.array([0.0, 5.0]), np.array([12.0, 2.0]), 60.0, 0.5, start_mw=12.0)
    assert held.energy_mwh > step_curve(np.array([0.0, 5.0]), np.array([12.0, 2.0]), 60.0).energy_mwh


def test_ramp_delay_is_half_the_ramp_duration():
    assert ramp_delay_s(10.0, 2.0) == pytest.approx(2.5)
    assert ramp_delay_s(10.0, None) == 0.0 and ramp_delay_s(-3.0, 1.0) == 0.0


def test_simulated_power_stays_between_idle_and_training_levels():
    inputs = make_inputs()
    result = simulate(inputs, 0)
    levels = power_levels(inputs)
    top = levels.facility_mw(inputs.nodes, levels.running_gpu_w, inputs.spare_nodes)
    p = result.summary.power_mw
    assert p["peak"] == pytest.approx(top, rel=1e-9)
    assert 0 < p["min"] < p["mean"] < p["peak"]
    series = one_second_series(result.power_curve)
    assert series.size == int(inputs.window_s)
    assert series.mean() == pytest.approx(p["mean"], rel=1e-9)
    assert result.summary.energy_mwh == pytest.approx(series.sum() / 3600, rel=1e-9)
    # The stored series is the mean over each power_sample_s interval.
    assert len(result.power) == int(inputs.window_s / inputs.power_sample_s)
    assert result.power.power_mw.iloc[0] == pytest.approx(series[:60].mean(), rel=1e-12)


def test_ramp_limit_bounds_the_series_and_its_lost_time_is_not_productive():
    inputs = make_inputs(planned_per_day=0.0)
    free = simulate(inputs, 0).summary
    limited = simulate(dataclasses.replace(inputs, ramp_mw_per_s=0.01), 0).summary
    assert limited.power_mw["max_ramp_mw_per_s"] <= 0.01 + 1e-9 < free.power_mw["max_ramp_mw_per_s"]
    # The ramp's lost seconds go to the stop they follow (checkpoint or restart), not to productive time.
    assert limited.job_time_s["productive"] < free.job_time_s["productive"]
    assert limited.ettr < free.ettr
    stops = ("checkpoint", "restart")
    assert sum(limited.job_time_s[k] for k in stops) > sum(free.job_time_s[k] for k in stops)
    assert limited.tokens_trained < free.tokens_trained
    assert limited.tokens_trained > 0.97 * free.tokens_trained  # "a little": under 3% here


def test_floor_costs_energy_and_shrinks_checkpoint_swings():
    # No failures or maintenance: the only swings left are the checkpoint dips the floor is meant to fill.
    inputs = make_inputs(failures=(), planned_per_day=0.0)
    free = simulate(inputs, 0).summary
    floored = simulate(dataclasses.replace(inputs, floor_fraction=0.8), 0).summary
    assert floored.energy_mwh > free.energy_mwh
    assert floored.cost_usd["energy"] > free.cost_usd["energy"]
    assert floored.power_mw["max_ramp_mw_per_s"] < 0.5 * free.power_mw["max_ramp_mw_per_s"]
    assert floored.power_mw["min"] > free.power_mw["min"]
    assert floored.tokens_trained == pytest.approx(free.tokens_trained, rel=1e-12)  # no speed cost

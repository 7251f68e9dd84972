"""The facility power notice: hourly profile, swings, oscillation by FFT, smoothing trade-off."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from campaign.sim.power import PowerCurve, step_curve
from campaign.sim.power_notice import (
    dominant_oscillation,
    hourly_mw,
    notice_markdown,
    power_notice,
    swings_mw,
)
from tests.helpers.sim_inputs import make_inputs


def test_hourly_mw_is_the_exact_mean_of_each_hour():
    curve = step_curve(np.array([0.0, 1800.0, 7200.0]), np.array([2.0, 4.0, 1.0]), 3 * 3600.0)
    assert hourly_mw(curve).tolist() == pytest.approx([3.0, 4.0, 1.0])


def test_swings_are_net_changes_over_monotone_runs():
    curve = step_curve(np.array([0.0, 10, 20, 30, 40]), np.array([1.0, 3.0, 5.0, 2.0, 2.5]), 50.0)
    assert swings_mw(curve).tolist() == pytest.approx([4.0, -3.0, 0.5])
    ramped = PowerCurve(
        np.array([0.0, 2.0, 10.0]), np.array([1.0, 3.0, 3.0]), np.array([1.0, 0.0, -0.5]), 12.0
    )
    assert swings_mw(ramped).tolist() == pytest.approx([2.0, -1.0])


def test_dominant_oscillation_finds_a_square_wave_period_and_amplitude():
    # 5 MW dips of 30 s every 300 s for a day: the fundamental of a pulse train is at 1/300 Hz with amplitude
    # 2 x depth x duty x sinc(duty) = 2 x 5 x 0.1 x sin(pi 0.1) / (pi 0.1) ~ 0.984 MW. Tolerance 2%.
    starts = np.arange(0.0, 86_400.0, 300.0)
    t = np.sort(np.concatenate((starts, starts + 30.0)))
    mw = np.tile([5.0, 10.0], starts.size)
    curve = step_curve(t, mw, 86_400.0)
    freq, amp = dominant_oscillation(curve, fft_days=1.0)
    assert freq == pytest.approx(1 / 300, rel=1e-3)
    assert amp == pytest.approx(2 * 5 * 0.1 * math.sin(math.pi * 0.1) / (math.pi * 0.1), rel=0.02)


def test_notice_has_both_settings_and_a_tradeoff_row_per_floor():
    inputs = make_inputs(ramp_mw_per_s=0.05)
    notice = power_notice(inputs, replicas=3, floors=(0.5, 0.9))
    for name in ("without_smoothing", "with_smoothing"):
        n = notice[name]
        hours = math.ceil(inputs.window_s / 3600)
        assert all(len(n["hourly_mw"][p]) == hours for p in ("p10", "p50", "p90"))
        assert np.all(np.array(n["hourly_mw"]["p10"]) <= np.array(n["hourly_mw"]["p90"]) + 1e-12)
        assert n["largest_swing_mw"] > 0 and n["swings_of_that_size_per_day"] >= 1 / 2
    assert notice["with_smoothing"]["steepest_ramp_mw_per_s"] <= 0.05 + 1e-9
    assert notice["without_smoothing"]["steepest_ramp_mw_per_s"] > 0.05
    rows = notice["smoothing_tradeoff"]
    assert [r["floor_fraction"] for r in rows] == [0.5, 0.9]
    assert rows[1]["energy_added_mwh"] > rows[0]["energy_added_mwh"] > 0  # a higher floor burns more
    assert all(r["ramp_removed_mw_per_s"] > 0 for r in rows)
    text = notice_markdown(notice, "test")
    assert "Smoothing trade-off" in text and text.count("| 0.") >= 2


def test_notice_without_configured_smoothing_has_one_setting():
    notice = power_notice(
        dataclasses.replace(make_inputs(), ramp_mw_per_s=None, floor_fraction=None), replicas=1, floors=(0.7,)
    )
    assert "with_smoothing" not in notice and len(notice["smoothing_tradeoff"]) == 1

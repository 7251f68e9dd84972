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
from campaign.sim.summary import Interruptions
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


def test_named_swings_find_a_known_checkpoint_dip_apart_from_the_outages():
    # A synthetic day: 20 MW training, a 7.8 MW dip for 3 s every 252 s (the checkpoints: 342 a day), and two
    # outages where the job stops for 30 min (down to 2 MW) and comes back. The checkpoint cadence is named with
    # its size, duration, period and count; the outages apart, with theirs. No FFT: nothing leaks.
    from campaign.sim.power_notice import dips, named_swings

    day = 86_400.0
    t, mw = [0.0], [20.0]
    outages = [(30_000.0, 31_800.0), (60_000.0, 61_800.0)]
    for start in np.arange(249.0, day, 252.0):
        if any(a - 252.0 < start < b for a, b in outages):
            continue
        t += [start, start + 3.0]
        mw += [12.2, 20.0]
    for a, b in outages:
        t += [a, b]
        mw += [2.0, 20.0]
    order = np.argsort(t, kind="stable")
    curve = step_curve(np.array(t)[order], np.array(mw)[order], day)
    assert len(dips(curve)) == (len(t) - 1) // 2
    inputs = dataclasses.replace(
        make_inputs(), window_s=day, checkpoint_write_s=3.0, ramp_mw_per_s=None, floor_fraction=None
    )
    swings = named_swings([curve], inputs, [Interruptions(unexpected=1, planned=1, by_category={})])
    checkpoint = swings["periodic"][0]
    assert checkpoint["cause"] == "checkpoint cadence"
    assert checkpoint["size_mw"] == pytest.approx(7.8) and checkpoint["duration_s"] == pytest.approx(3.0)
    assert checkpoint["period_s"] == pytest.approx(252.0)
    assert checkpoint["per_day"] == pytest.approx((len(t) - 1) // 2 - 2)  # every dip but the two outages
    stops, restarts = swings["non_periodic"]
    assert stops["size_mw"] == pytest.approx(18.0) and stops["duration_s"] == pytest.approx(1800.0)
    assert stops["per_day"] == pytest.approx(2.0) and stops["failures_per_day"] == pytest.approx(1.0)
    assert restarts["size_mw"] == pytest.approx(18.0) and restarts["per_day"] == pytest.approx(2.0)
    assert [r["cause"] for r in swings["periodic"]] == [
        "checkpoint cadence",
        "pipeline phases",
        "diurnal drift",
    ]


def test_a_floor_removes_the_routine_dip_but_not_the_drop_when_the_job_stops():
    # The trade-off says what a floor removes (the checkpoint dip shrinks) and what it cannot (the drop when the
    # job stops stays, and grows: it falls from a higher level); the ramp limit is a row of its own.
    inputs = make_inputs(ramp_mw_per_s=0.05)
    notice = power_notice(inputs, replicas=2, floors=(0.5, 0.9))
    bare = notice["without_smoothing"]["swings"]
    rows = notice["smoothing_tradeoff"]
    assert all(r["routine_swing_removed_mw"] > 0 for r in rows)
    assert rows[1]["routine_swing_mw"] < rows[0]["routine_swing_mw"] < bare["periodic"][0]["size_mw"]
    assert all(r["stop_swing_mw"] >= bare["non_periodic"][0]["size_mw"] for r in rows)
    ramp_row = notice["ramp_limit_row"]
    assert ramp_row["floor_fraction"] is None and ramp_row["ramp_mw_per_s"] == 0.05
    assert ramp_row["steepest_ramp_mw_per_s"] <= 0.05 and ramp_row["ramp_removed_mw_per_s"] > 0
    text = notice_markdown(notice, "test")
    assert "ramp limit 0.05 MW/s, no floor" in text and "checkpoint cadence" in text
    assert "Dominant oscillation" not in text and "what it removes" in text

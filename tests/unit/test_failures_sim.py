"""Fitted profiles in the simulator: per-job-hour rates that do not grow with the job, rates drawn from their
posterior per replica (both implementations alike), and the window verdict saying what that uncertainty costs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from campaign.calendar.window_length import WindowLength, with_rate_uncertainty
from campaign.config import FailureCategoryConfig
from campaign.sim import simulate
from campaign.sim.failures import category_rate_per_s, draw_arrivals, replica_rate_per_s
from campaign.sim.fast import simulate_summary
from campaign.sim.simulator import simulate_summary_interpreted
from tests.helpers.sim_inputs import DAY, FAILURES, assert_same, make_inputs

SOFTWARE = FailureCategoryConfig(
    name="software",
    scope="job",
    per_job_hour=0.25,
    detect_s=300,
    restart_s=480,
    repair_h=0,
    observed={"failures": 5, "exposure_h": 20.0},
)
HBM = FailureCategoryConfig(
    name="hbm",
    scope="gpu",
    per_gpu_year=8.76,
    detect_s=60,
    restart_s=480,
    repair_h=48,
    observed={"failures": 30, "exposure_h": 30_000.0},
)


def test_a_per_job_hour_rate_does_not_grow_with_the_job():
    small, large = make_inputs(nodes=4, failures=(SOFTWARE,)), make_inputs(nodes=64, failures=(SOFTWARE,))
    assert (
        category_rate_per_s(SOFTWARE, small)
        == category_rate_per_s(SOFTWARE, large)
        == pytest.approx(0.25 / 3600)
    )
    assert category_rate_per_s(HBM, large) == pytest.approx(16 * category_rate_per_s(HBM, small))


def test_each_replica_draws_an_observed_rate_from_its_posterior_and_a_known_rate_stays_put():
    inputs = make_inputs(failures=(SOFTWARE,))
    rng = np.random.default_rng(0)
    draws = np.array([replica_rate_per_s(SOFTWARE, inputs, rng) for _ in range(20_000)]) * 3600
    # Gamma(5 + 1/2, 20 h): mean 0.275, sd 0.117 per job-hour.
    assert draws.mean() == pytest.approx(5.5 / 20, rel=0.02)
    assert draws.std() == pytest.approx(np.sqrt(5.5) / 20, rel=0.03)
    fixed = dataclasses.replace(inputs, rate_uncertainty=False)
    assert replica_rate_per_s(SOFTWARE, fixed, rng) == pytest.approx(0.25 / 3600)
    known = SOFTWARE.model_copy(update={"observed": None})
    assert replica_rate_per_s(known, inputs, rng) == pytest.approx(0.25 / 3600)


def test_a_drawn_rate_leaves_the_other_categories_streams_alone():
    plain = make_inputs(failures=FAILURES)
    fitted = make_inputs(failures=(*FAILURES[:2], SOFTWARE, *FAILURES[2:]))
    _, before = draw_arrivals(plain, 3)
    _, after = draw_arrivals(fitted, 3)
    for a in before[:2]:
        assert np.array_equal(a.t_s, next(b for b in after if b.name == a.name).t_s)


@pytest.mark.parametrize("replica", [0, 1, 2])
def test_both_implementations_agree_with_per_job_and_posterior_rates(replica):
    inputs = make_inputs(failures=(*FAILURES, SOFTWARE, HBM), window_s=3 * DAY)
    slow = simulate(inputs, replica).summary
    assert_same(slow, simulate_summary(inputs, replica))
    assert_same(slow, simulate_summary_interpreted(inputs, replica))


def _verdict(p90_days: float | None) -> WindowLength:
    return WindowLength(10.0, 100, 0.95, p90_days, 9.8, 3.0, 30.0, 90.0, 0.0, 0.0, False, "ok", "window ok")


def test_the_window_verdict_says_how_much_of_its_p90_comes_from_not_knowing_the_rates():
    known = [8.5 * DAY] * 95 + [9.0 * DAY] * 5
    verdict = with_rate_uncertainty(_verdict(9.5), known, 10 * DAY)
    assert verdict.p90_known_rates_days == 8.5
    assert "+24.0 h of the p90 comes from not knowing the failure rates (p90 8.50 days" in verdict.message
    unfinished = with_rate_uncertainty(_verdict(None), [None] * 100, 10 * DAY)
    assert (
        unfinished.p90_known_rates_days is None
        and "taken as known the p90 is beyond the window" in unfinished.message
    )

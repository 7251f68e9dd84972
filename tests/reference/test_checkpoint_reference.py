"""Checkpoint interval and reliability models against published figures (failures.md).

Daly 2006 worked cases (delta = 5 min, R = 10 min); Llama 3 405B interruption counts (54-day snapshot, 419
unexpected on an assumed 16,384 GPUs) and "higher than 90%" effective training time.
"""

import math

import pytest

from campaign.config import load_config
from campaign.plan import (
    daly_expected_wall_s,
    daly_interval_s,
    job_failure_rate_per_h,
    make_plan,
    young_interval_s,
)
from tests.helpers.paths import LLAMA

MIN = 60.0
HOUR = 3600.0


# Daly's worked cases: published optimum (minutes), tolerance 1 %.
@pytest.mark.parametrize("mtbf_s, published_min", [(24 * HOUR, 117.0), (6 * HOUR, 57.0), (15 * MIN, 9.1)])
def test_daly_worked_cases(mtbf_s, published_min):
    got = daly_interval_s(5 * MIN, mtbf_s) / MIN
    assert got == pytest.approx(published_min, rel=0.01)


# Young's first-order optimum is within 6 % of Daly's when M >> delta (24 h, 6 h) and overestimates by a third
# when M is only 3 x delta (15 min) — the case Daly's higher-order terms exist for.
@pytest.mark.parametrize("mtbf_s, rel", [(24 * HOUR, 0.03), (6 * HOUR, 0.06)])
def test_young_close_to_daly_when_mtbf_is_long(mtbf_s, rel):
    assert young_interval_s(5 * MIN, mtbf_s) == pytest.approx(daly_interval_s(5 * MIN, mtbf_s), rel=rel)


def test_young_overestimates_when_mtbf_is_short():
    young, daly = young_interval_s(5 * MIN, 15 * MIN), daly_interval_s(5 * MIN, 15 * MIN)
    assert 1.25 < young / daly < 1.45


@pytest.mark.parametrize("mtbf_s", [24 * HOUR, 6 * HOUR, 15 * MIN])
def test_daly_optimum_minimises_daly_wall_time(mtbf_s):
    """Self-consistency: Daly's interval is within 1 % (in wall time) of the numerical minimum of his T_w."""
    delta, restart, solve = 5 * MIN, 10 * MIN, 100 * HOUR
    best = min(
        daly_expected_wall_s(solve, tau, delta, restart, mtbf_s)
        for tau in [x * 1.0 for x in range(10, 40000, 5)]
    )
    at_daly = daly_expected_wall_s(solve, daly_interval_s(delta, mtbf_s), delta, restart, mtbf_s)
    assert at_daly == pytest.approx(best, rel=0.01)


def test_daly_wall_time_without_failures_is_work_plus_writes():
    """Limit M -> infinity: T_w -> T_s (tau + delta) / tau (tolerance 1e-4)."""
    got = daly_expected_wall_s(1000 * HOUR, HOUR, 5 * MIN, 10 * MIN, 1e12)
    assert got == pytest.approx(1000 * HOUR * (HOUR + 5 * MIN) / HOUR, rel=1e-4)


def test_daly_wall_time_first_order_expansion():
    """Expanding T_w to first order in 1/M gives T_s [1 + delta/tau + (tau/2 + delta + R)/M] (tolerance 0.5 %)."""
    tau, delta, restart, mtbf, solve = 30 * MIN, 1 * MIN, 10 * MIN, 200 * HOUR, 100 * HOUR
    first_order = solve * (1 + delta / tau) * (1 + (tau + delta) / (2 * mtbf) + restart / mtbf)
    assert daly_expected_wall_s(solve, tau, delta, restart, mtbf) == pytest.approx(first_order, rel=0.005)


def test_llama3_job_mtbf_from_config():
    """failures.md: 419 unexpected interruptions in 54 days (1,296 h) on 16,384 GPUs -> 3.09 h; tolerance 2 %."""
    cfg = load_config(LLAMA).config
    rate = job_failure_rate_per_h(cfg.cluster)
    assert 1 / rate == pytest.approx(3.09, rel=0.02)
    assert rate * 1296 == pytest.approx(419, rel=0.02)


def test_llama3_expected_ettr_near_published():
    """Llama 3 §3.3.4: effective training time "higher than 90%". The config's detect/restart times are
    assumptions (12-20 min per interruption), so the tolerance is the band 0.87-0.95."""
    plan = make_plan(load_config(LLAMA).config)
    assert 0.87 <= plan.expected_ettr <= 0.95
    assert math.isclose(plan.job_mtbf_h, 3.09, rel_tol=0.02)

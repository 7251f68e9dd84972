"""The plan against published production runs it was never fitted to (tests/oracles/production_runs.py).

Uncalibrated, the band `step_time_range_s` must contain each held-out run's published step time with high/low at
most 1.5; calibrated on one measured run, the same model and stack at its other scales must come within 5 % of the
published step time. Figures and the split: docs/plan-model.md#production-runs.
"""

from __future__ import annotations

import pytest

from campaign.plan import make_plan
from campaign.plan.calibration import CALIBRATED_EXTRAPOLATION, UNCALIBRATED_BAND
from tests.oracles.production_runs import FITTED, HELD_OUT, all_production_runs, with_measured

RUNS = all_production_runs()
BY_FAMILY: dict[str, list] = {}
for _run in RUNS:
    BY_FAMILY.setdefault(_run.family, []).append(_run)


def test_the_split_covers_every_family_once() -> None:
    assert sorted(FITTED + HELD_OUT) == sorted(BY_FAMILY)
    assert not set(FITTED) & set(HELD_OUT)


def test_band_is_at_most_one_and_a_half_wide() -> None:
    low, high = UNCALIBRATED_BAND
    assert 0 < low < 1 < high
    assert high / low <= 1.5


def test_band_holds_every_fitted_ratio_and_no_more_than_3_percent_beyond() -> None:
    """The band is the fitted runs' extreme ratios widened by 3 %: a stale constant fails here."""
    ratios = [r.step_s / make_plan(r.config).step_time_s for f in FITTED for r in BY_FAMILY[f]]
    low, high = UNCALIBRATED_BAND
    assert low <= min(ratios) and max(ratios) <= high
    assert min(ratios) * 0.97 == pytest.approx(low, abs=0.01)
    assert max(ratios) * 1.03 == pytest.approx(high, abs=0.01)


@pytest.mark.parametrize("run", [r for f in HELD_OUT for r in BY_FAMILY[f]], ids=lambda r: r.name)
def test_uncalibrated_band_contains_held_out_runs(run) -> None:
    plan = make_plan(run.config)
    low, high = plan.step_time_range_s
    assert low <= run.step_s <= high, (run.name, low, run.step_s, high)
    assert high / low <= 1.5
    assert plan.calibration is None and plan.basis.startswith("uncalibrated")


@pytest.mark.parametrize("family", sorted(BY_FAMILY), ids=str)
def test_calibrated_on_one_run_predicts_the_other_scales_within_5_percent(family: str) -> None:
    runs = BY_FAMILY[family]
    if len(runs) < 2:
        pytest.skip(f"{family} publishes one scale")
    for measured in runs:
        for target in runs:
            if target is measured or target.config.model.seq_len != measured.config.model.seq_len:
                continue
            plan = make_plan(with_measured(target, measured))
            error = plan.step_time_s / target.step_s - 1.0
            assert abs(error) <= 0.05, (measured.name, target.name, error)
            low, high = plan.step_time_range_s
            assert low <= target.step_s <= high
            assert high / low == pytest.approx(
                (1 + CALIBRATED_EXTRAPOLATION) / (1 - CALIBRATED_EXTRAPOLATION)
            )
            assert plan.calibration is not None
            (row,) = plan.calibration.rows
            assert row.measured_s == measured.step_s and abs(row.error) < 1e-9

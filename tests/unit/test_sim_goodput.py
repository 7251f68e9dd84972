"""ETTR, window utilisation and the goodput buckets (campaign.goodput) as the simulator reports them.

Ciw-style: exact cases without failures, Hypothesis properties, statistics over seeds.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from campaign.goodput import (
    ALL_KEYS,
    BUCKET_KEYS,
    buckets_sum_gpu_h,
    ettr,
    goodput_buckets_gpu_h,
    window_utilisation,
)
from campaign.sim import simulate, summarise_replicas
from tests.helpers.sim_inputs import DAY, PROPERTY_SETTINGS, category, input_cases, make_inputs


def quiet(**overrides):
    """No failures, no maintenance, no diurnal drift: only checkpoints stand between the job and 100%."""
    base = {"failures": (), "planned_per_day": 0.0, "diurnal_amplitude": 0.0, "ramp_mw_per_s": None}
    base.update(overrides)
    return make_inputs(**base)


# ------------------------------------------------------------------------------------ the pure definitions


def test_definitions_on_a_hand_worked_case():
    # 10 job GPUs + 2 spares, a 10-h window; the job ran 6 h (5 productive, 0.5 checkpoint, 0.5 restart).
    seconds = {
        "productive": 5 * 3600,
        "lost_rework": 0.0,
        "checkpoint": 1800,
        "restart": 1800,
        "waiting": 0.0,
    }
    b = goodput_buckets_gpu_h(seconds, 10, 2, 10 * 3600, 6 * 3600)
    assert set(b) == set(ALL_KEYS)
    assert b["productive"] == 50 and b["checkpoint"] == 5 and b["restart"] == 5
    assert b["idle_spares"] == 12 and b["idle_released"] == 48 and b["idle"] == 60
    assert buckets_sum_gpu_h(b) == 120
    assert ettr(5 * 3600, 6 * 3600) == pytest.approx(5 / 6)
    assert window_utilisation(b["productive"], 10, 2, 10 * 3600) == pytest.approx(50 / 120)


# ------------------------------------------------------------------------------- no failures: exact ETTR


@pytest.mark.parametrize("interval_s,write_s,k", [(1800.0, 30.0, 20), (600.0, 5.0, 100), (3600.0, 120.0, 7)])
def test_no_failures_finishing_job_ettr_is_one_minus_checkpoint_overhead_exactly(interval_s, write_s, k):
    # Target = k whole intervals of work: every segment is one interval + one write.
    inputs = quiet(checkpoint_interval_s=interval_s, checkpoint_write_s=write_s, window_s=10 * DAY)
    inputs = dataclasses.replace(inputs, target_tokens=inputs.tokens_per_s * interval_s * k)
    s = simulate(inputs, 0).summary
    assert s.completed
    assert s.ettr == pytest.approx(1.0 - write_s / (interval_s + write_s), rel=1e-12)
    assert s.completion_s == pytest.approx(k * (interval_s + write_s), rel=1e-12)


def test_no_failures_finishing_job_with_a_short_last_segment():
    interval_s, write_s, work_s = 1800.0, 30.0, 1800.0 * 12.5
    inputs = quiet(checkpoint_interval_s=interval_s, checkpoint_write_s=write_s, window_s=10 * DAY)
    inputs = dataclasses.replace(inputs, target_tokens=inputs.tokens_per_s * work_s)
    s = simulate(inputs, 0).summary
    assert s.ettr == pytest.approx(work_s / (work_s + 13 * write_s), rel=1e-12)


def test_no_failures_unfinished_job_keeps_whole_cycles_and_loses_the_open_one():
    interval_s, write_s, window_s = 1800.0, 30.0, 1.0 * DAY
    s = simulate(
        quiet(checkpoint_interval_s=interval_s, checkpoint_write_s=write_s, window_s=window_s), 0
    ).summary
    cycles = math.floor(window_s / (interval_s + write_s))
    assert s.ettr == pytest.approx(cycles * interval_s / window_s, rel=1e-12)
    assert s.job_time_s["lost_rework"] == pytest.approx(window_s - cycles * (interval_s + write_s), rel=1e-9)


def test_ramp_limit_time_after_a_checkpoint_is_checkpoint_time_not_productive():
    inputs = quiet(
        checkpoint_interval_s=1800.0, checkpoint_write_s=30.0, window_s=1.0 * DAY, ramp_mw_per_s=0.005
    )
    free = simulate(dataclasses.replace(inputs, ramp_mw_per_s=None), 0).summary
    s = simulate(inputs, 0).summary
    from campaign.sim import power_levels

    levels = power_levels(inputs)
    rise = (
        inputs.nodes
        * levels.gpus_per_node
        * (levels.running_gpu_w - levels.checkpoint_gpu_w)
        * inputs.pue
        / 1e6
    )
    delay = rise / (2 * 0.005)  # campaign.sim.power.ramp_delay_s
    assert delay > 1.0
    n = s.n_checkpoints
    assert s.job_time_s["checkpoint"] == pytest.approx(n * (30.0 + delay), abs=30.0 + delay)
    assert s.job_time_s["productive"] < free.job_time_s["productive"]
    assert s.ettr < free.ettr


# ------------------------------------------------------------------------------------------- properties


@PROPERTY_SETTINGS
@given(inputs=input_cases, replica=st.integers(0, 3), finishing=st.booleans())
def test_buckets_always_sum_to_every_gpu_hour_of_the_window(inputs, replica, finishing):
    if finishing:
        inputs = dataclasses.replace(inputs, target_tokens=inputs.tokens_per_s * inputs.window_s * 0.3)
    s = simulate(inputs, replica).summary
    b = s.goodput_breakdown_gpu_h
    total = (s.gpus + s.spare_gpus) * s.window_s / 3600.0
    assert set(b) == set(ALL_KEYS)
    assert math.fsum(b[k] for k in BUCKET_KEYS) == pytest.approx(total, rel=1e-12)
    assert b["idle"] == pytest.approx(b["idle_spares"] + b["idle_released"], rel=1e-12)
    assert min(b.values()) >= -1e-9 * total
    if not s.completed:
        assert b["idle_released"] == 0.0
    assert s.window_utilisation == pytest.approx(b["productive"] / total, rel=1e-12)


@PROPERTY_SETTINGS
@given(inputs=input_cases, replica=st.integers(0, 3), extra=st.integers(1, 8))
def test_more_spares_never_lower_ettr_of_an_unfinished_job(inputs, replica, extra):
    # Healthy nodes only: lemons are drawn among nodes + spares (campaign.sim.failures.lemon_node_ids), so another
    # spare count is another draw of which node is the lemon, and one replica's ETTR may go either way (5 nodes,
    # 1 lemon at 3x, seed 0, replica 2: the lemon is node 2 with one spare, node 3 with two, ETTR 0.9965 then 0.9931).
    inputs = dataclasses.replace(inputs, target_tokens=1e30, lemon_nodes=0)
    few = simulate(inputs, replica).summary.ettr
    more = simulate(dataclasses.replace(inputs, spare_nodes=inputs.spare_nodes + extra), replica).summary.ettr
    assert more >= few - 1e-12


def test_more_spares_never_lower_mean_ettr_of_a_finishing_job():
    # Node failures with slow repair: spares decide how long the job waits. 30 replicas, common random numbers.
    inputs = make_inputs(
        window_s=4 * DAY,
        failures=(category("gpu", "gpu", 15.0, detect_s=60, restart_s=300, repair_h=36),),
        planned_per_day=0.0,
    )
    inputs = dataclasses.replace(inputs, target_tokens=inputs.tokens_per_s * 1.5 * DAY)
    means = []
    for spares in (0, 1, 2, 4, 8):
        x = dataclasses.replace(inputs, spare_nodes=spares)
        means.append(np.mean([simulate(x, r).summary.ettr for r in range(30)]))
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(means))
    assert means[-1] > means[0]  # the case is not vacuous: spares matter here


def test_interruptions_scale_linearly_with_gpus():
    # Unfinished job, 200 replicas each; the ratio of means is 2 within 3 standard errors of the Poisson counts.
    base = make_inputs(nodes=16, target_tokens=1e30)
    n = 200
    small = np.array([simulate(base, r).summary.interruptions.unexpected for r in range(n)])
    big = np.array(
        [simulate(dataclasses.replace(base, nodes=32), r).summary.interruptions.unexpected for r in range(n)]
    )
    ratio = big.mean() / small.mean()
    se = ratio * math.sqrt(1 / (big.mean() * n) + 1 / (small.mean() * n))  # delta method, Poisson counts
    assert abs(ratio - 2.0) < 3 * se


def test_summary_carries_the_definitions_and_utilisation():
    inputs = make_inputs()
    out = summarise_replicas([simulate(inputs, r).summary for r in range(3)], inputs.window_s)
    assert "job wall time" in out["definitions"]["ettr"]
    assert set(out["window_utilisation"]) == {"mean", "p10", "p50", "p90"}
    assert set(out["goodput_breakdown_gpu_h"]) == set(ALL_KEYS)

"""Unit tests of checkpoint size, save time, interval and ETTR (campaign.plan.checkpointing, reliability)."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from campaign.config import CheckpointConfig, FailureCategoryConfig, load_config
from campaign.plan import (
    checkpoint_size_gb,
    checkpoint_write_s,
    daly_expected_wall_s,
    daly_interval_s,
    expected_ettr,
    job_failure_rate_per_h,
    plan_checkpoint,
    young_interval_s,
)
from tests.helpers.examples import examples
from tests.helpers.paths import DEMO


def test_size_is_14_bytes_per_parameter():
    assert checkpoint_size_gb(1_000_000_000) == 14.0


def test_sync_write_blocks_for_size_over_bandwidth():
    assert checkpoint_write_s(100.0, 20.0) == (5.0, 0.0)


def test_async_write_blocks_less_and_uploads_in_background():
    blocking, background = checkpoint_write_s(100.0, 20.0, is_async=True, gpus=128)
    assert blocking < 5.0
    assert background == 5.0


@settings(max_examples=examples(200), deadline=None)
@given(size=st.floats(0.1, 1e5), bw=st.floats(0.1, 1e4), factor=st.floats(1.0, 100.0), is_async=st.booleans())
def test_more_storage_bandwidth_never_increases_write_s(size, bw, factor, is_async):
    slow = checkpoint_write_s(size, bw, is_async=is_async, gpus=64)
    fast = checkpoint_write_s(size, bw * factor, is_async=is_async, gpus=64)
    assert fast[0] <= slow[0] + 1e-12
    assert fast[1] <= slow[1] + 1e-12


@settings(max_examples=examples(100), deadline=None)
@given(bw=st.floats(1.0, 1e4), factor=st.floats(1.0, 100.0))
def test_plan_checkpoint_write_s_monotonic_in_bandwidth(bw, factor):
    slow = plan_checkpoint(10**9, 128, CheckpointConfig(storage_gb_per_s=bw), 3600.0)
    fast = plan_checkpoint(10**9, 128, CheckpointConfig(storage_gb_per_s=bw * factor), 3600.0)
    assert fast.write_s <= slow.write_s + 1e-12


def test_auto_interval_is_daly_and_fixed_interval_is_kept():
    auto = plan_checkpoint(10**10, 128, CheckpointConfig(storage_gb_per_s=10), 7200.0)
    assert auto.interval_s == auto.optimal_interval_s == daly_interval_s(auto.write_s, 7200.0)
    fixed = plan_checkpoint(10**10, 128, CheckpointConfig(storage_gb_per_s=10, interval_s=900), 7200.0)
    assert fixed.interval_s == 900.0
    assert fixed.optimal_interval_s == auto.optimal_interval_s


def test_daly_caps_at_mtbf_when_write_exceeds_twice_mtbf():
    assert daly_interval_s(500.0, 200.0) == 200.0


def test_young_is_sqrt_two_delta_m():
    assert young_interval_s(300.0, 86400.0) == math.sqrt(2 * 300.0 * 86400.0)


@settings(max_examples=examples(100), deadline=None)
@given(delta=st.floats(1.0, 600.0), mtbf=st.floats(3600.0, 30 * 86400.0))
def test_daly_wall_time_is_at_least_the_work(delta, mtbf):
    tau = daly_interval_s(delta, mtbf)
    assert daly_expected_wall_s(1000.0, tau, delta, 60.0, mtbf) >= 1000.0


def _scaled(cluster, factor):
    failures = tuple(
        FailureCategoryConfig(
            **{
                **f.model_dump(),
                "per_gpu_year": f.per_gpu_year * factor if f.per_gpu_year else None,
                "per_1k_node_days": f.per_1k_node_days * factor if f.per_1k_node_days else None,
            }
        )
        for f in cluster.failures
    )
    return cluster.model_copy(update={"failures": failures})


@settings(max_examples=examples(50), deadline=None)
@given(low=st.floats(0.1, 10.0), ratio=st.floats(1.01, 10.0))
def test_more_failures_lower_expected_ettr(low, ratio):
    cfg = load_config(DEMO).config
    few, many = _scaled(cfg.cluster, low), _scaled(cfg.cluster, low * ratio)
    params, gpus, ck = 2 * 10**9, cfg.cluster.gpus, cfg.plan.checkpoint
    plan_few = plan_checkpoint(params, gpus, ck, 3600.0 / job_failure_rate_per_h(few))
    plan_many = plan_checkpoint(params, gpus, ck, 3600.0 / job_failure_rate_per_h(many))
    assert job_failure_rate_per_h(many) > job_failure_rate_per_h(few)
    assert expected_ettr(many, plan_many) < expected_ettr(few, plan_few)


def test_failure_rate_scales_with_job_nodes():
    cfg = load_config(DEMO).config
    double = cfg.cluster.model_copy(update={"nodes": cfg.cluster.nodes * 2})
    assert math.isclose(job_failure_rate_per_h(double), 2 * job_failure_rate_per_h(cfg.cluster))


def test_no_failures_leaves_only_checkpoint_and_planned_overhead():
    cfg = load_config(DEMO).config
    cluster = cfg.cluster.model_copy(update={"failures": ()})
    ck = plan_checkpoint(
        10**9, cluster.gpus, CheckpointConfig(storage_gb_per_s=10, interval_s=1000), float("inf")
    )
    planned = 1 - cluster.planned.per_day * cluster.planned.duration_min * 60 / 86400
    assert math.isclose(expected_ettr(cluster, ck), planned * 1000 / (1000 + ck.write_s))


def test_no_failures_gives_a_bounded_interval_and_valid_json():
    import json

    from campaign.plan import make_plan
    from campaign.plan.checkpointing import MAX_AUTO_INTERVAL_S

    plan = make_plan(load_config(DEMO, ["cluster.failures=[]"]).config)
    out = json.loads(json.dumps(plan.to_json(), allow_nan=False))  # raises on inf or NaN
    assert out["job_mtbf_h"] is None and out["checkpoint"]["optimal_interval_s"] is None
    assert out["checkpoint"]["interval_s"] == MAX_AUTO_INTERVAL_S
    assert 0 < out["expected_ettr"] <= 1

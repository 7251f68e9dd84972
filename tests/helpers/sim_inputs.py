"""Simulator inputs the sim tests share: a small demo-like cluster, the Hypothesis strategy over its settings, and
the comparison of a fast summary with the event-by-event one."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from campaign.config import FailureCategoryConfig
from campaign.sim import SimInputs
from tests.helpers.examples import examples

DAY = 86_400.0


def category(
    name: str,
    scope: str,
    per_gpu_year: float,
    detect_s: float = 120,
    restart_s: float = 600,
    repair_h: float = 24,
) -> FailureCategoryConfig:
    return FailureCategoryConfig(
        name=name,
        scope=scope,
        per_gpu_year=per_gpu_year,
        detect_s=detect_s,
        restart_s=restart_s,
        repair_h=repair_h,
    )


FAILURES = (
    category("faulty_gpu", "gpu", 2.4, repair_h=48),
    category("host", "node", 1.0),
    category("software_bug", "job", 0.9, detect_s=600, repair_h=0),
    category("network", "network", 0.6, detect_s=300, repair_h=8),
)


def make_inputs(**overrides) -> SimInputs:
    """A small cluster (16 nodes x 8 GPUs, 2 spares) over 2 days with a few failures a day."""
    base = {
        "nodes": 16,
        "gpus_per_node": 8,
        "spare_nodes": 2,
        "window_s": 2 * DAY,
        "step_time_s": 10.0,
        "tokens_per_step": 2_097_152,
        "target_tokens": 1e30,
        "checkpoint_write_s": 30.0,
        "checkpoint_background_s": 0.0,
        "checkpoint_interval_s": 1800.0,
        "comm_fraction": 0.3,
        "failures": FAILURES,
        "planned_per_day": 1.0,
        "planned_duration_s": 1200.0,
        "diurnal_amplitude": 0.01,
        "gpu_tdp_w": 700.0,
        "gpu_idle_w": 90.0,
        "node_overhead_w": 2800.0,
        "pue": 1.2,
        "floor_fraction": None,
        "ramp_mw_per_s": None,
        "gpu_hour_usd": 2.5,
        "energy_usd_per_mwh": 75.0,
        "power_sample_s": 60.0,
        "seed": 7,
    }
    base.update(overrides)
    return SimInputs(**base)


small_failures = st.lists(
    st.builds(
        lambda i, scope, rate, detect, restart, repair: category(
            f"c{i}", scope, rate, detect, restart, repair
        ),
        st.integers(0, 10**6),
        st.sampled_from(["gpu", "node", "network", "job"]),
        st.floats(0.0, 30.0),
        st.floats(0, 900),
        st.floats(0, 1800),
        st.floats(0, 72),
    ),
    max_size=4,
    unique_by=lambda c: c.name,
).map(tuple)

# Lemon nodes (at most the 2 nodes every case has) and the quarantine policy; mostly off, as most runs are.
lemon_cases = st.just({}) | st.builds(
    lambda lemons, factor, k, window_h: {
        "lemon_nodes": lemons,
        "lemon_factor": factor,
        "quarantine_failures": k,
        "quarantine_window_s": window_h * 3600.0,
    },
    st.integers(0, 2),
    st.floats(1.0, 60.0),
    st.integers(0, 3),
    st.floats(0.5, 72.0),
)

input_cases = st.builds(
    lambda nodes, spares, days, step, write, bg, interval, comm, failures, planned, planned_min, amp, floor, ramp, seed, lemons: (
        make_inputs(
            **lemons,
            nodes=nodes,
            spare_nodes=spares,
            window_s=days * DAY,
            step_time_s=step,
            checkpoint_write_s=write,
            checkpoint_background_s=bg,
            checkpoint_interval_s=interval,
            comm_fraction=comm,
            failures=failures,
            planned_per_day=planned,
            planned_duration_s=planned_min * 60,
            diurnal_amplitude=amp,
            floor_fraction=floor,
            ramp_mw_per_s=ramp,
            seed=seed,
        )
    ),
    st.integers(2, 64),
    st.integers(0, 4),
    st.floats(0.2, 1.5),
    st.floats(1.0, 30.0),
    st.floats(0, 300),
    st.floats(0, 600),
    st.floats(300, 7200),
    st.floats(0, 1),
    small_failures,
    st.floats(0, 3),
    st.floats(0, 60),
    st.floats(0, 0.05),
    st.none() | st.floats(0, 1),
    st.none() | st.floats(0.01, 5),
    st.integers(0, 2**32),
    lemon_cases,
)

PROPERTY_SETTINGS = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# Floats agree to 1e-8 relative: the closed form sums a block of cycles in one expression where the event
# model adds them one by one, and breakpoint times differ in the last bits (4.7e6 s has ulp ~1e-9 s).
REL = 1e-8


def assert_same(slow, fast, path="summary"):
    if hasattr(slow, "to_json"):  # a record: every key of its JSON, as written
        assert_same(slow.to_json(), fast.to_json(), path)
    elif isinstance(slow, dict):
        assert set(slow) == set(fast), path
        for key in slow:
            assert_same(slow[key], fast[key], f"{path}.{key}")
    elif isinstance(slow, float) and isinstance(fast, float):
        assert fast == pytest.approx(slow, rel=REL, abs=1e-6), path
    else:
        assert fast == slow, path

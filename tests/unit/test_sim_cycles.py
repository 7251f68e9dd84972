"""The summary's closed form for blocks of routine checkpoint cycles (compiled._write_cycles): four power steps
per block instead of two per cycle, and the same power statistics as every cycle's steps (the curve path,
`simulate_curve`) and as the event-by-event model, whatever the phase of the cycles against whole seconds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaign.sim import compiled, simulate
from campaign.sim.fast import compiled_inputs, kernel_arguments, simulate_curve, simulate_summary
from tests.helpers.examples import examples
from tests.helpers.sim_inputs import DAY, PROPERTY_SETTINGS, assert_same, input_cases, make_inputs

POWER_KEYS = ("power_mw", "energy_mwh", "cost_usd")


def assert_summary_equals_the_curve_path(inputs, replica):
    fast = simulate_summary(inputs, replica)
    full, _ = simulate_curve(inputs, replica)
    # Tallies and counts: the same event loop, bit for bit.
    assert {k: v for k, v in fast.to_json().items() if k not in POWER_KEYS} == {
        k: v for k, v in full.to_json().items() if k not in POWER_KEYS
    }
    # Power: the left-out steps' statistics in closed form (energy summed per block, changes from exact times).
    for key, value in full.power_mw.items():
        assert fast.power_mw[key] == pytest.approx(value, rel=1e-11, abs=1e-12), key
    assert fast.energy_mwh == pytest.approx(full.energy_mwh, rel=1e-11)


def cycle_statistics(inputs, replica):
    """(largest 1-s change among the written steps, among the left-out ones, number of steps written)."""
    args = kernel_arguments(inputs, replica, compiled_inputs(inputs))
    f, _, _, t, mw = compiled.run_replica(*args, 1)
    t, mw = compiled.coalesce(t, mw)
    _, _, written, _ = compiled.curve_stats(t, mw, np.zeros_like(mw), inputs.window_s)
    return written, float(f[compiled.F_CYCLES_RAMP]), t.size


@settings(max_examples=examples(60), deadline=None)
@given(
    interval=st.floats(2.0, 400.0) | st.sampled_from([2.0, 2.0 + 1e-6, 2.5, 247.5]),
    write=st.floats(0.0, 6.0) | st.sampled_from([1.0, 2.0, 2.0 + 1e-6, 2.5]),
    days=st.floats(0.05, 0.6),
    nodes=st.integers(2, 40),
    spares=st.integers(0, 3),
    amp=st.floats(0.0, 0.05),
    seed=st.integers(0, 2**32 - 1),
)
def test_summarised_cycles_give_the_curve_paths_statistics_for_any_phase(
    interval, write, days, nodes, spares, amp, seed
):
    inputs = make_inputs(
        checkpoint_interval_s=interval,
        checkpoint_write_s=write,
        window_s=days * DAY,
        nodes=nodes,
        spare_nodes=spares,
        diurnal_amplitude=amp,
        checkpoint_background_s=0.0,
        seed=seed,
    )
    assert_summary_equals_the_curve_path(inputs, seed % 4)


@PROPERTY_SETTINGS
@given(inputs=input_cases, replica=st.integers(0, 3), write=st.floats(0.0, 8.0), finishing=st.booleans())
def test_summarised_cycles_equal_the_event_by_event_model_for_any_setting(inputs, replica, write, finishing):
    # No background upload and no ramp limit: the settings where blocks of cycles are summarised.
    inputs = dataclasses.replace(
        inputs, checkpoint_background_s=0.0, checkpoint_write_s=write, ramp_mw_per_s=None
    )
    if finishing:
        inputs = dataclasses.replace(inputs, target_tokens=inputs.tokens_per_s * inputs.window_s * 0.4)
    assert_same(simulate(inputs, replica).summary, simulate_summary(inputs, replica))


@pytest.mark.parametrize(
    "interval,write",
    [
        (247.5, 2.5),  # a whole-second period: every cycle at the same phase
        (248.25, 2.5),  # a quarter-second drift per cycle: four phases
        (249.6431453238868, 2.8409737215999997),  # the Llama 3 cycle: the phase walks through every value
        (2.0 + 1e-6, 2.0 + 1e-6),  # both segments barely long enough for the closed form
        (10.0, 1.999),  # a checkpoint shorter than 2 s: every step written
    ],
)
def test_seeded_cycle_phases_equal_the_event_by_event_model(interval, write):
    inputs = make_inputs(
        checkpoint_interval_s=interval,
        checkpoint_write_s=write,
        window_s=0.3 * DAY,
        checkpoint_background_s=0.0,
    )
    for replica in range(2):
        assert_same(simulate(inputs, replica).summary, simulate_summary(inputs, replica))
        assert_summary_equals_the_curve_path(inputs, replica)


def test_the_largest_change_can_come_from_a_left_out_step_and_is_still_exact():
    # A whole-second period with its run starts on whole seconds: every left-out start changes the 1-s series by
    # the full checkpoint-to-run swing, while the written steps (after failures) fall anywhere in their second.
    inputs = make_inputs(
        checkpoint_interval_s=247.0,
        checkpoint_write_s=3.0,
        window_s=0.5 * DAY,
        checkpoint_background_s=0.0,
        failures=(),
        planned_per_day=0.0,
        diurnal_amplitude=0.0,
    )
    written, left_out, _ = cycle_statistics(inputs, 0)
    assert left_out > 0.0 and left_out >= written
    assert_summary_equals_the_curve_path(inputs, 0)
    assert_same(simulate(inputs, 0).summary, simulate_summary(inputs, 0))


def test_a_block_writes_four_steps_and_short_checkpoints_or_a_ramp_limit_write_every_cycle():
    inputs = make_inputs(
        checkpoint_interval_s=300.0, checkpoint_write_s=5.0, checkpoint_background_s=0.0, window_s=1.0 * DAY
    )
    cycles = inputs.window_s / 305.0
    _, _, summarised = cycle_statistics(inputs, 0)
    assert summarised < cycles / 4  # a few steps per random event, not two per cycle
    short = dataclasses.replace(inputs, checkpoint_write_s=1.5)
    assert cycle_statistics(short, 0)[2] > cycles
    limited = dataclasses.replace(inputs, ramp_mw_per_s=0.05, floor_fraction=0.5)
    assert cycle_statistics(limited, 0)[2] > cycles
    # Under a ramp limit the summary takes the full path: the curve path's figures, bit for bit.
    assert simulate_summary(limited, 0) == simulate_curve(limited, 0)[0]


def test_arrivals_at_equal_times_and_on_cycle_boundaries_run_in_the_event_models_order(monkeypatch):
    """The kernel merges the sorted arrivals with its heap instead of pushing them: ties between arrivals, and
    between an arrival and a checkpoint's end or a detection, must still run in scheduling order."""
    from campaign.sim import fast, simulator
    from campaign.sim.failures import Arrivals

    inputs = make_inputs(
        checkpoint_interval_s=100.0,
        checkpoint_write_s=10.0,
        checkpoint_background_s=0.0,
        planned_duration_s=600.0,
        window_s=0.2 * DAY,
        spare_nodes=1,
    )
    # Planned maintenance and failures at the same instants, on checkpoint ends (110 s per cycle from t = 0),
    # on checkpoint starts, and at another failure's detection (faulty_gpu: detect_s below).
    gpu_detect = inputs.failures[0].detect_s
    times = [1100.0, 2200.0, 2300.0, 5500.0, 5500.0 + gpu_detect, 9900.0]

    def arrivals(x, replica):
        planned = Arrivals("planned", "", np.array([1100.0, 5500.0, 9900.0]), np.full(3, -1))
        categories = [
            Arrivals(
                c.name,
                c.scope,
                np.array(times),
                np.array([3, 3, 5, 7, 7, 1]) if c.scope in ("gpu", "node") else np.full(len(times), -1),
            )
            for c in x.failures
        ]
        return planned, categories

    monkeypatch.setattr(simulator, "draw_arrivals", arrivals)  # the event-by-event model
    monkeypatch.setattr(fast, "draw_arrivals", arrivals)  # and the compiled one
    slow = simulate(inputs, 0).summary
    assert slow.interruptions.unexpected == len(times) * len(inputs.failures)
    assert_same(slow, simulate_summary(inputs, 0))
    assert_summary_equals_the_curve_path(inputs, 0)

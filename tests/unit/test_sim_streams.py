"""The arrivals' random streams computed directly (compiled.pcg64_stream_states) are NumPy's own: the same
SeedSequence children and PCG64 states as `random_streams`, hence the same draws, on any thread."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaign.config import load_config
from campaign.sim.failures import (
    ARRIVAL_BLOCK,
    FIRST_CATEGORY_STREAM,
    NODE_LOSING_SCOPES,
    PLANNED_STREAM,
    category_rate_per_s,
    draw_arrivals,
    random_streams,
    stream_states,
)
from campaign.sim.inputs import DAY_S
from campaign.window import window_inputs
from tests.helpers.examples import examples
from tests.helpers.paths import LLAMA


@settings(max_examples=examples(200), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1) | st.integers(0, 2**130),
    replica=st.integers(0, 10_000) | st.integers(0, 2**70),
    n=st.integers(0, 30),
)
def test_stream_states_are_numpys_seedsequence_and_pcg64_states(seed, replica, n):
    assert stream_states(seed, replica, n) == [
        g.bit_generator.state for g in random_streams(seed, replica, n)
    ]


def test_a_negative_seed_is_refused_as_numpy_refuses_it():
    with pytest.raises(ValueError):
        stream_states(-1, 0, 2)


def reference_history(rng, rate_per_s, horizon_s, nodes=0):
    """A Poisson history drawn block by block: ARRIVAL_BLOCK exponential gaps, then (node-losing) their slots,
    until a block passes the horizon."""
    times, slots, last = [np.empty(0)], [np.empty(0, np.int64)], 0.0
    while rate_per_s > 0 and last < horizon_s:
        block = last + np.cumsum(rng.standard_exponential(ARRIVAL_BLOCK)) / rate_per_s
        if nodes:
            slots.append(rng.integers(0, nodes, size=ARRIVAL_BLOCK, dtype=np.int64))
        times.append(block)
        last = block[-1]
    t = np.concatenate(times)
    keep = t < horizon_s
    return t[keep], (np.concatenate(slots)[keep] if nodes else np.full(keep.sum(), -1))


def reference_arrivals(inputs, replica):
    """draw_arrivals as written before the direct states: one Generator object per source."""
    streams = random_streams(inputs.seed, replica, len(inputs.failures))
    out = [reference_history(streams[PLANNED_STREAM], inputs.planned_per_day / DAY_S, inputs.window_s)]
    for i, category in enumerate(inputs.failures):
        rng = streams[FIRST_CATEGORY_STREAM + i]
        nodes = inputs.nodes if category.scope in NODE_LOSING_SCOPES else 0
        out.append(reference_history(rng, category_rate_per_s(category, inputs), inputs.window_s, nodes))
    return out


def drawn(inputs, replica):
    planned, categories = draw_arrivals(inputs, replica)
    return [(a.t_s, a.slot) for a in (planned, *categories)]


def same(a, b):
    return len(a) == len(b) and all(
        np.array_equal(x, y) for pa, pb in zip(a, b, strict=False) for x, y in zip(pa, pb, strict=False)
    )


def test_draw_arrivals_equals_one_generator_per_source_and_is_the_same_on_threads():
    inputs = window_inputs(load_config(LLAMA).config)
    replicas = list(range(8))
    for r in replicas:
        assert same(reference_arrivals(inputs, r), drawn(inputs, r))
    with ThreadPoolExecutor(2) as pool:
        threaded = list(pool.map(lambda r: drawn(inputs, r), replicas * 3))
    for r, got in zip(replicas * 3, threaded, strict=False):
        assert same(reference_arrivals(inputs, r), got)
    assert sum(t.size for t, _ in drawn(inputs, 0)) > 300  # a real draw, not empty streams

"""Lemon nodes and quarantine in the simulator against closed forms: a few nodes at 20x the healthy rate add
their excess failures (a renewal calculation, Ross, Introduction to Probability Models, ch. 7), and retiring a node
at its second failure within a week brings the count back toward the healthy rate (Kokolis et al., arXiv
2410.21680, lemon nodes)."""

from __future__ import annotations

import math

import numpy as np

from campaign.sim.fast import compiled_inputs, simulate_summary
from tests.helpers.sim_inputs import DAY, category, make_inputs

NODES, GPUS_PER_NODE, DAYS = 64, 8, 60.0
NODE_RATE_PER_DAY = 1.0 / 50.0  # a healthy node fails once in 50 days
FACTOR, LEMONS = 20.0, 3  # 3 of 64 nodes (4.7 %) at 20x
DETECT_S = 60.0
REPLICAS = 200


def _inputs(**overrides):
    gpu_year = NODE_RATE_PER_DAY * 365.0 / GPUS_PER_NODE
    base = {
        "nodes": NODES,
        "gpus_per_node": GPUS_PER_NODE,
        "spare_nodes": 0,
        "window_s": DAYS * DAY,
        "failures": (category("faulty_gpu", "gpu", gpu_year, detect_s=DETECT_S, restart_s=300, repair_h=0),),
        "planned_per_day": 0.0,
        "lemon_nodes": LEMONS,
        "lemon_factor": FACTOR,
    }
    base.update(overrides)
    return make_inputs(**base)


def _counts(inputs) -> np.ndarray:
    prepared = compiled_inputs(inputs)
    return np.array([simulate_summary(inputs, r, prepared).interruptions.unexpected for r in range(REPLICAS)])


def test_lemons_at_20x_add_their_closed_form_excess():
    counts = _counts(_inputs())
    r = NODE_RATE_PER_DAY / DAY  # per node-second
    healthy = NODES * r * DAYS * DAY
    # Without spares and with instant repair every lemon holds its slot but for DETECT_S after each of its
    # failures (rate FACTOR x r): the renewal share of the window it is exposed for is 1 / (1 + FACTOR r DETECT_S).
    excess = LEMONS * (FACTOR - 1.0) * r * DAYS * DAY / (1.0 + FACTOR * r * DETECT_S)
    expected = healthy + excess
    z = (counts.mean() - expected) / math.sqrt(expected / REPLICAS)  # Poisson counts
    assert abs(z) <= 3.0, (counts.mean(), expected)
    assert excess > 0.8 * healthy  # the lemons, 5 % of the nodes, nearly double the failures


def test_quarantine_lowers_the_count_toward_the_healthy_rate():
    spares = {"spare_nodes": 8}
    healthy = _counts(_inputs(lemon_nodes=0, **spares)).mean()
    lemons = _counts(_inputs(**spares)).mean()
    quarantined = _counts(_inputs(quarantine_failures=2, quarantine_window_s=7 * DAY, **spares)).mean()
    assert healthy < quarantined < lemons
    # The lemons are retired after a few failures each: most of their excess is gone (healthy nodes retired
    # by bad luck, and lemons waiting among the spares, keep a little).
    assert quarantined - healthy < 0.5 * (lemons - healthy), (healthy, quarantined, lemons)

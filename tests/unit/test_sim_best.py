"""A sweep's best only beyond the replicas' paired noise: identical points are tied, one replica in 1,000 is noise,
and a tie on P(target in the window) falls to mean ETTR, then to cost."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from campaign.sim import simulate_batch, summarise_replicas
from campaign.sim.best import (
    NOISE_Z,
    ReplicaOutcomes,
    best_beyond_noise,
    mark_best,
    paired_difference,
    replica_outcomes,
)
from campaign.sim.sweeps import best_line, sweep_row, sweep_table_markdown
from tests.helpers.sim_inputs import DAY, category, make_inputs


def outcomes(reached, ettr, cost=None):
    n = len(reached)
    return ReplicaOutcomes(tuple(map(float, reached)), tuple(ettr), tuple(cost or [100.0] * n))


def row(i, v):
    return {"point": i, "values": {"k": v}, "is_best": False, "tied": False}


def test_identical_points_are_tied_never_a_best():
    same = outcomes([1, 0, 1, 1], [0.9, 0.8, 0.95, 0.91])
    verdict = best_beyond_noise([same, same, same])
    assert verdict.best is None and verdict.tied == (0, 1, 2)
    rows = mark_best([row(0, 0), row(1, 2), row(2, 3)], [same, same, same])
    assert not any(r["is_best"] for r in rows) and all(r["tied"] for r in rows)
    assert best_line(rows) == "no best beyond the replicas' noise: tied k=0; k=2; k=3"


def test_one_replica_in_a_thousand_is_noise_and_the_tie_falls_to_ettr():
    # The checkpoint sweep's case: 200 s reaches the target in one replica more (P 0.722 against 0.721), while 175 s
    # has the higher ETTR in every replica: 175 s is best, by ETTR.
    rng = np.random.default_rng(0)
    reached = (rng.random(1000) < 0.721).astype(float)
    more = reached.copy()
    more[np.flatnonzero(reached == 0)[0]] = 1.0
    ettr = rng.uniform(0.85, 0.95, 1000)
    at_175 = outcomes(reached, list(ettr + 0.002))
    at_200 = outcomes(more, list(ettr))
    d = paired_difference(np.array(at_200.p_target_in_window), np.array(at_175.p_target_in_window))
    assert d.mean == pytest.approx(0.001) and not d.beyond_noise()
    verdict = best_beyond_noise([at_175, at_200])
    assert verdict.best == 0 and verdict.decided_by == "ettr_mean"


def test_a_clear_difference_in_the_share_that_reaches_the_target_wins_even_against_a_higher_ettr():
    a = outcomes([1] * 50, [0.8] * 50)
    b = outcomes([1] * 25 + [0] * 25, [0.9] * 50)
    verdict = best_beyond_noise([b, a])
    assert verdict.best == 1 and verdict.decided_by == "p_target_in_window"
    assert best_line(mark_best([row(0, 1), row(1, 2)], [b, a])) == "best: k=2"


def test_the_tied_are_those_the_leader_does_not_beat_and_cost_is_lower_is_better():
    rng = np.random.default_rng(1)
    ettr = rng.uniform(0.8, 0.95, 40)
    noisy = ettr + rng.normal(0, 0.01, 40)  # same mean, paired noise
    worse = ettr - 0.05
    points = [
        outcomes([1] * 40, list(ettr)),
        outcomes([1] * 40, list(noisy)),
        outcomes([1] * 40, list(worse)),
    ]
    verdict = best_beyond_noise(points)
    assert verdict.best is None and set(verdict.tied) == {0, 1}  # the clearly worse point is not tied
    cheaper = dataclasses.replace(points[1], cost_usd=tuple([90.0] * 40))
    verdict = best_beyond_noise([points[0], cheaper, points[2]])
    assert verdict.best == 1 and verdict.decided_by == "cost_usd"


def test_the_noise_threshold_is_the_paired_standard_error():
    d = paired_difference(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.0, 0.0, 0.0, 0.0]))
    assert d.mean == 2.5 and d.se == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)
    assert d.beyond_noise() == (NOISE_Z * d.se < 2.5)
    with pytest.raises(ValueError):
        paired_difference(np.array([1.0]), np.array([1.0, 2.0]))


def test_a_quarantine_that_never_acts_gives_identical_rows_and_a_tie():
    # Lemons that never fail k times within the quarantine window: every `after_failures` gives the same replicas.
    base = make_inputs(
        window_s=2 * DAY,
        target_tokens=1.5e10,
        lemon_nodes=1,
        lemon_factor=2.0,
        quarantine_window_s=60.0,
        failures=(category("gpu", "gpu", 4.0, repair_h=12),),
    )
    rows, outs = [], []
    for i, k in enumerate((0, 2, 3)):
        inputs = dataclasses.replace(base, quarantine_failures=k)
        summaries = simulate_batch(inputs, range(20))
        rows.append(
            sweep_row(
                i, {"cluster.quarantine.after_failures": k}, summarise_replicas(summaries, inputs.window_s)
            )
        )
        outs.append(replica_outcomes(summaries, inputs.window_s))
    assert rows[0]["ettr_mean"] == rows[1]["ettr_mean"] == rows[2]["ettr_mean"]
    marked = mark_best(rows, outs)
    assert [r["is_best"] for r in marked] == [False] * 3 and all(r["tied"] for r in marked)
    table = sweep_table_markdown(marked)
    assert table.count("| tied |") == 3 and "**best**" not in table

"""A multi-node run's journal as the measured summary: nodes and spares in the GPU-hours, spares used, nodes excluded,
per-node failures and each recovery's detection, restart and rework; the report shows them (no Slurm needed)."""

import math

from campaign import goodput
from campaign.analysis.report import environment
from campaign.execution.journal import Journal
from campaign.execution.multinode import _Rank, straggler
from campaign.execution.multinode_summary import multinode_summary


def _journal(tmp_path) -> Journal:
    j = Journal.open(tmp_path)
    names = ("n0", "n1", "n2", "n3")
    j.add(0.0, "job_start", detail="target_step=20 job_nodes=3 spare_nodes=1", started_at=1.0e9)
    j.add(1.0, "start", node=0, detail="world=3 nodes=n0,n1,n2", nodes=names[:3], names=names[:3])
    for step in range(1, 13):
        j.add_step(10.0 + step, step, 0)
        if step % 5 == 0:
            j.add(10.2 + step, "checkpoint_end", node=0, detail=f"step={step}", step=step)
    j.add(
        23.0,
        "failure",
        "node_lost",
        "node",
        2,
        detail="injected: node n2 lost (set DOWN)",
        injection=0,
        step=12,
    )
    j.add(24.0, "detected", "node_lost", "node", 2)
    j.add(24.0, "node_excluded", "node_lost", "node", 2, detail="node=n2 failures=1")
    j.add(24.1, "spare_swap", node=3, detail="slot=2 node=n3 replaces=n2", attempt=1)
    j.add(24.1, "restart_start", node=0, attempt=1)
    j.add(
        25.0,
        "start",
        node=0,
        detail="world=3 nodes=n0,n1,n3",
        attempt=1,
        nodes=("n0", "n1", "n3"),
        names=names,
    )
    for step in range(11, 21):
        j.add_step(30.0 + step, step, 1)
        if step % 5 == 0:
            j.add(30.2 + step, "checkpoint_end", node=0, detail=f"step={step}", attempt=1, step=step)
    j.add(51.0, "job_complete", node=0, attempt=1)
    j.add(51.0, "window_end", detail="target step reached", attempt=1)
    return j


def test_the_summary_names_the_spare_used_the_node_excluded_and_each_recovery(tmp_path):
    summary = multinode_summary(_journal(tmp_path), 20, 96, 5, 3, 2.0, job_nodes=3, spare_nodes=1).to_json()
    m = summary["measured"]
    assert m["spares_used"] == ["n3"] and m["nodes_excluded"] == ["n2"] and m["world_sizes"] == [3, 3]
    assert m["elastic"] is None and m["spare_wait_s"] == 0.0
    assert m["per_node"]["n2"] == {
        "role": "job",
        "failures": 1,
        "excluded": True,
        "straggler": False,
        "recovery_s": m["per_node"]["n2"]["recovery_s"],
    }
    assert m["per_node"]["n3"]["role"] == "spare"
    (recovery,) = m["recoveries"]
    assert recovery["node"] == "n2" and recovery["resumed_at_step"] == 10 and recovery["rework_steps"] == 2
    assert recovery["detection_s"] == 1.0 and recovery["rework_s"] == 2.0
    assert m["steps_trained_again"] == m["rework_steps_expected"] == 2
    # GPU-hours of 3 job slots and 1 spare, summing to (job + spare) x the window
    assert summary["gpus"] == 3 and summary["spare_gpus"] == 1
    total = goodput.total_gpu_h(3, 1, 51.0)
    assert math.isclose(goodput.buckets_sum_gpu_h(summary["goodput_breakdown_gpu_h"]), total, rel_tol=1e-9)
    assert summary["goodput_breakdown_gpu_h"]["idle"] > 0  # the spare standing by


def test_the_report_shows_nodes_spares_and_stragglers(tmp_path):
    summary = multinode_summary(_journal(tmp_path), 20, 96, 5, 3, 2.0, job_nodes=3, spare_nodes=1).to_json()
    r = {
        **summary,
        "interruptions": {
            **summary["interruptions"],
            "injected": 1,
            "organic": 0,
            "injected_by_category": {"node_lost": 1},
        },
    }
    for name in ("measured.md.j2", "measured.html.j2"):
        text = environment().get_template(name).render(r=r)
        assert "3 job nodes and 1 spare(s); world size 3 then 3" in text
        assert "n3; waiting for a spare 0.0 s" in text and "node n2 (job)" in text


def test_a_straggler_is_a_rank_that_computes_factor_times_the_others():
    beats = {
        0: _Rank("n0", compute_s=[0.01] * 8),
        1: _Rank("n1", compute_s=[0.05] * 8),
        2: _Rank("n2", compute_s=[0.011] * 8),
    }
    rank, mine, others = straggler(beats, 3.0)
    assert rank == 1 and mine == 0.05 and math.isclose(others, 0.0105)
    assert straggler(beats, 6.0) is None
    beats[2].compute_s = [0.01] * 7  # every rank needs its window of steps first
    assert straggler(beats, 3.0) is None


def test_a_run_that_shrank_says_so_in_its_report(tmp_path):
    """No spare and `elastic: shrink`: the run finished on fewer nodes, and both reports say how many of how many."""
    j = Journal.open(tmp_path)
    j.add(0.0, "job_start", detail="target_step=20 job_nodes=2 spare_nodes=0", started_at=1.0e9)
    j.add(1.0, "start", node=0, detail="world=2 nodes=n0,n1", nodes=("n0", "n1"), names=("n0", "n1"))
    for step in range(1, 9):
        j.add_step(10.0 + step, step, 0)
        if step % 5 == 0:
            j.add(10.2 + step, "checkpoint_end", node=0, detail=f"step={step}", step=step)
    j.add(
        19.0,
        "failure",
        "node_lost",
        "node",
        1,
        detail="injected: node n1 lost (set DOWN)",
        injection=0,
        step=8,
    )
    j.add(20.0, "detected", "node_lost", "node", 1)
    j.add(20.0, "node_excluded", "node_lost", "node", 1, detail="node=n1 failures=1")
    j.add(20.0, "spares_exhausted", detail="no spare left", attempt=1)
    j.add(20.0, "elastic_shrink", detail="world 2 -> 1", attempt=1)
    j.add(20.1, "restart_start", node=0, attempt=1)
    j.add(21.0, "start", node=0, detail="world=1 nodes=n0", attempt=1, nodes=("n0",), names=("n0", "n1"))
    for step in range(6, 21):
        j.add_step(25.0 + step, step, 1)
    j.add(46.0, "job_complete", node=0, attempt=1)
    j.add(46.0, "window_end", detail="target step reached", attempt=1)
    summary = multinode_summary(j, 20, 96, 5, 3, 2.0, job_nodes=2, spare_nodes=0)
    nodes = summary.measured_run().nodes
    assert nodes is not None and nodes.world_sizes == [2, 1] and nodes.nodes_excluded == ["n1"]
    r = summary.to_json()
    r["interruptions"] |= {
        "injected": 1,
        "organic": 0,
        "injected_by_category": {"node_lost": 1},
    }  # as analyse adds
    for name in ("measured.md.j2", "measured.html.j2"):
        text = environment().get_template(name).render(r=r)
        assert (
            "2 job nodes and 0 spare(s); world size 2 then 1 (shrunk to 1 of 2 nodes (no spare left" in text
        )

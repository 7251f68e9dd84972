"""The multi-node supervisor's rule of progress, the same as one node's: a step line is progress only beyond the
start's furthest step. A rank that writes the same step again, or a smaller one, is not training: its lines are
neither trained steps nor a reset of the hang limit, and a hang's detail names them."""

from pathlib import Path

from campaign.execution.multinode import MultiNodeSettings, _Start, _Supervisor
from campaign.execution.settings import RealRunSettings
from campaign.rehearsal.contract import Metrics


def _supervisor(folder: Path) -> _Supervisor:
    run = RealRunSettings(command=["true"], env={}, steps=100, tokens_per_step=8, max_wall_s=60)
    return _Supervisor(MultiNodeSettings(run, job_nodes=2), folder, None, None)


def test_repeated_and_backward_steps_are_not_progress_and_are_never_trained(tmp_path):
    sup = _supervisor(tmp_path)
    start = _Start(0, ["n0", "n1"], 2)
    sup.ingest(start, Metrics(losses=[(1, 2.0), (2, 1.9), (3, 1.8)]), now=10.0)
    assert start.max_step == 3 and start.last_progress == 10.0
    stalled = Metrics(losses=[(1, 2.0), (2, 1.9), (3, 1.8), (3, 1.8), (3, 1.8), (2, 1.9)])
    sup.ingest(start, stalled, now=50.0)
    assert start.last_progress == 10.0  # the hang limit counts from the last new step
    assert [s.step for s in sup.journal.steps] == [1, 2, 3]  # nothing counted as trained twice
    assert start.repeats == 3 and start.went_back == (3, 2)
    sup.ingest(start, Metrics(losses=[*stalled.losses, (4, 1.7)]), now=60.0)
    assert start.max_step == 4 and start.last_progress == 60.0
    assert [s.step for s in sup.journal.steps] == [1, 2, 3, 4]


def test_an_adopted_start_counts_only_steps_beyond_those_recorded_before_it(tmp_path):
    sup = _supervisor(tmp_path)
    start = _Start(1, ["n0", "n1"], 2, adopted=True)
    start.max_step, start.resumed_steps = 7, 7
    sup.ingest(start, Metrics(losses=[(7, 1.0), (8, 0.9)]), now=5.0)
    assert [s.step for s in sup.journal.steps] == [8] and start.repeats == 1

"""Stopping the local Slurm cluster leaves nothing behind: what its jobs left running (a `slurmstepd`, which outlives
its slurmd, and the processes below it) is found by the cluster's slurm.conf in its environment and killed, and
nothing of another cluster is touched. Real processes standing in for job steps; no Slurm needed."""

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from campaign.execution.local_cluster import kill_steps, step_processes


def _fake_step(tmp_path, conf):
    """A process named slurmstepd (a shell under that name) of the cluster of `conf`, with a child: a job's step."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    stepd = tmp_path / "bin" / "slurmstepd"
    if not stepd.exists():
        stepd.symlink_to("/bin/sh")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    return subprocess.Popen([str(stepd), "-c", "sleep 60 & wait"], env=env)


def _children(pid):
    for _ in range(100):  # the shell starts its child a moment later
        kids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == pid]
        if kids:
            return kids
        time.sleep(0.02)
    return []


def _ppid(proc):
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def test_the_steps_a_stopped_cluster_left_are_found_by_its_conf_and_killed_with_their_children(tmp_path):
    ours, theirs = tmp_path / "ours" / "slurm.conf", tmp_path / "theirs" / "slurm.conf"
    step, other = _fake_step(tmp_path, ours), _fake_step(tmp_path, theirs)
    left = _children(other.pid)
    try:
        below = _children(step.pid)
        assert below and set(step_processes(ours)) == {step.pid, *below}
        assert other.pid not in step_processes(ours)  # another cluster's step is not ours to kill
        assert set(kill_steps(ours)) == {step.pid, *below}
        assert step.wait(timeout=10) == -9
        assert step_processes(ours) == [] and other.poll() is None
    finally:
        for pid in left:  # the other cluster's step's child, which this test started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in (step, other):
            if proc.poll() is None:
                proc.kill()
                proc.wait()

"""`campaign failures fit` on the real accounting of the suite's Slurm cluster (tests/helpers/slurm_cluster.py):
jobs run, two node losses are injected into one requeued job (`scontrol update State=DOWN`), one job crashes, one
is cancelled by a person; the fit of the cluster's own job completion log (`jobcomp/filetxt`, and `sacct
--completion` reading it) recovers the injected counts by category."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from campaign_cli.cli import main
from tests.helpers.slurm_cluster import start_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running, reason = start_cluster(tmp_path_factory.mktemp("slurm-acct"), nodes=4)
    if running is None:
        pytest.skip(reason)
    yield running
    running.stop()


def _run(cluster, *args: str) -> str:
    done = subprocess.run(
        list(args),
        env={**os.environ, **cluster.env()},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


def _wait(cluster, job: str, states: set[str], limit_s: float = 60.0) -> str:
    """The job's `STATE NODELIST` once its state is one of `states` (an empty squeue line: it has left the queue)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        line = _run(cluster, "squeue", "-h", "-j", job, "-o", "%T %N")
        if (line.split() or ["GONE"])[0] in states:
            return line
        time.sleep(0.3)
    raise AssertionError(f"job {job} never reached {states}")


def _submit(cluster, *options: str, command: str) -> str:
    return _run(cluster, "sbatch", "--parsable", "-N1", "-o", "/dev/null", *options, "--wrap", command)


@pytest.fixture(scope="module")
def accounting(cluster):
    """The cluster's jobcomp log and sacct's reading of it after the injected faults."""
    lost = _submit(cluster, "--requeue", command="sleep 4")
    down = []
    for _ in range(2):  # two node losses: the job is requeued each time, onto another node
        node = _wait(cluster, lost, {"RUNNING"}).split()[1]
        time.sleep(1)
        _run(cluster, "scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=injected node loss")
        down.append(node)
        _wait(cluster, lost, {"PENDING"})
        # A requeued job waits out its credential's lifetime before it may start; a test need not.
        _run(cluster, "scontrol", "update", f"JobId={lost}", "StartTime=now")
    crash = _submit(cluster, command="sleep 1; exit 3")  # the trainer crashes: FAILED
    cancelled = _submit(cluster, command="sleep 60")
    _wait(cluster, cancelled, {"RUNNING"})
    time.sleep(1)
    _run(cluster, "scancel", cancelled)  # a person cancels it: not a failure
    for job in (lost, crash, cancelled):
        _wait(cluster, job, {"GONE", "COMPLETED"})
    jobcomp = cluster.folder / "jobcomp.txt"
    sacct = cluster.folder / "sacct.txt"
    sacct.write_text(
        _run(
            cluster,
            "sacct",
            "--completion",
            "--duplicates",
            "--parsable2",
            "--format=JobID,JobIDRaw,State,Start,End,NNodes,NodeList,AllocTRES,Reason,ExitCode",
        )
        + "\n"
    )
    return {"jobcomp": jobcomp, "sacct": sacct, "down": down, "lost": lost}


@pytest.mark.parametrize("source", ["--slurm-jobcomp", "--slurm-sacct"])
def test_the_injected_node_losses_and_the_crash_are_recovered_by_category(accounting, source, capsys):
    path = accounting["jobcomp" if source == "--slurm-jobcomp" else "sacct"]
    assert main(["failures", "fit", source, str(path), "--gpus-per-node", "8", "--json"]) == 0, (
        capsys.readouterr()
    )
    fit = json.loads(capsys.readouterr().out)
    seen = {c["name"]: c for c in fit["categories"] if c["count"]}
    assert set(seen) == {"node_failure", "software_bug"}, seen
    # The excluded nodes: two node-scope failures, on the nodes set DOWN.
    assert seen["node_failure"]["count"] == 2 and seen["node_failure"]["scope"] == "node"
    assert fit["nodes"] == 2  # each loss named by its node (the lemon test runs over the nodes named)
    # The crash: software, per job-hour.
    assert seen["software_bug"]["count"] == 1 and seen["software_bug"]["scope"] == "job"
    # The requeued job's three segments are one job; the cancelled job is exposure, not a failure.
    assert fit["incidents"] == 3 and fit["segments"] == 5 and fit["jobs"] == 3


def test_the_failed_node_is_named_and_a_node_event_reason_names_the_category(accounting, tmp_path, capsys):
    # The cluster keeps no accounting database (sacctmgr needs slurmdbd), so the node events are written here as
    # `sacctmgr show event --parsable2 format=NodeName,Start,End,State,Reason,User` prints them, at the times the
    # nodes went down (the jobcomp log's NODE_FAIL ends).
    lines = [line for line in accounting["jobcomp"].read_text().splitlines() if "JobState=NODE_FAIL" in line]
    ends = [line.split("EndTime=")[1].split()[0] for line in lines]
    events = tmp_path / "events.txt"
    events.write_text(
        "NodeName|Start|End|State|Reason|User\n"
        + "".join(
            f"{node}|{end}|Unknown|DOWN|GPU Xid 79 fallen off the bus|root(0)\n"
            for node, end in zip(accounting["down"], ends, strict=True)
        )
    )
    args = ["failures", "fit", "--slurm-jobcomp", str(accounting["jobcomp"]), "--slurm-events", str(events)]
    assert main([*args, "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    seen = {c["name"]: c["count"] for c in fit["categories"] if c["count"]}
    assert seen == {"faulty_gpu": 2, "software_bug": 1}

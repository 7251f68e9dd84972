"""Lean worker processes of a local prepare: same results as in this process, errors come back, a dead worker
is reported and replaced."""

from __future__ import annotations

import os
import signal

import pytest

from campaign.data import workers
from campaign.data.normalise import normalise_text
from campaign.errors import ConfigError, DataError


def _fail(message: str) -> None:
    raise DataError(message, fix="nothing")


def test_in_worker_runs_in_a_worker_process_and_gives_the_same_result() -> None:
    assert workers.in_worker(os.getpid) == os.getpid()  # no pool open: this process
    with workers.shard_workers(2) as pool:
        assert pool is not None
        pids = {workers.in_worker(os.getpid) for _ in range(6)}
        assert os.getpid() not in pids and 1 <= len(pids) <= 2
        assert workers.in_worker(normalise_text, "a\r\nb  \n\n\n\n\nc") == normalise_text(
            "a\r\nb  \n\n\n\n\nc"
        )
    assert workers.in_worker(os.getpid) == os.getpid()  # closed again


def test_keep_workers_ends_idle_processes() -> None:
    workers.keep_workers(1)  # no pool open: nothing happens
    with workers.shard_workers(3) as pool:
        assert pool is not None
        procs = [w.proc for w in pool._all]
        workers.keep_workers(1)
        assert len(pool._all) == 1
        assert sum(p.poll() is not None for p in procs) == 2
        assert workers.in_worker(len, "abcd") == 4


def test_one_worker_means_no_process() -> None:
    with workers.shard_workers(1) as pool:
        assert pool is None
        assert workers.in_worker(os.getpid) == os.getpid()


def test_errors_come_back_as_raised() -> None:
    with workers.shard_workers(2):
        with pytest.raises(DataError, match="broken input"):
            workers.in_worker(_fail, "broken input")
        assert workers.in_worker(len, "abc") == 3  # the worker still serves


def test_a_killed_worker_is_reported_and_replaced() -> None:
    with workers.shard_workers(2) as pool:
        assert pool is not None
        victim = pool._all[0]
        pool._idle = type(pool._idle)()  # hand out the victim first
        pool._idle.put(victim)
        for other in pool._all[1:]:
            pool._idle.put(other)
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait()
        with pytest.raises(workers.WorkerDied, match="exit code"):
            workers.in_worker(len, "abc")
        assert len(pool._all) == 2 and victim not in pool._all
        assert [workers.in_worker(len, "ab") for _ in range(3)] == [2, 2, 2]


def test_workers_end_with_their_parent_gone(tmp_path) -> None:
    import subprocess
    import sys
    import time

    script = (
        "import sys, time\nfrom campaign.data.workers import WorkerPool\n"
        "pool = WorkerPool(1)\nprint(pool._all[0].proc.pid, flush=True)\ntime.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        try:  # reap it if it became our child's orphan adopted by init: only the pid's existence matters
            with open(f"/proc/{child}/stat") as handle:
                if handle.read().split()[2] == "Z":
                    return
        except OSError:
            return
        time.sleep(0.2)
    raise AssertionError("the worker outlived the process that started it")


def test_a_ctrl_c_reaches_the_command_not_its_workers_and_ends_them() -> None:
    """The terminal sends SIGINT to its foreground process group: workers sit in their own group (no traceback from
    each worker's imports), and the command ends them all when the interrupt unwinds through the pool."""
    procs = []
    with pytest.raises(KeyboardInterrupt), workers.shard_workers(2) as pool:
        assert pool is not None
        procs = [w.proc for w in pool._all]
        assert all(os.getpgid(p.pid) != os.getpgid(0) for p in procs)
        raise KeyboardInterrupt
    assert all(p.returncode is not None for p in procs)


MB = 2**20


def test_a_worker_is_started_only_for_each_32_mb_of_input(monkeypatch) -> None:
    """The demo's 0.7 MB is cleaned in the command's process; 80 MB gets two workers of four allowed."""
    monkeypatch.delenv(workers.ENV_WORKER_MIN_MB, raising=False)
    assert workers.pool_size(int(0.7 * MB), 2) == 1
    assert workers.pool_size(63 * MB, 2) == 1
    assert workers.pool_size(64 * MB, 2) == 2
    assert workers.pool_size(80 * MB, 4) == 2
    assert workers.pool_size(10_000 * MB, 4) == 4
    monkeypatch.setenv(workers.ENV_WORKER_MIN_MB, "0")  # every allowed worker, whatever the input
    assert workers.pool_size(0, 3) == 3
    for bad in ("sixteen", "-4", "nan"):
        monkeypatch.setenv(workers.ENV_WORKER_MIN_MB, bad)
        with pytest.raises(ConfigError) as caught:
            workers.pool_size(MB, 2)
        assert caught.value.where == workers.ENV_WORKER_MIN_MB and repr(bad) in caught.value.message

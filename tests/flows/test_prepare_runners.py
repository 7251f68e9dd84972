"""The prepare flow on both task runners: threads and Dask (prefect-dask LocalCluster) give identical outputs, and on
threads the work done in lean worker processes and in the command's own process (an input too small to repay a
worker's start) gives identical outputs too."""

import json

import pytest

from campaign.data.workers import ENV_WORKER_MIN_MB
from campaign_cli.cli import main
from tests.helpers.paths import DEMO, set_args

pytest.importorskip("prefect_dask")


def _prepare(ws, demo_inputs, runner: str, *extra: str) -> dict:
    # small shards so the demo corpus is cut into several mapped shard tasks; near dedup and C4/FineWeb on
    overrides = [
        *demo_inputs,
        *extra,
        f"runtime.task_runner={runner}",
        "runtime.max_workers=2",
        "data.shard_bytes=262144",
        "data.cleaning.c4.enabled=true",
        "data.cleaning.fineweb.enabled=true",
    ]
    assert main(["prepare", str(DEMO), "--workspace", str(ws), *set_args(overrides)]) == 0
    return json.loads((ws / "data" / "manifest.json").read_text())


@pytest.fixture(scope="module")
def on_threads(tmp_path_factory, demo_inputs) -> tuple[object, dict]:
    """One prepare on the threads runner, its work in two worker processes (the demo alone would be cleaned in the
    command's process): the reference the other runs are held to."""
    ws = tmp_path_factory.mktemp("runners") / "threads"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_WORKER_MIN_MB, "0")
        return ws, _prepare(ws, demo_inputs, "threads")


def test_the_work_in_this_process_gives_the_outputs_of_worker_processes(
    tmp_path, demo_inputs, on_threads, monkeypatch
):
    monkeypatch.delenv(ENV_WORKER_MIN_MB, raising=False)  # the demo's 0.7 MB: no worker started
    _, threads = on_threads
    assert _prepare(tmp_path / "here", demo_inputs, "threads") == threads


def test_dask_and_threads_give_identical_outputs(tmp_path, demo_inputs, on_threads):
    threads_ws, threads = on_threads
    dask = _prepare(tmp_path / "dask", demo_inputs, "dask")
    assert threads["shards"] > 3
    assert dask == threads  # the whole manifest: counts, removals, inputs, file hashes and the data digest
    for entry in threads["files"]:
        a = (threads_ws / "data" / entry["path"]).read_bytes()
        assert a == (tmp_path / "dask" / "data" / entry["path"]).read_bytes()
    steps = {r["step"] for r in threads["removals"]}
    assert {"read", "gopher_quality", "exact_dedup", "near_dedup"} <= steps


def test_an_existing_dask_cluster_by_address(tmp_path, demo_inputs, on_threads):
    from distributed import LocalCluster

    _, threads = on_threads
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask = _prepare(
            tmp_path / "dask", demo_inputs, "dask", f"runtime.dask_address={cluster.scheduler_address}"
        )
    assert dask == threads

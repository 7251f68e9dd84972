"""The simulate flow (as the deployment runs it) on threads and on Dask: identical results, one task per batch,
and the run's result published as a markdown and a table artifact keyed by the campaign."""

import pytest

from tests.helpers.paths import DEMO

pytest.importorskip("prefect_dask")


def _run(workspace, *overrides: str) -> dict:
    from flows.simulate import SimulateParams, simulate_flow

    params = SimulateParams(
        config=str(DEMO),
        replicas=5,
        seed=11,
        overrides=["runtime.max_workers=2", *overrides],
        workspace=str(workspace),
    )  # its report goes there, not into the current folder
    return simulate_flow(params)


def test_threads_and_dask_give_identical_results_and_publish_artifacts(tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from campaign.config import load_config
    from campaign.sim import simulate_batch, summarise_replicas
    from campaign.window import window_replicas_inputs
    from flows.simulate import simulation_task_runner
    from tasks.artifacts import artifact_key
    from tasks.simulate import simulate_artifact_key

    threads = _run(tmp_path / "ws")
    dask = _run(tmp_path / "ws", "runtime.task_runner=dask")
    assert dask["summary"] == threads["summary"]
    # The same as the replicas run in this process, one after another, each at its step time from the plan's band
    # (the schedule gate's replicas).
    config = load_config(DEMO, ["seed=11"]).config
    inputs, band = window_replicas_inputs(config)
    assert threads["summary"] == summarise_replicas(simulate_batch(inputs, range(5), band), inputs.window_s)
    # Threads by default: the compiled kernels release the GIL (test_sim_compiled_releases_the_gil).
    runner = simulation_task_runner(load_config(DEMO, ["runtime.task_runner=threads"]).config.runtime)
    assert type(runner).__name__ == "ThreadPoolTaskRunner"

    key = simulate_artifact_key(config.name)
    table_key = artifact_key(config.name, "simulate-table")
    with get_client(sync_client=True) as client:
        # The newest version of each key (earlier tests may have published older ones).
        found = {
            a.key: a
            for a in sorted(
                client.read_artifacts(
                    artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key, table_key]))
                ),
                key=lambda a: a.created,
            )
        }
    assert set(found) == {key, table_key}
    assert "ETTR" in found[key].data and "5 replicas" in found[key].data
    assert "window utilisation" in str(found[table_key].data)

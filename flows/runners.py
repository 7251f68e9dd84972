"""Pick the Prefect task runner from the config: threads locally, Dask (prefect-dask) to scale out."""

from campaign.config import RuntimeConfig
from campaign.errors import ConfigError


def task_runner_for(runtime: RuntimeConfig):
    if runtime.task_runner == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=runtime.max_workers)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        raise ConfigError(
            "runtime.task_runner is 'dask' but prefect-dask is not installed",
            where="runtime.task_runner",
            fix="pip install 'campaign[dask]' or use 'threads'",
        ) from None
    if runtime.dask_address:
        return DaskTaskRunner(address=runtime.dask_address)
    return DaskTaskRunner(
        cluster_kwargs={"n_workers": runtime.max_workers, "threads_per_worker": 1, "dashboard_address": None}
    )

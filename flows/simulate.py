"""What-if: many seeded replicas of the window for a config, with percentiles; no gates, no commitment.

The replicas are CPU-bound compiled code that releases the GIL (campaign/sim/compiled.py, `nogil=True`): they run
in batches (one per worker) on threads of this process by default, so every core is busy without starting a
process (spawning worker processes that import Prefect, campaign and the kernels cost ~3 s of a 1,000-replica run,
and shutting them down ~1-2 s more), or on Dask when `runtime.task_runner` is `dask` (prefect-dask: a LocalCluster
of processes by default, `runtime.dask_address` for an existing cluster). The batches run on that task runner
whatever runner the deployment gave the flow. Results do not depend on the runner or
the split: replica r always draws from SeedSequence([seed, r]).
"""

import hashlib
import json
import sys
import time

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import quote
from pydantic import BaseModel, ConfigDict, Field

from campaign.config import RuntimeConfig, load_config
from campaign.goodput import ETTR_DEFINITION, UTILISATION_DEFINITION
from campaign.sim import SimInputs  # the package imports each name on first use: no kernels here
from campaign.sim.best import BEST_RULE, mark_best, replica_outcomes
from campaign.sim.summary import ReplicaSummary
from campaign.sim.sweeps import (
    check_sweeps,
    overrides_for,
    parse_sweep,
    sweep_grid,
    sweep_row,
)
from campaign.store import workspace_for
from campaign.window import window_replicas_inputs
from flows.common import fails_cleanly, stage_run_name
from flows.runners import task_runner_for
from tasks.simulate import publish_simulation, record_sweep, simulate_replica_batch


class SimulateParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: str = Field("configs/campaigns/demo.yaml", description="Campaign YAML.")
    overrides: list[str] = Field(default_factory=list, description="dotted.key=value overrides.")
    replicas: int | None = Field(
        None, gt=0, le=10_000_000, description="Replicas (default: sim.replicas of the config)."
    )
    seed: int | None = Field(None, ge=0, le=2**63 - 1, description="Seed (default: seed of the config).")
    sweeps: list[str] = Field(
        default_factory=list,
        description=(
            "dotted.key=v1,v2,... per swept key (several make a grid), e.g. plan.checkpoint.interval_s=600,1200."
        ),
    )
    workspace: str | None = Field(
        None, description="Workspace whose catalog stores a sweep (default workspace/<campaign name>)."
    )


@flow(name="simulate", flow_run_name=stage_run_name("simulate"))
@fails_cleanly
def simulate_flow(params: SimulateParams = SimulateParams()):
    # The replicas' module (pandas, Numba, the compiled kernels) is imported once the flow runs, so a command
    # reaches its first flow line without it.
    from campaign.sim.replicas import (
        available_memory_bytes,
        check_replicas_fit,
        replica_batches,
        summarise_replicas,
    )

    overrides = list(params.overrides) + ([f"seed={params.seed}"] if params.seed is not None else [])
    loaded = load_config(params.config, overrides)
    replicas = params.replicas or loaded.config.sim.replicas
    if params.sweeps:
        return _sweep(params, overrides, loaded, replicas)
    # The schedule gate's replicas: replica r draws its failures and its step time (from the plan's band) as the
    # gate's replica r does, so `--replicas gates.config.window_replicas` reports the gate's figures.
    inputs, band = window_replicas_inputs(loaded.config)
    check_replicas_fit(inputs, replicas, loaded.config.runtime.max_workers, available_memory_bytes())
    started = time.perf_counter()
    # One task per worker, each a contiguous batch: results do not depend on the split (replica r is seeded
    # by (seed, r)), and a batch costs one task's overhead instead of one per replica.
    batches = replica_batches(replicas, loaded.config.runtime.max_workers)
    [summaries] = _run_batches(loaded.config.runtime, [(inputs, band)], batches)
    result = {
        "replicas": replicas,
        "seed": loaded.config.seed,
        "config_digest": loaded.digest,
        "wall_s": time.perf_counter() - started,
        "step_time_band": list(band),
        "summary": summarise_replicas(summaries, inputs.window_s, inputs.stop_at_target),
    }
    from tasks.analyse import simulate_report  # the report's plots and templates: imported once the flow runs

    # quote(): Prefect would otherwise visit every value of the 1,000 replica summaries looking for futures, in
    # both tasks' parameter resolution and input tracking (about 2 s of a 1,000-replica run, cProfile).
    # The summary's two artifacts go to the API on a thread of their own while the report draws its figures: the
    # two tasks need nothing of each other, and each artifact is a write the server commits (30-60 ms).
    side: ThreadPoolTaskRunner[str] = ThreadPoolTaskRunner(max_workers=1)
    with side as runner:
        published = runner.submit(
            publish_simulation, {"campaign": loaded.config.name, "result": quote(result)}
        )
        report = simulate_report(quote(result), quote(summaries), loaded.config.name, params.workspace)
        published.result()
    return result | report


def simulation_task_runner(runtime: RuntimeConfig):
    """Threads (the compiled replicas release the GIL, so each thread has a core), or Dask when the config asks."""
    if runtime.task_runner == "dask":
        return task_runner_for(runtime)
    return ThreadPoolTaskRunner(max_workers=runtime.max_workers)


def _run_batches(
    runtime: RuntimeConfig, points: list[tuple[SimInputs, tuple[float, float]]], batches: list[range]
) -> list[list[ReplicaSummary]]:
    """Every (point, batch) as one `simulate-batch` task of this flow run, on the simulation's own task runner
    entered here (whatever runner the deployment gave the flow); summaries per point in replica order.

    The runner is used directly rather than through a subflow that carries it: every Prefect 3.9 flow run ends by
    joining its heartbeat thread, which sleeps in one-second steps (flow_engine._send_heartbeats), so a subflow
    cost about 1 s of a 1,000-replica run that computes in about 2 s."""
    with simulation_task_runner(runtime) as runner:
        futures = [
            [
                runner.submit(simulate_replica_batch, {"inputs": inputs, "replicas": batch, "band": band})
                for batch in batches
            ]
            for inputs, band in points
        ]
        return [[s for f in point_futures for s in f.result()] for point_futures in futures]


def _sweep(params: SimulateParams, overrides: list[str], loaded, replicas: int):
    """Every grid point on the same replica seeds; one task per (point, worker batch); rows stored and published."""
    from campaign.sim.replicas import (
        available_memory_bytes,
        check_replicas_fit,
        replica_batches,
        summarise_replicas,
    )

    workers = loaded.config.runtime.max_workers
    check_sweeps(params.config, overrides, params.sweeps)
    axes = [parse_sweep(spec) for spec in params.sweeps]
    grid = sweep_grid(axes)
    points = []
    for point in grid:
        config = load_config(params.config, overrides + overrides_for(point)).config
        points.append(window_replicas_inputs(config))
    check_replicas_fit(points[0][0], replicas * len(points), workers, available_memory_bytes())
    started = time.perf_counter()
    batches = replica_batches(replicas, workers)
    per_point = _run_batches(loaded.config.runtime, points, batches)
    rows, outcomes = [], []
    for i, (point, (inputs, _), summaries) in enumerate(zip(grid, points, per_point, strict=False)):
        rows.append(
            sweep_row(i, point, summarise_replicas(summaries, inputs.window_s, inputs.stop_at_target))
        )
        outcomes.append(replica_outcomes(summaries, inputs.window_s))
    rows = mark_best(rows, outcomes)
    sweep_id = hashlib.sha256(json.dumps([loaded.digest, params.sweeps, replicas]).encode()).hexdigest()
    ws = workspace_for(loaded.config.name, params.workspace)
    record_sweep(ws, sweep_id, loaded.digest, loaded.config.seed, replicas, rows)
    return {
        "replicas": replicas,
        "seed": loaded.config.seed,
        "config_digest": loaded.digest,
        "wall_s": time.perf_counter() - started,
        "sweep": {
            "sweep_id": sweep_id,
            "keys": [a.key for a in axes],
            "rows": rows,
            # None when no point is better beyond the replicas' paired noise: `tied` lists the points tied for it
            "best": next((r["values"] for r in rows if r["is_best"]), None),
            "tied": [r["values"] for r in rows if r["tied"]],
            "best_rule": BEST_RULE,
        },
        "definitions": {"ettr": ETTR_DEFINITION, "window_utilisation": UTILISATION_DEFINITION},
        "workspace": str(ws.root),
    }


def simulate_with_runner(params: SimulateParams):
    """The flow's final state (the CLI's entry; the replicas' runner is chosen inside, from the config)."""
    return simulate_flow(params, return_state=True)


if __name__ == "__main__":
    from campaign_cli.terminal import flow_main

    sys.exit(flow_main(simulate_flow, call=simulate_with_runner))

"""`campaign simulate` (what-if replicas and sweeps) and `campaign power` (the facility notice)."""

import json
from pathlib import Path
from typing import Annotated

import typer

from campaign_cli.commands.app import ConfigArg, JsonOpt, SetOpt, WorkspaceOpt, _imports, app
from campaign_cli.terminal import finish as _finish
from campaign_cli.terminal import prefect_api as _prefect_api
from campaign_cli.terminal import workspace_if_any as _workspace_if_any


@app.command()
def simulate(
    config: ConfigArg,
    replicas: Annotated[
        int | None,
        typer.Option(help="Seeded replicas (checked against free memory first).", min=1, max=10_000_000),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (default: the config's).")] = None,
    json_: JsonOpt = False,
    set_: SetOpt = None,
    sweep: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            help="dotted.key=v1,v2,... : a table of ETTR, completion days, P(target in window), energy and "
            "cost per value, best marked, stored in the catalog (repeat for a grid).",
        ),
    ] = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """What-if replicas of the window with percentiles; no gates, no commitment."""
    from campaign_cli import kept_worker

    ws = _workspace_if_any(workspace)
    home = ws.root / ".prefect" if ws is not None else None
    in_worker = kept_worker.enabled()
    if not (in_worker and kept_worker.serves(home, "simulate")):
        # Bad input fails here, before a Prefect API or a worker starts; a running worker checks it itself, where
        # the config's modules are already imported (this process then never imports them).
        from campaign.sim.sweeps import check_sweeps

        check_sweeps(config, list(set_ or []), list(sweep or []))
    args = {
        "config": config,
        "overrides": list(set_ or []),
        "replicas": replicas,
        "seed": seed,
        "sweeps": list(sweep or []),
        "workspace": workspace,
    }
    if in_worker:
        # The flow runs in the worker kept beside the local server, which holds Prefect, the kernels and the
        # report's plotting already imported: this process imports none of them.
        result = kept_worker.run_in_worker(home, "simulate", args)
    else:
        with _prefect_api(ws, warm=_imports("flows.simulate", "campaign.analysis.plots")):
            from flows.simulate import SimulateParams, simulate_with_runner

            result = _finish(simulate_with_runner(SimulateParams(**args)))
    if json_:
        typer.echo(json.dumps(result, indent=2, default=str))
        return
    if "sweep" in result:
        from campaign.sim.sweeps import best_line, sweep_table_markdown

        typer.echo(
            f"sweep of {', '.join(result['sweep']['keys'])}: {result['replicas']} replicas per point "
            f"(seed {result['seed']}) in {result['wall_s']:.2f} s; best: {result['sweep']['best_rule']}"
        )
        typer.echo(sweep_table_markdown(result["sweep"]["rows"]))
        typer.echo(best_line(result["sweep"]["rows"]))
        typer.echo(
            f"stored in {result['workspace']}/campaign.duckdb (sim_sweeps, sweep_id "
            f"{result['sweep']['sweep_id'][:12]})"
        )
        return
    from campaign.figures import tokens_b
    from campaign.goodput import LOST_DEFINITION
    from campaign.sim.summary import COMPLETION_DAYS_LABEL, TARGET_DAYS_LABEL

    s = result["summary"]
    low, high = result.get("step_time_band", (1.0, 1.0))
    typer.echo(
        f"{result['replicas']} replicas (seed {result['seed']}) in {result['wall_s']:.2f} s, each at a step time "
        f"drawn from the plan's band ({low:.2f}-{high:.2f}x its step), as the schedule gate's replicas"
    )
    labels = {"target_days": TARGET_DAYS_LABEL, "completion_days": COMPLETION_DAYS_LABEL}
    for key in (
        "ettr",
        "window_utilisation",
        "interruptions_unexpected",
        "interruptions_planned",
        "tokens_trained",
        "target_days",
        "completion_days",
    ):
        v = s[key]

        def fmt(x):
            return "n/a" if x is None else f"{x:.4g}"

        typer.echo(
            f"  {key:26s} mean {fmt(v['mean'])}  p10 {fmt(v['p10'])}  p50 {fmt(v['p50'])}  p90 {fmt(v['p90'])}"
        )
        if key in labels:
            typer.echo(f"  {'':26s} ({labels[key]})")
    length = s["window_length"]
    typer.echo(
        f"  P(target in window)        {s['p_target_in_window']:.2f} ({length['reached']} of {length['replicas']} "
        f"replicas reached {tokens_b(s['tokens_target'])} tokens inside the window): the window "
        f"{'suffices' if length['suffices'] else 'is too short'}"
        + (", longer than needed" if length["verdict"] == "too_long" else "")
    )
    typer.echo(
        f"  P(complete in window)      {s['p_complete_in_window']:.2f}"
        + ("  (a snapshot window trains to its end: it never completes)" if length["trains_through"] else "")
    )
    cost = s["cost_usd"]
    typer.echo(
        f"  cost per replica (mean)    compute ${cost['compute']:,.0f}, energy ${cost['energy']:,.0f}, lost to "
        f"failures ${cost['lost']:,.0f} ({LOST_DEFINITION})"
    )
    typer.echo(
        f"  released (mean)            {s['goodput_breakdown_gpu_h']['idle_released']:,.1f} GPU-hours after an "
        "early finish: capacity back to the cluster, not a loss"
    )
    typer.echo(f"  window rule: {length['rule']}")
    typer.echo(
        f"  ettr = {s['definitions']['ettr']}\n  window_utilisation = {s['definitions']['window_utilisation']}"
    )
    if result.get("report_html"):
        typer.echo(f"report: {result['report_html']}")


@app.command()
def power(
    config: ConfigArg,
    replicas: Annotated[
        int | None,
        typer.Option(help="Seeded replicas per setting (default: sim.replicas).", min=1, max=10_000),
    ] = None,
    workspace: WorkspaceOpt = None,
    json_: JsonOpt = False,
    set_: SetOpt = None,
) -> None:
    """The facility power notice: hourly MW, swings, ramps, oscillation, smoothing trade-off (power/<digest>-power.md)."""
    from campaign import store
    from campaign.config import load_config

    loaded = load_config(config, list(set_ or []))  # bad input fails here, before a Prefect API starts
    ws = store.adopt_workspace(store.workspace_for(loaded.config.name, workspace), loaded.config.name)
    with _prefect_api(ws, warm=_imports("flows.power")):
        from flows.power import PowerParams, power_flow

        params = PowerParams(
            config=config, overrides=list(set_ or []), replicas=replicas, workspace=workspace
        )
        result = _finish(power_flow(params, return_state=True))
    if json_:
        typer.echo(json.dumps(result["notice"], indent=2, default=str))
        return

    typer.echo(Path(result["markdown"]).read_text(encoding="utf-8"))
    typer.echo(f"written: {result['markdown']} and {result['json']}")

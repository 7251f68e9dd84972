"""The `campaign` command: parse, load the config, call a flow or a pure plan, print, exit with its code.

The outermost layer: nothing imports it (tests/unit/test_layering.py). What running a flow from a terminal
needs (its Prefect API, its console, its exit code) lives in campaign_cli/terminal.py, shared with `python -m flows.<x>`.
Exit codes: 0 done; 1 a gate failed or a plan does not fit; 2 bad input; 3 refused; 4 workspace busy;
70 an internal error (a bug).
"""

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from campaign.errors import CampaignError, ConfigError
from campaign_cli.terminal import calendar_env as _calendar_env
from campaign_cli.terminal import exit_code_of, print_validate, run_stage, stage_summary
from campaign_cli.terminal import finish as _finish
from campaign_cli.terminal import prefect_api as _prefect_api
from campaign_cli.terminal import workspace_if_any as _workspace_if_any


def _imports(*modules: str):
    """The command's own imports, to run while a private Prefect API starts (campaign_cli/local_api.py `warm`): the
    server takes ~2.5 s to answer and importing a flow with Prefect and its plots ~2 s, so overlapped they cost
    the longer of the two, not the sum."""
    import importlib

    return lambda: [importlib.import_module(m) for m in modules]


os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Plan, prove ready, run (simulated) and analyse a large training campaign.",
)

ConfigArg = Annotated[str, typer.Argument(help="Campaign YAML, e.g. configs/campaigns/demo.yaml.")]
WorkspaceOpt = Annotated[
    str | None,
    typer.Option("--workspace", "-w", help="Workspace folder (default workspace/<campaign name>)."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override one config value: dotted.key=value (repeatable), e.g. --set cluster.nodes=1024.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
CalendarOpt = Annotated[
    str | None,
    typer.Option(
        "--calendar",
        help="The cluster's calendar file (default "
        "calendars/<cluster name>.duckdb beside the workspace, or "
        "CAMPAIGN_CALENDAR).",
    ),
]


@app.command()
def run(
    config: ConfigArg, workspace: WorkspaceOpt = None, set_: SetOpt = None, calendar: CalendarOpt = None
) -> None:
    """The whole lifecycle: prepare, validate, commit, execute, analyse (exit 1 if a gate failed)."""
    typer.echo(stage_summary("run", run_stage("run", config, workspace, set_, calendar)))


@app.command()
def prepare(config: ConfigArg, workspace: WorkspaceOpt = None, set_: SetOpt = None) -> None:
    """Clean and deduplicate the sources; keep every rejected document with its reason."""
    typer.echo(stage_summary("prepare", run_stage("prepare", config, workspace, set_)))


@app.command()
def validate(config: ConfigArg, workspace: WorkspaceOpt = None, set_: SetOpt = None) -> None:
    """Run every gate and print a table (exit 1 if any failed)."""
    try:
        results = run_stage("validate", config, workspace, set_)
    except CampaignError as err:
        print_validate(err)
        raise
    print_validate(results)


@app.command()
def commit(
    config: ConfigArg, workspace: WorkspaceOpt = None, set_: SetOpt = None, calendar: CalendarOpt = None
) -> None:
    """Book the window if every gate passed for this config and data (exit 3 if refused)."""
    typer.echo(stage_summary("commit", run_stage("commit", config, workspace, set_, calendar)))


@app.command()
def execute(
    config: ConfigArg,
    workspace: WorkspaceOpt = None,
    set_: SetOpt = None,
    calendar: CalendarOpt = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="simulate (the model of the window), local (a real run supervised on this machine) or slurm; "
            "the same as --set execute.backend=...",
        ),
    ] = None,
) -> None:
    """Run the committed window: simulate it, or run it for real (exit 3 if nothing valid is committed)."""
    overrides = [*(set_ or []), *([f"execute.backend={backend}"] if backend is not None else [])]
    typer.echo(stage_summary("execute", run_stage("execute", config, workspace, overrides or None, calendar)))


@app.command()
def analyse(
    workspace: WorkspaceOpt = None,
    json_: JsonOpt = False,
    compare: Annotated[
        list[str] | None,
        typer.Option(
            "--compare",
            help="Set runs side by side: two or more workspaces or `campaign simulate --json` "
            "files (repeat, or list them after --compare).",
        ),
    ] = None,
    out: Annotated[
        str, typer.Option("--out", help="Folder for compare.html/compare.json (with --compare).")
    ] = "compare",
    extra: Annotated[
        list[str] | None, typer.Argument(help="More --compare targets.", show_default=False)
    ] = None,
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            help="Analyse a run campaign did not launch from its metrics file (JSON lines with a `time` on each "
            "step; docs/execution.md); the report goes to --out (default report).",
        ),
    ] = None,
    incidents: Annotated[
        str | None,
        typer.Option(
            "--incidents", help="With --metrics: the incident log's incidents file (time,category,node)."
        ),
    ] = None,
) -> None:
    """Analyse the executed window and write report/report.html (or compare runs with --compare, or a run read
    from its files with --metrics)."""
    from campaign.analysis.analysis import analysis_workspace
    from campaign.analysis.compare import check_targets, compare_out_dir

    if incidents and not metrics:
        raise ConfigError(
            "--incidents needs --metrics",
            where="campaign analyse",
            fix="give the run's metrics file with --metrics",
        )
    if metrics:
        from campaign.analysis.report import write_report
        from campaign.execution.external import external_report_inputs
        from campaign.files import atomic_write_json

        inputs = external_report_inputs(Path(metrics), Path(incidents) if incidents else None)
        report_dir = Path("report" if out == "compare" else out).resolve()
        html, _, _ = write_report(report_dir, inputs)
        result = {**inputs.result, "report_html": str(html)}
        atomic_write_json(report_dir / "analysis.json", result)
        if json_:
            typer.echo(json.dumps(result, indent=2, default=str))
        else:
            typer.echo(
                f"measured run: ETTR {result['ettr']:.3f}, {result['interruptions']['unexpected']} restarts, step "
                f"{result['measured']['final_step']:,}; report: {html}"
            )
        return

    if compare or extra:
        if extra and not compare:
            raise ConfigError(
                f"unexpected arguments {' '.join(extra)}",
                where="campaign analyse",
                fix="use --compare W1 W2 ... to compare runs, or --workspace DIR to analyse one",
            )
        targets = [*(compare or []), *(extra or [])]
        check_targets(targets)  # bad input refused before a Prefect API starts or anything is written
        out_dir = str(compare_out_dir(out))  # absolute: the flow may run in another folder
        with _prefect_api(None, warm=_imports("flows.analyse", "campaign.analysis.plots")):
            from flows.analyse import CompareParams, compare_flow

            result = _finish(compare_flow(CompareParams(targets=targets, out_dir=out_dir), return_state=True))
        if json_:
            typer.echo(json.dumps(result, indent=2, default=str))
        else:
            typer.echo(
                f"{len(targets)} runs compared; differences: {', '.join(result['differences']) or 'none'}; "
                f"report: {result['report_html']}"
            )
        return
    ws = analysis_workspace(workspace)  # bad input refused before a Prefect API starts or anything is written
    with _prefect_api(ws, warm=_imports("flows.analyse", "campaign.analysis.plots")):
        from flows.analyse import AnalyseParams, analyse_flow

        result = _finish(analyse_flow(AnalyseParams(workspace=str(ws.root)), return_state=True))
    if json_:
        typer.echo(json.dumps(result, indent=2, default=str))
    else:
        typer.echo(
            f"ETTR while the job ran {result['ettr']:.3f} (window utilisation "
            f"{result['window_utilisation']:.3f}); lost to failures ${result['cost_usd']['lost']:,.0f}; "
            f"report: {result['report_html']}"
        )


@app.command(name="sql")
def sql_(
    query: Annotated[
        str,
        typer.Argument(
            help="A SELECT over the catalog and its views (executed_window, "
            "window_events, interruptions_by_day, gate_figures, "
            "rejections_by_reason, data_mixture)."
        ),
    ],
    workspace: WorkspaceOpt = None,
    json_: JsonOpt = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=0, max=86_400, help="Stop the query after this many seconds (0: no limit)."
        ),
    ] = 60.0,
) -> None:
    """Query the workspace catalog read-only and print a table (or JSON rows)."""
    import duckdb

    from campaign.analysis.catalog_sql import format_table, run_query

    try:
        columns, rows = run_query(workspace, query, timeout)
    except (RuntimeError, duckdb.InterruptException) as exc:
        # DuckDB turns a Ctrl-C during a query into RuntimeError("Query interrupted"): the user's interrupt,
        # reported as every other command reports one (exit 130), not as a bug
        if "interrupted" in str(exc).lower():
            raise KeyboardInterrupt from None
        raise
    if json_:
        typer.echo(json.dumps([dict(zip(columns, r, strict=True)) for r in rows], indent=2, default=str))
    else:
        typer.echo(format_table(columns, rows))


plan_app = typer.Typer(
    no_args_is_help=True,
    help="Performance, memory and checkpoint plan of CONFIG (`campaign plan CONFIG [--json] [--search]`), or "
    "`campaign plan measure METRICS.jsonl ...` to turn a short run into a plan.measured entry.",
)
app.add_typer(plan_app, name="plan")


@plan_app.command(name="measure")
def plan_measure(
    metrics: Annotated[str, typer.Argument(help="A trainer's metrics file (JSON lines, docs/rehearsal.md).")],
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes the run used.", min=1)],
    layout: Annotated[
        str, typer.Option("--layout", help="The run's layout, e.g. tp=8,pp=4,dp=16 (cp, vpp: 1).")
    ],
    global_batch_tokens: Annotated[
        int | None,
        typer.Option(
            "--global-batch-tokens", help="Tokens per step (default: the records' 'tokens').", min=1
        ),
    ] = None,
    skip_steps: Annotated[
        int | None,
        typer.Option("--skip-steps", help="Warm-up steps to drop (default: the first 10 %).", min=0),
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Median step time of a short run, warm-up dropped, as the plan.measured entry to paste into the config
    (with the spread it saw); names a step-time series that drifts or has two modes."""
    from campaign.errors import DataError
    from campaign.plan.measure import measure, parse_layout, read_step_times

    lay = parse_layout(layout)
    times = read_step_times(Path(metrics), skip_steps)
    tokens = global_batch_tokens or times.tokens_per_step
    if tokens is None:
        raise DataError(
            "the records give no single 'tokens' per step",
            where=metrics,
            fix="pass --global-batch-tokens with the run's tokens per optimizer step",
        )
    result = measure(times)
    source = f"{Path(metrics).name}: median of {result.n_steps} steps"
    if json_:
        entry = {
            "nodes": nodes,
            "layout": lay,
            "global_batch_tokens": tokens,
            "step_time_s": result.median_s,
            "source": source,
        }
        out = {
            "measured": entry,
            "p10_s": result.p10_s,
            "p90_s": result.p90_s,
            "spread": result.spread,
            "n_steps": result.n_steps,
            "skipped": result.skipped,
            "problems": list(result.problems),
        }
        typer.echo(json.dumps(out, indent=2))
    else:
        typer.echo("plan:")
        typer.echo(result.entry_yaml(nodes, lay, tokens, source))
        for problem in result.problems:
            typer.echo(f"# not stationary: {problem}", err=True)


@plan_app.command(name="show", hidden=True)
def plan(
    config: ConfigArg,
    json_: JsonOpt = False,
    search: Annotated[
        bool, typer.Option("--search", help="Rank every legal layout for this cluster and model.")
    ] = False,
    set_: SetOpt = None,
) -> None:
    """Performance, memory and checkpoint plan (exit 1 if the layout cannot run: a layout rule or memory; a
    schedule miss is reported in the output and by validate's schedule gate, exit 0)."""
    from campaign.config import load_config
    from campaign.plan import make_plan, search_layouts

    loaded = load_config(config, list(set_ or []))
    best = make_plan(loaded.config)
    out = best.to_json()
    out["config_digest"] = loaded.digest
    if search:
        out["search"] = [p.to_json() for p in search_layouts(loaded.config)]
    if json_:
        typer.echo(json.dumps(out, indent=2, default=str))
    else:
        typer.echo(_plan_text(out))
    if not best.runs:
        raise typer.Exit(1)


def _plan_text(p: dict[str, Any]) -> str:
    lay = p["layout"]
    mtbf = f"{p['job_mtbf_h']:.2f} h" if p["job_mtbf_h"] is not None else "n/a (no failures modelled)"
    band = p.get("step_time_range_s") or [p["step_time_s"], p["step_time_s"]]
    lines = [
        f"GPUs {p['gpus']:,}  layout tp={lay['tp']} pp={lay['pp']} dp={lay['dp']} cp={lay['cp']}",
        (
            f"memory {p['memory_gib_per_gpu']:.1f} GiB/GPU   step {p['step_time_s']:.2f} s "
            f"(band {band[0]:.2f}-{band[1]:.2f} s)   MFU {p['mfu']:.1%}   {p['tokens_per_s']:,.0f} tokens/s"
        ),
        f"basis: {p.get('basis', '')}",
        "memory by kind: "
        + ", ".join(f"{k} {v:.2f}" for k, v in p.get("memory_breakdown_gib", {}).items())
        + " GiB",
        (
            f"checkpoint {p['checkpoint']['size_gb']:,.0f} GB, write {p['checkpoint']['write_s']:.0f} s, every "
            f"{p['checkpoint']['interval_s']:.0f} s   job MTBF {mtbf}"
        ),
        (
            f"expected ETTR {p['expected_ettr']:.3f}, {p['expected_days']:.1f} days   runs: {p['runs']}   "
            f"fits the window: {not any(v.startswith('schedule') for v in p['violations'])}"
        ),
    ]
    lines += [f"  violation: {v}" for v in p["violations"]]
    for alt in p.get("search", []):
        a = alt["layout"]
        lines.append(
            f"  search: tp={a['tp']} pp={a['pp']} dp={a['dp']} cp={a['cp']} vpp={a.get('vpp', 1)} "
            f"mb={alt.get('micro_batch', '')}: {alt['tokens_per_s']:,.0f} tok/s, "
            f"{alt['memory_gib_per_gpu']:.1f} GiB, fits={alt['fits']}"
        )
    return "\n".join(lines)


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
    from campaign.sim.sweeps import check_sweeps

    check_sweeps(
        config, list(set_ or []), list(sweep or [])
    )  # bad input fails here, before a Prefect API starts
    with _prefect_api(
        _workspace_if_any(workspace), warm=_imports("flows.simulate", "campaign.analysis.plots")
    ):
        from flows.simulate import SimulateParams, simulate_with_runner

        params = SimulateParams(
            config=config,
            overrides=list(set_ or []),
            replicas=replicas,
            seed=seed,
            sweeps=list(sweep or []),
            workspace=workspace,
        )
        result = _finish(simulate_with_runner(params))
    if json_:
        typer.echo(json.dumps(result, indent=2, default=str))
        return
    if "sweep" in result:
        from campaign.sim.sweeps import sweep_table_markdown

        typer.echo(
            f"sweep of {', '.join(result['sweep']['keys'])}: {result['replicas']} replicas per point "
            f"(seed {result['seed']}) in {result['wall_s']:.2f} s; best: {result['sweep']['best_rule']}"
        )
        typer.echo(sweep_table_markdown(result["sweep"]["rows"]))
        typer.echo(
            f"stored in {result['workspace']}/campaign.duckdb (sim_sweeps, sweep_id "
            f"{result['sweep']['sweep_id'][:12]})"
        )
        return
    from campaign.figures import tokens_b

    s = result["summary"]
    low, high = result.get("step_time_band", (1.0, 1.0))
    typer.echo(
        f"{result['replicas']} replicas (seed {result['seed']}) in {result['wall_s']:.2f} s, each at a step time "
        f"drawn from the plan's band ({low:.2f}-{high:.2f}x its step), as the schedule gate's replicas"
    )
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
    from pathlib import Path

    typer.echo(Path(result["markdown"]).read_text(encoding="utf-8"))
    typer.echo(f"written: {result['markdown']} and {result['json']}")


# ------------------------------------------------------------------------------------------- calendar

calendar_app = typer.Typer(
    no_args_is_help=True, help="The cluster's calendar: bookings, idle gaps and their cost."
)
app.add_typer(calendar_app, name="calendar")
ClusterOpt = Annotated[
    str | None, typer.Option("--cluster", help="Cluster name (default: the only calendar).")
]
WorkspacesOpt = Annotated[
    str | None,
    typer.Option(
        "--workspaces", help="Folder holding the workspaces, whose calendars/ to use (default workspace)."
    ),
]


@calendar_app.command("show")
def calendar_show(
    cluster: ClusterOpt = None,
    from_: Annotated[
        str | None, typer.Option("--from", help="Horizon start, ISO 8601 (default: the first booking).")
    ] = None,
    to: Annotated[
        str | None, typer.Option("--to", help="Horizon end, ISO 8601 (default: the last booked end).")
    ] = None,
    json_: JsonOpt = False,
    calendar: CalendarOpt = None,
    workspaces: WorkspacesOpt = None,
) -> None:
    """Bookings, utilisation and every idle gap with its cost; a Gantt PNG beside the calendar."""
    from campaign import calendar as cal
    from campaign import store
    from campaign.calendar.horizon import horizon, locate_calendar

    path = locate_calendar(cluster, calendar, workspaces)
    horizon(
        cal.read_calendar(path), store.now(), from_, to
    )  # bad input fails here, before a Prefect API starts
    with _prefect_api(None, warm=_imports("flows.calendar")):
        from flows.calendar import CalendarParams, calendar_report_flow

        report = _finish(
            calendar_report_flow(CalendarParams(calendar=str(path), start=from_, end=to), return_state=True)
        )
    if json_:
        typer.echo(json.dumps(report, indent=2))
        return
    typer.echo(_calendar_text(report))


def _calendar_text(r: dict[str, Any]) -> str:
    t, h = r["totals"], r["horizon"]
    lines = [
        f"cluster {r['cluster']}: {t['cluster_nodes']} nodes, {h['start']} .. {h['end']} ({h['hours']:,.1f} h)",
        (
            f"utilisation {t['utilisation']:.1%}: busy {t['busy_node_hours']:,.1f} node-h, idle "
            f"{t['idle_node_hours']:,.1f} node-h costing ${t['idle_cost_usd']:,.2f}"
        ),
        "bookings:",
    ]
    lines += [
        f"  {b['commitment_id']:16s} {b['campaign']:16s} {b['start']} .. {b['actual_end'] or b['end']}  "
        f"{b['nodes']:5d} nodes  {b['status']}"
        for b in r["bookings"]
    ] or ["  (none)"]
    lines.append("gaps:")
    lines += [
        f"  {g['start']} .. {g['end']}  {g['hours']:8.1f} h  {g['idle_nodes']:5d} idle nodes  "
        f"{g['idle_node_hours']:10,.1f} node-h  ${g['cost_usd']:,.2f}"
        + ("  (early finish of " + g["released_by"] + ")" if g["released_by"] else "")
        for g in r["gaps"]
    ]
    lines.append(f"gantt: {r['gantt_png']}")
    return "\n".join(lines)


@calendar_app.command("propose")
def calendar_propose(
    config: ConfigArg,
    json_: JsonOpt = False,
    workspace: WorkspaceOpt = None,
    calendar: CalendarOpt = None,
    set_: SetOpt = None,
) -> None:
    """The earliest start where the campaign fits, and the start that strands the least idle capacity."""
    from datetime import timedelta

    from campaign import calendar as cal
    from campaign import store
    from campaign.config import load_config

    loaded = load_config(config, list(set_ or []))
    cfg = loaded.config
    ws = store.workspace_for(cfg.name, workspace)
    identity = cal.cluster_identity(cfg.cluster)
    with _calendar_env(calendar):
        path = cal.calendar_path(cfg.cluster.name, ws.root)
    state = cal.read_calendar(path, identity)
    out = cal.propose(
        state,
        cfg.cluster.booked_nodes,
        timedelta(seconds=round(cfg.window.days * 86_400)),
        store.now(),
        cfg.window.fixed_start,
        cfg.window.align,
    )
    if json_:
        typer.echo(json.dumps(out, indent=2))
        return
    typer.echo(
        f"cluster {out['cluster']} ({out['cluster_nodes']} nodes): {out['nodes']} nodes for {out['hours']:g} h"
    )
    from campaign.calendar.proposals import proposal_text

    typer.echo(proposal_text(out))


@calendar_app.command("cancel")
def calendar_cancel(
    commitment: Annotated[str, typer.Argument(help="Commitment id (c-...) or maintenance id.")],
    reason: Annotated[str, typer.Option("--reason", help="Why: kept on record with the booking.")],
    cluster: ClusterOpt = None,
    calendar: CalendarOpt = None,
    workspaces: WorkspacesOpt = None,
) -> None:
    """Release a booking: recorded with its reason, never deleted; execute then refuses the commitment."""
    from campaign import calendar as cal
    from campaign import store
    from campaign.calendar.horizon import locate_calendar
    from campaign.errors import ConfigError

    if cluster or calendar or os.environ.get(cal.CALENDAR_ENV):
        paths = [locate_calendar(cluster, calendar, workspaces)]
    else:
        paths = cal.calendars_in(Path(workspaces or "workspace") / "calendars")
    for path in paths:
        if cal.find_booking(cal.read_calendar(path), commitment) is not None:
            booking = cal.cancel(path, commitment, reason, store.now())
            typer.echo(
                f"cancelled {booking.commitment_id} ({booking.nodes} nodes, {booking.start} .. {booking.end}) "
                f"on {path}: {reason}"
            )
            return
    where = (
        ", ".join(str(p) for p in paths) or f"{Path(workspaces or 'workspace') / 'calendars'} (no calendars)"
    )
    raise ConfigError(
        f"unknown commitment {commitment!r}: no calendar holds it",
        where=where,
        fix="give an id from `campaign calendar show`, or the calendar that holds it with --cluster "
        "or --calendar",
    )


@calendar_app.command("maintenance")
def calendar_maintenance(
    config: ConfigArg,
    start: Annotated[str, typer.Option("--start", help="Start, ISO 8601.")],
    hours: Annotated[float, typer.Option("--hours", min=0.01, max=8784.0, help="Length, hours.")],
    reason: Annotated[str, typer.Option("--reason", help="What the maintenance is.")],
    nodes: Annotated[
        int | None,
        typer.Option("--nodes", min=1, max=2_000_000, help="Nodes it takes (default: the whole cluster)."),
    ] = None,
    workspace: WorkspaceOpt = None,
    calendar: CalendarOpt = None,
    set_: SetOpt = None,
) -> None:
    """Book a maintenance window on the cluster of CONFIG (a booking like any other; cancel it by its id)."""
    import uuid
    from datetime import timedelta

    from campaign import calendar as cal
    from campaign import store
    from campaign.calendar.horizon import parse_moment
    from campaign.errors import ConfigError

    if not reason.strip():
        raise ConfigError("a maintenance window needs a reason", where="--reason", fix="say what it is")
    from campaign.config import load_config

    loaded = load_config(config, list(set_ or []))
    cfg = loaded.config
    ws = store.workspace_for(cfg.name, workspace)
    with _calendar_env(calendar):
        path = cal.calendar_path(cfg.cluster.name, ws.root)
    identity = cal.cluster_identity(cfg.cluster)
    booking = cal.book(
        path,
        identity,
        cal.BookingRequest(
            commitment_id=f"m-{uuid.uuid4().hex[:12]}",
            campaign="maintenance",
            kind=cal.MAINTENANCE,
            nodes=nodes or identity.total_nodes,
            duration=timedelta(seconds=round(hours * 3600)),
            start=parse_moment(start, "--start"),
            note=reason,
            start_given_by="--start",
        ),
        store.now(),
    )
    typer.echo(
        f"maintenance {booking.commitment_id}: {booking.nodes} nodes {booking.start} .. {booking.end} on {path}"
    )


# ------------------------------------------------------------------------------------------- failures

failures_app = typer.Typer(
    no_args_is_help=True, help="Failure profiles fitted from your own incident log (docs/failures.md)."
)
app.add_typer(failures_app, name="failures")


@failures_app.command("fit")
def failures_fit(
    jobs: Annotated[str, typer.Option("--jobs", help="Jobs log, CSV or Parquet: job_id,start,end,gpus.")],
    incidents: Annotated[
        str, typer.Option("--incidents", help="Incidents log, CSV or Parquet: time,job_id,category,node.")
    ],
    json_: JsonOpt = False,
    out: Annotated[
        str | None,
        typer.Option(
            "--out", help="Write the fitted profile here: the YAML list a config's cluster.failures names."
        ),
    ] = None,
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            help="A failure profile or campaign config whose categories the log's are matched to by name (their "
            "detect, restart and repair times and scopes carry over; an unknown category is kept as its own).",
        ),
    ] = None,
    gpus_per_node: Annotated[
        int | None,
        typer.Option(
            "--gpus-per-node", min=1, max=1024, help="GPUs per node (default: --base's campaign, else 8)."
        ),
    ] = None,
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes",
            min=1,
            help="Nodes in the cluster, for the lemon-node test (default: the nodes the log names).",
        ),
    ] = None,
    sizes: Annotated[
        str, typer.Option("--sizes", help="Job sizes (GPUs) to predict the job MTTF at, comma-separated.")
    ] = "1024,2048,4096,8192,16384",
    report: Annotated[
        str | None,
        typer.Option(
            "--report",
            help="Write an HTML page: rates with intervals, MTTF against job size, the lemon nodes.",
        ),
    ] = None,
) -> None:
    """Fit each failure category's scope, rate and 95% interval, the lemon nodes and the job MTTF by job size
    (exit 2 on a bad row, naming file:line; nothing is written then)."""
    from campaign.failures import fit_incident_log
    from campaign.files import atomic_write_text

    try:
        at_sizes = [int(v) for v in sizes.split(",") if v.strip()]
    except ValueError:
        at_sizes = []
    if not at_sizes or min(at_sizes) < 1:
        raise ConfigError(
            f"--sizes {sizes!r} is not a list of GPU counts",
            where="--sizes",
            fix="write e.g. --sizes 1024,16384",
        )
    fit, profile = fit_incident_log(
        jobs, incidents, base=base, gpus_per_node=gpus_per_node, nodes=nodes, sizes=at_sizes
    )
    if out:
        atomic_write_text(out, profile)
    if report:
        from campaign.failures.report import fit_report_html

        title = f"Failure profile fitted from {Path(incidents).name}"
        atomic_write_text(report, fit_report_html(fit.to_json(), title))
    if json_:
        typer.echo(json.dumps(fit.to_json(), indent=2))
        return
    typer.echo(_failures_text(fit.to_json(), out, report))


def _failures_text(f: dict[str, Any], out: str | None, report: str | None) -> str:
    e = f["exposure"]
    lines = [
        f"{f['incidents']:,} incidents in {f['jobs']:,} jobs ({f['segments']:,} segments): "
        f"{e['gpu_hours']:,.0f} GPU-hours, {e['job_hours']:,.0f} job-hours, {e['node_days']:,.0f} node-days",
        "",
        f"{'category':<28} {'scope':<5} {'count':>7} {'rate':>10}  {'95% interval':<22} unit",
    ]
    seen = [c for c in f["categories"] if c["count"]]
    for c in seen:
        lo, hi = c["ci95"]
        lines.append(
            f"{c['name']:<28} {c['scope']:<5} {c['count']:>7,} {c['rate']:>10.4g}  "
            f"{f'{lo:.4g} .. {hi:.4g}':<22} {c['unit']}"
        )
    unseen = [c["name"] for c in f["categories"] if not c["count"]]
    if unseen:
        lines.append(f"not in the log (rate 0, each with its 95% upper bound in --json): {', '.join(unseen)}")
    lines.append("")
    for c in seen:
        lines.append(f"  {c['name']}: {c['evidence']['verdict']}; {c['interarrival']['verdict']}")
    lines.append("")
    if f["lemon_nodes"]:
        lines.append(f"lemon nodes (of {f['nodes']:,}; p-values corrected for the number of nodes):")
        lines += [
            f"  {n['node']}: {n['failures']} failures where the other nodes average {n['expected']:.2f} "
            f"(p {n['p_value']:.2g})"
            for n in f["lemon_nodes"]
        ]
        if f["cluster_lemons"]:
            cl = f["cluster_lemons"]
            lines.append(
                f"  as a config: cluster.lemons: {{count: {cl['count']}, factor: {cl['factor']:.3g}}}, with the fitted "
                f"gpu- and node-scope rates divided by {cl['healthy_divisor']:.4g} (the healthy nodes' rates)"
            )
    else:
        lines.append(f"no lemon nodes among {f['nodes']:,}")
    lines.append("")
    lines.append("job MTTF by size (h, 95% interval):")
    lines += [
        f"  {m['gpus']:>7,} GPUs: {m['mttf_h']:8.2f}  ({m['ci95'][0]:.2f} .. {m['ci95'][1]:.2f})"
        for m in f["job_mttf_h"]
    ]
    lines += [f"note: {n}" for n in f["notes"]]
    if out:
        lines.append(f"profile written to {out} (name it from a campaign: cluster.failures)")
    if report:
        lines.append(f"report written to {report}")
    return "\n".join(lines)


@failures_app.command("demo-log")
def failures_demo_log(
    folder: Annotated[str, typer.Argument(help="Folder to write jobs.csv and incidents.csv into.")],
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the log.")] = 0,
    jobs: Annotated[int, typer.Option("--jobs", min=1, max=1_000_000, help="Jobs in the log.")] = 3000,
) -> None:
    """Write a synthetic incident log drawn from a known profile (a simulated year of jobs of several sizes,
    lemon nodes included) and print the truth a fit should recover."""
    from campaign.failures import synthetic_log

    log = synthetic_log(seed=seed, jobs=jobs)
    jobs_path, incidents_path = log.write(folder)
    typer.echo(
        f"wrote {jobs_path} ({len(log.jobs):,} jobs) and {incidents_path} ({len(log.incidents):,} incidents)"
    )
    for c in log.categories:
        rate = log.mean_rate_per_h(c)
        shown = f"{rate * 8760:.4g} per_gpu_year" if c.scope == "gpu" else f"{rate:.4g} per_job_hour"
        typer.echo(f"  truth: {c.name} scope {c.scope}, {shown}")
    typer.echo(f"  truth: lemon nodes {', '.join(log.lemon_nodes)} (of 512)")
    typer.echo(f"fit it: campaign failures fit --jobs {jobs_path} --incidents {incidents_path} --nodes 512")


PLAN_SUBCOMMANDS = ("measure", "show", "--help")


def plan_arguments(argv: list[str]) -> list[str]:
    """`campaign plan CONFIG ...` is `campaign plan show CONFIG ...` (the plan's subcommands are `measure` and the
    hidden `show`), so the documented form keeps working beside `campaign plan measure`."""
    if len(argv) >= 2 and argv[0] == "plan" and argv[1] not in PLAN_SUBCOMMANDS:
        return ["plan", "show", *argv[1:]]
    return argv


# ------------------------------------------------------------------------------------------- server

server_app = typer.Typer(
    no_args_is_help=True,
    help="The local Prefect servers campaign keeps between commands (one per workspace; each stops itself after "
    "CAMPAIGN_SERVER_IDLE_S seconds without a command, default 600).",
)
app.add_typer(server_app, name="server")


def _server_line(info: dict[str, Any]) -> str:
    users = ", ".join(f"pid {p}" for p in info.get("clients") or []) or "no command"
    return f"{info['url']}  pid {info['pid']}  since {info['started_at']}  used by {users}  ({info['home']})"


@server_app.command("status")
def server_status(json_: JsonOpt = False) -> None:
    """List the local Prefect servers that run now, with the commands using them."""
    from campaign_cli.local_api import running_servers

    found = running_servers()
    if json_:
        typer.echo(json.dumps(found, indent=2))
        return
    typer.echo("\n".join(_server_line(i) for i in found) or "no local Prefect server is running")


@server_app.command("stop")
def server_stop(
    workspace: Annotated[
        str | None,
        typer.Option("--workspace", "-w", help="Stop only this workspace's server (default: every one)."),
    ] = None,
) -> None:
    """Stop the local Prefect servers now (a command still using one fails; its next run starts one again)."""
    from campaign_cli.local_api import stop_all, stop_server

    if workspace:
        home = Path(workspace).resolve() / ".prefect"
        one = stop_server(home) if home.is_dir() else None
        stopped = [{**one, "home": str(home)}] if one else []
    else:
        stopped = stop_all()
    for info in stopped:
        typer.echo(f"stopped {_server_line(info)}")
    if not stopped:
        typer.echo("no local Prefect server was running" + (f" for {workspace}" if workspace else ""))


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning every CampaignError into its message (printed once) and exit code."""
    args = plan_arguments(list(sys.argv[1:] if argv is None else argv))
    words = args[:2] if args[:1] in (["calendar"], ["server"]) else args[:1]  # the command's name
    return exit_code_of(lambda: app(args=args, standalone_mode=False), " ".join(["campaign", *words]))


if __name__ == "__main__":
    sys.exit(main())

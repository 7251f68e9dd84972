"""The lifecycle's commands (run, prepare, validate, commit, execute), `analyse` and `sql`."""

import json
from pathlib import Path
from typing import Annotated

import typer

from campaign.errors import CampaignError, ConfigError
from campaign_cli.commands.app import CalendarOpt, ConfigArg, JsonOpt, SetOpt, WorkspaceOpt, _imports, app
from campaign_cli.terminal import finish as _finish
from campaign_cli.terminal import prefect_api as _prefect_api
from campaign_cli.terminal import print_validate, rerun_names, run_stage, stage_summary


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
def validate(
    config: ConfigArg,
    workspace: WorkspaceOpt = None,
    set_: SetOpt = None,
    rerun: Annotated[
        bool,
        typer.Option(
            "--rerun",
            help="Run the gates named after it (all when none is named) even when the result recorded for "
            "the same config, data, files and code could be reused.",
        ),
    ] = False,
    gates: Annotated[
        list[str] | None, typer.Argument(help="With --rerun: the gates to run again.", show_default=False)
    ] = None,
) -> None:
    """Run every gate and print a table (exit 1 if any failed); a gate whose recorded result stands for the same
    config, data, files and code is reused, its row saying when it was recorded."""
    if gates and not rerun:
        raise ConfigError(
            f"unexpected arguments {' '.join(gates)}",
            where="campaign validate",
            fix="name gates to run again after --rerun, e.g. `campaign validate CONFIG --rerun rehearsal`",
        )
    forced = rerun_names(list(gates or [])) if rerun else None  # an unknown gate: exit 2 before anything runs
    try:
        results = run_stage("validate", config, workspace, set_, rerun=forced)
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
    """Run the committed window: simulate it, or run it for real (exit 3 if nothing valid is committed; a real
    run: 0 only when it reached its target step, 5 when it ended short, 6 when a person stopped it)."""
    from campaign.execution.policy import EXIT_CODES

    overrides = [*(set_ or []), *([f"execute.backend={backend}"] if backend is not None else [])]
    record = run_stage("execute", config, workspace, overrides or None, calendar)
    typer.echo(stage_summary("execute", record))
    code = EXIT_CODES.get(getattr(record, "outcome", "target"), 0)  # 5: ended short; 6: stopped by a person
    if code:
        raise typer.Exit(code)


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
            "step; Megatron-LM's or TorchTitan's log; NeMo's TensorBoard event files or their folder; "
            "docs/execution.md); the report goes to --out (default report).",
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
    from campaign.analysis.workspace import analysis_workspace

    if incidents and not metrics:
        raise ConfigError(
            "--incidents needs --metrics",
            where="campaign analyse",
            fix="give the run's metrics file with --metrics",
        )
    if metrics:
        from campaign.analysis.report import write_report
        from campaign.execution.external import external_report_inputs
        from campaign.files import atomic_write_json, check_output_dir, claim_output_dir

        report_dir = check_output_dir(
            "report" if out == "compare" else out, "--out", {"--metrics": metrics, "--incidents": incidents}
        )
        inputs = external_report_inputs(Path(metrics), Path(incidents) if incidents else None)
        html, _, _ = write_report(claim_output_dir(report_dir), inputs)
        result = {**inputs.result.to_json(), "report_html": str(html)}
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
        from campaign.analysis.compare import check_targets, compare_out_dir

        targets = [*(compare or []), *(extra or [])]
        check_targets(targets)  # bad input refused before a Prefect API starts or anything is written
        out_dir = str(
            compare_out_dir(out, {f"--compare {t}": t for t in targets})
        )  # absolute: the flow may run in another folder
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
    from campaign import store
    from campaign.reuse import drawn_report, report_inputs_digest

    # A report drawn from inputs with the same digest is printed as is, with no flow run (the run that drew it
    # published it); anything changed, and the flow draws and publishes it again.
    drawn = drawn_report(ws.report_dir, report_inputs_digest(ws), ("report.html", "report.md"))
    if drawn is not None and store.is_writable(ws):
        typer.echo("report inputs unchanged since the report was drawn: not redrawn", err=True)
        result = drawn
    else:
        with _prefect_api(ws, warm=_imports("flows.analyse")):
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

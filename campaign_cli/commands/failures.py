"""`campaign failures`: fit a failure profile to incident logs; a demo log from a known profile."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from campaign.errors import ConfigError
from campaign_cli.commands.app import JsonOpt, app

if TYPE_CHECKING:
    from campaign.failures.fit import FailureFit

failures_app = typer.Typer(
    no_args_is_help=True, help="Failure profiles fitted from your own incident log (docs/failures.md)."
)
app.add_typer(failures_app, name="failures")


@failures_app.command("fit")
def failures_fit(
    jobs: Annotated[
        str | None,
        typer.Option(
            "--jobs", help="Jobs log, CSV or Parquet: job_id,start,end,gpus (or nodes, --gpus-per-node)."
        ),
    ] = None,
    incidents: Annotated[
        str | None,
        typer.Option("--incidents", help="Incidents log, CSV or Parquet: time,job_id,category,node."),
    ] = None,
    slurm_sacct: Annotated[
        str | None,
        typer.Option(
            "--slurm-sacct",
            help="Slurm accounting instead of --jobs/--incidents: `sacct --parsable2 --duplicates --allocations "
            "--format=JobID,JobIDRaw,State,Start,End,NNodes,NodeList,AllocTRES,Reason,ExitCode` output.",
        ),
    ] = None,
    slurm_jobcomp: Annotated[
        str | None,
        typer.Option("--slurm-jobcomp", help="Slurm's job completion log (JobCompType=jobcomp/filetxt)."),
    ] = None,
    slurm_events: Annotated[
        str | None,
        typer.Option(
            "--slurm-events",
            help="Node events: `sacctmgr show event event=node format=NodeName,Start,End,State,Reason,User "
            "--parsable2` output; a DOWN or DRAIN reason names the category of the failure it caused.",
        ),
    ] = None,
    slurm_mapping: Annotated[
        str | None,
        typer.Option(
            "--slurm-mapping",
            help="An edited copy of configs/failures/slurm.yaml: end states and node reasons to categories.",
        ),
    ] = None,
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
    from campaign.failures.profile import fit_slurm_log, profile_to_write
    from campaign.files import check_outputs, write_output

    check_outputs(
        {"--out": out, "--report": report},
        {
            "--jobs": jobs,
            "--incidents": incidents,
            "--base": base,
            "--slurm-sacct": slurm_sacct,
            "--slurm-jobcomp": slurm_jobcomp,
            "--slurm-events": slurm_events,
            "--slurm-mapping": slurm_mapping,
        },
    )
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
    slurm = slurm_sacct or slurm_jobcomp
    own = [f for f, v in (("--jobs", jobs), ("--incidents", incidents)) if v]
    if bool(slurm_sacct) + bool(slurm_jobcomp) + bool(own) != 1 or (own and len(own) != 2):
        raise ConfigError(
            "give one incident log: --jobs with --incidents, or --slurm-sacct, or --slurm-jobcomp",
            where="failures fit",
            fix="e.g. campaign failures fit --jobs jobs.csv --incidents incidents.csv, or --slurm-sacct sacct.txt "
            "(docs/failures.md)",
        )
    if slurm_events and not slurm:
        raise ConfigError(
            "--slurm-events adds node events to Slurm accounting",
            where="--slurm-events",
            fix="pass it with --slurm-sacct or --slurm-jobcomp",
        )
    if slurm:
        fit, profile = fit_slurm_log(
            sacct=slurm_sacct,
            jobcomp=slurm_jobcomp,
            events=slurm_events,
            mapping=slurm_mapping,
            base=base,
            gpus_per_node=gpus_per_node,
            nodes=nodes,
            sizes=at_sizes,
        )
    else:
        assert jobs is not None and incidents is not None
        fit, profile = fit_incident_log(
            jobs, incidents, base=base, gpus_per_node=gpus_per_node, nodes=nodes, sizes=at_sizes
        )
    if out:
        write_output(out, profile_to_write(fit, profile))
    if report:
        from campaign.failures.report import fit_report_html

        title = f"Failure profile fitted from {Path(incidents or slurm or '').name}"
        write_output(report, fit_report_html(fit, title))
    if json_:
        typer.echo(json.dumps(fit.to_json(), indent=2))
        return
    typer.echo(_failures_text(fit, out, report))


def _failures_text(f: "FailureFit", out: str | None, report: str | None) -> str:
    e = f.exposure
    lines = [
        f"{f.incidents:,} incidents in {f.jobs:,} jobs ({f.segments:,} segments): "
        f"{e.gpu_hours:,.0f} GPU-hours, {e.job_hours:,.0f} job-hours, {e.node_days:,.0f} node-days",
        "",
        f"{'category':<28} {'scope':<5} {'count':>7} {'rate':>10}  {'95% interval':<22} unit",
    ]
    seen = [c for c in f.categories if c.count]
    for c in seen:
        lo, hi = c.ci95
        lines.append(
            f"{c.name:<28} {c.scope:<5} {c.count:>7,} {c.rate:>10.4g}  {f'{lo:.4g} .. {hi:.4g}':<22} {c.unit}"
        )
    unseen = [c.name for c in f.categories if not c.count]
    if unseen:
        lines.append(f"not in the log (rate 0, each with its 95% upper bound in --json): {', '.join(unseen)}")
    lines.append("")
    for c in seen:
        lines.append(f"  {c.name}: {c.evidence.verdict}; {c.interarrival.verdict}")
    lines.append("")
    if f.lemon_nodes:
        lines.append(f"lemon nodes (of {f.nodes:,}; p-values corrected for the number of nodes):")
        lines += [
            f"  {n.node}: {n.failures} failures where the other nodes average {n.expected:.2f} "
            f"(p {n.p_value:.2g})"
            for n in f.lemon_nodes
        ]
        if f.cluster_lemons is not None:
            cl = f.cluster_lemons
            lines.append(
                f"  as a config: cluster.lemons: {{count: {cl.count}, factor: {cl.factor:.3g}}}, with the fitted "
                f"gpu- and node-scope rates divided by {cl.healthy_divisor:.4g} (the healthy nodes' rates)"
            )
    else:
        lines.append(f"no lemon nodes among {f.nodes:,}")
    lines.append("")
    lines.append("job MTTF by size (h, 95% interval):")
    lines += [
        f"  {m.gpus:>7,} GPUs: {m.mttf_h:8.2f}  ({m.ci95[0]:.2f} .. {m.ci95[1]:.2f})" for m in f.job_mttf_h
    ]
    lines += [f"note: {n}" for n in f.notes]
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
    from campaign.files import check_outputs, record_output

    check_outputs(
        {"FOLDER/jobs.csv": Path(folder) / "jobs.csv", "FOLDER/incidents.csv": Path(folder) / "incidents.csv"}
    )
    log = synthetic_log(seed=seed, jobs=jobs)
    jobs_path, incidents_path = (record_output(p) for p in log.write(folder))
    typer.echo(
        f"wrote {jobs_path} ({len(log.jobs):,} jobs) and {incidents_path} ({len(log.incidents):,} incidents)"
    )
    for c in log.categories:
        rate = log.mean_rate_per_h(c)
        shown = f"{rate * 8760:.4g} per_gpu_year" if c.scope == "gpu" else f"{rate:.4g} per_job_hour"
        typer.echo(f"  truth: {c.name} scope {c.scope}, {shown}")
    typer.echo(f"  truth: lemon nodes {', '.join(log.lemon_nodes)} (of 512)")
    typer.echo(f"fit it: campaign failures fit --jobs {jobs_path} --incidents {incidents_path} --nodes 512")

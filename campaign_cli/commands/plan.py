"""`campaign plan` (show, measure) and how `campaign plan CONFIG` reaches `plan show`."""

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from campaign_cli.commands.app import ConfigArg, JsonOpt, SetOpt, app

plan_app = typer.Typer(
    no_args_is_help=True,
    help="Performance, memory and checkpoint plan of CONFIG (`campaign plan CONFIG [--json] [--search]`), or "
    "`campaign plan measure METRICS.jsonl ...` to turn a short run into a plan.measured entry.",
)
app.add_typer(plan_app, name="plan")


@plan_app.command(name="measure")
def plan_measure(
    metrics: Annotated[
        str,
        typer.Argument(
            help="A training log: Megatron-LM's, TorchTitan's, NeMo's metrics.csv or TensorBoard event files (a "
            "file or their folder) or JSON-lines metrics (the reference trainer's), detected by content."
        ),
    ],
    nodes: Annotated[int | None, typer.Option("--nodes", help="Nodes the run used.", min=1)] = None,
    layout: Annotated[
        str | None,
        typer.Option(
            "--layout", help="The run's layout, e.g. tp=8,pp=4,dp=16 (cp, vpp: 1; default: the log's own)."
        ),
    ] = None,
    global_batch_tokens: Annotated[
        int | None,
        typer.Option(
            "--global-batch-tokens",
            help="Tokens per step (default: from the log: its tokens, or global batch x sequence length).",
            min=1,
        ),
    ] = None,
    seq_len: Annotated[
        int | None,
        typer.Option(
            "--seq-len", help="The model's sequence length, when the log gives only its batch.", min=1
        ),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            help="A campaign config: its model's sequence length and GPUs per node, and the entry checked as it "
            "would check it.",
        ),
    ] = None,
    gpus_per_node: Annotated[
        int | None,
        typer.Option("--gpus-per-node", help="GPUs per node (default: --config's, else 8).", min=1, max=1024),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="megatron, torchtitan, nemo, nemo-tensorboard or jsonl (default: detected from the content).",
        ),
    ] = None,
    skip_steps: Annotated[
        int | None,
        typer.Option(
            "--skip-steps",
            help="Warm-up samples to drop at the start and after each restart (default: the first 10 %).",
            min=0,
        ),
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Median step time of a short run, warm-up dropped, as the plan.measured entry to paste into the config
    (with the spread it saw); names restarts, skipped and NaN iterations, and a series that drifts or has two
    modes. Exit 2, printing nothing, for an entry the config would refuse."""
    from campaign.plan.measure import parse_layout
    from campaign.plan.measured_entry import measured_entry

    got = measured_entry(
        Path(metrics),
        nodes=nodes,
        layout=parse_layout(layout) if layout is not None else None,
        global_batch_tokens=global_batch_tokens,
        seq_len=seq_len,
        skip_steps=skip_steps,
        fmt=fmt,
        gpus_per_node=gpus_per_node,
        config=config,
    )
    result = got.result
    if json_:
        typer.echo(json.dumps(got.to_json(), indent=2))
        return
    typer.echo(
        f"# read {metrics} as {got.format}: step {result.median_s:.4g} s (median of {result.n_steps} after "
        f"{result.skipped} warm-up); {got.global_batch_tokens:,} tokens per step from {got.tokens_source}"
    )
    for note in got.notes:
        typer.echo(f"# {note}")
    entry = got.entry()
    if entry is None:
        typer.echo(
            f"# step_time_s: {result.median_s:.4g}, global_batch_tokens: {got.global_batch_tokens}; add --nodes "
            "and --layout for the plan.measured entry"
        )
    else:
        typer.echo("plan:")
        extra = "".join(f", {k}: {json.dumps(entry[k])}" for k in ("model", "stack") if k in entry)
        typer.echo(
            result.entry_yaml(entry["nodes"], entry["layout"], got.global_batch_tokens, got.source, extra)
        )
        if "model" not in entry:
            typer.echo(
                "# add `model: NAME` (the model.name of the model this run trained) to the entry, or pass --config: "
                "plan.measured refuses a row that names no model"
            )
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
    from campaign.window_judge import plan_json_with_verdict, plan_window_verdict

    loaded = load_config(config, list(set_ or []))
    best = make_plan(loaded.config)
    verdict = plan_window_verdict(loaded.config, best) if best.runs else None
    out = plan_json_with_verdict(best, verdict)
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
        f"expected ETTR {p['expected_ettr']:.3f}, {p['expected_days']:.1f} days   runs: {p['runs']}",
    ]
    verdict = p.get("window_verdict")
    if verdict:
        said = {
            "ok": "fits the window",
            "too_short": "the window is too short",
            "too_long": "the window is too long",
        }
        source = (
            "the schedule gate's replicas" if verdict["basis"] == "replicas" else "the plan's own estimate"
        )
        lines.append(f"window verdict ({source}; rule: {verdict['rule']}): {said[verdict['verdict']]}")
        if verdict["verdict"] == "ok":  # otherwise the message is the schedule violation below
            lines.append(f"  {verdict['message']}")
    lines += [f"  violation: {v}" for v in p["violations"]]
    for alt in p.get("search", []):
        a = alt["layout"]
        lines.append(
            f"  search: tp={a['tp']} pp={a['pp']} dp={a['dp']} cp={a['cp']} vpp={a.get('vpp', 1)} "
            f"mb={alt.get('micro_batch', '')}: {alt['tokens_per_s']:,.0f} tok/s, "
            f"{alt['memory_gib_per_gpu']:.1f} GiB, fits={alt['fits']}"
        )
    return "\n".join(lines)


PLAN_SUBCOMMANDS = ("measure", "show", "--help")


def plan_arguments(argv: list[str]) -> list[str]:
    """`campaign plan CONFIG ...` is `campaign plan show CONFIG ...` (the plan's subcommands are `measure` and the
    hidden `show`), so the documented form keeps working beside `campaign plan measure`."""
    if len(argv) >= 2 and argv[0] == "plan" and argv[1] not in PLAN_SUBCOMMANDS:
        return ["plan", "show", *argv[1:]]
    return argv

"""The `campaign` Typer app and the options its commands share."""

import os
from typing import Annotated

import typer


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

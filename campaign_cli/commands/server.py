"""`campaign server`: the local Prefect servers campaign keeps between commands."""

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from campaign_cli.commands.app import JsonOpt, app

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

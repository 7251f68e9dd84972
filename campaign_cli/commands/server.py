"""`campaign server`: the local Prefect servers campaign keeps between commands."""

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from campaign_cli.commands.app import JsonOpt, app

server_app = typer.Typer(
    no_args_is_help=True,
    help="The local Prefect servers campaign keeps between commands (one per workspace, and one `shared` by commands "
    "without a workspace; each stops itself after CAMPAIGN_SERVER_IDLE_S seconds without a command, default 600).",
)
app.add_typer(server_app, name="server")


def _server_line(info: dict[str, Any]) -> str:
    users = ", ".join(f"pid {p}" for p in info.get("clients") or []) or "no command"
    return (
        f"{info.get('workspace', info['home'])}: {info['url']}  pid {info['pid']}  since {info['started_at']}  "
        f"used by {users}  ({info['home']})"
    )


@server_app.command("status")
def server_status(json_: JsonOpt = False) -> None:
    """List the local Prefect servers that run now (every workspace's), with the commands using them."""
    from campaign_cli.local_api import running_servers

    found = running_servers()
    if json_:
        typer.echo(json.dumps(found, indent=2))
        return
    typer.echo("\n".join(_server_line(i) for i in found) or "no local Prefect server is running")


@server_app.command("stop")
def server_stop(
    workspaces: Annotated[
        list[str] | None,
        typer.Argument(
            help="Stop the servers of these workspaces (their folders), or `shared`: the one commands without a "
            "workspace share. Default: the servers of the workspaces under the current folder.",
            show_default=False,
        ),
    ] = None,
    workspace: Annotated[
        list[str] | None,
        typer.Option(
            "--workspace", "-w", help="A workspace whose server to stop (as an argument).", show_default=False
        ),
    ] = None,
    all_: Annotated[
        bool,
        typer.Option("--all", help="Stop every local server of yours: every workspace's and the shared one."),
    ] = False,
) -> None:
    """Stop local Prefect servers now: by default those of the workspaces under the current folder (a checkout's
    `workspace/`), never another folder's (a command still using one fails; its next run starts one again)."""
    from campaign_cli.local_api import running_servers, server_of, servers_under, stop_servers

    named = [*(workspaces or []), *(workspace or [])]
    if all_ and named:
        raise typer.BadParameter("give workspaces or --all, not both", param_hint="--all")
    if all_:
        chosen, scope = running_servers(), "of yours"
    elif named:
        chosen = [info for name in named if (info := server_of(name)) is not None]
        scope = "for " + ", ".join(named)
    else:
        here = Path.cwd()
        chosen, scope = servers_under(here), f"for a workspace under {here} (`--all` for every one)"
    stopped = stop_servers(chosen)
    for info in stopped:
        typer.echo(f"stopped {_server_line(info)}")
    if not stopped:
        typer.echo(f"no local Prefect server was running {scope}")

"""The `campaign` command: parse, load the config, call a flow or a pure plan, print, exit with its code.

The outermost layer: nothing imports it (tests/unit/test_layering.py). What running a flow from a terminal
needs (its Prefect API, its console, its exit code) lives in campaign_cli/terminal.py, shared with `python -m flows.<x>`.
Exit codes: 0 done; 1 a gate failed or a plan does not fit; 2 bad input; 3 refused; 4 workspace busy;
70 an internal error (a bug).
"""

import sys

# Each module registers its commands on the app.
from campaign_cli.commands import calendar, failures, lifecycle, plan, server, simulate  # noqa: F401
from campaign_cli.commands.app import app
from campaign_cli.commands.plan import plan_arguments
from campaign_cli.terminal import exit_code_of


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning every CampaignError into its message (printed once) and exit code."""
    args = plan_arguments(list(sys.argv[1:] if argv is None else argv))
    words = args[:2] if args[:1] in (["calendar"], ["server"]) else args[:1]  # the command's name
    return exit_code_of(lambda: app(args=args, standalone_mode=False), " ".join(["campaign", *words]))


if __name__ == "__main__":
    sys.exit(main())

"""Running a flow from a terminal: its Prefect API, its console, its result or error, its exit code.

Shared by the `campaign` command (campaign_cli/cli.py, which nothing imports) and by each flow's
`python -m flows.<stage>` entry point, which imports it inside its `__main__` block, never at module level.

Exit codes: 0 done; 1 a gate failed or a plan does not fit; 2 bad input; 3 refused; 4 workspace busy;
70 an internal error (a bug); 74 the disk is full.
"""

import argparse
import contextlib
import errno
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from campaign.errors import CampaignError, ConfigError, DiskFull, GateFailed, InternalError, disk_full
from campaign.figures import tokens_b
from campaign.files import disk_is_full

BUG_FIX = (
    "this is a bug in campaign, not your input; rerun with CAMPAIGN_DEBUG=1 to see the traceback (the "
    "Prefect run log keeps it too) and report it"
)

LIFECYCLE_STAGES = ("prepare", "validate", "commit", "execute", "run")


def say(text: str) -> None:
    print(text, file=sys.stderr)


def environment_error(exc: BaseException) -> CampaignError | None:
    """An OSError that the user's environment or input caused, as a message naming the path and the fix: a name
    longer than the file system allows, a folder campaign may not write (read-only, or another user's). None for
    anything else."""
    if not isinstance(exc, OSError) or exc.errno not in (errno.ENAMETOOLONG, errno.EROFS, errno.EACCES):
        return None
    path = Path(str(exc.filename)) if exc.filename else None
    if exc.errno == errno.ENAMETOOLONG:
        return ConfigError(
            "a file name is longer than the file system allows",
            where=str(path)[:200] + ("..." if len(str(path)) > 200 else "") if path else None,
            fix="use a shorter folder or file name",
        )
    folder = path if path is not None and path.is_dir() else (path.parent if path is not None else None)
    return ConfigError(
        f"campaign cannot write into this folder ({exc.strerror})",
        where=str(folder) if folder else None,
        fix="make that folder writable, or pass a writable one (--workspace, --out, --calendar)",
    )


def finish(state: Any) -> Any:
    """The flow's result, or raise the CampaignError a Failed state carries."""
    if state.is_completed():
        return state.result()
    data = getattr(state, "data", None)
    if isinstance(data, CampaignError):
        raise data
    try:
        state.result()
    except CampaignError:
        raise
    except Exception as exc:  # any other exception is a bug: report it as one, without a traceback
        known = disk_full(exc) or environment_error(
            exc
        )  # ... but a full disk or a bad path is the environment's
        if known is not None:
            raise known from None
        raise InternalError(f"{state.name}: {state.message or exc}", fix=BUG_FIX) from None
    raise InternalError(f"{state.name}: {state.message}", fix=BUG_FIX)


def exit_code_of(command: Callable[[], Any], what: str = "the command") -> int:
    """Run `command`, turning every CampaignError into its message (printed once, on stderr) and exit code; a
    Ctrl-C into one line naming `what` was interrupted (exit 130)."""
    try:
        code = command()
    except CampaignError as err:
        say(f"error: {err.render()}")
        return err.exit_code
    except SystemExit as ex:
        return int(ex.code or 0) if not isinstance(ex.code, str) else 2
    except KeyboardInterrupt:
        return _interrupted(what)
    except Exception as exc:
        show, exit_code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and hasattr(exc, "exit_code"):
            show()  # a usage error from the (vendored) click parser: print it as click would
            return 2
        if isinstance(exit_code, int):  # typer.Exit(code): the command's chosen exit code
            return exit_code
        known = disk_full(exc) or environment_error(exc)
        if known is not None:
            say(f"error: {known.render()}")
            return known.exit_code
        if os.environ.get("CAMPAIGN_DEBUG"):
            raise
        say(
            f"internal error: {type(exc).__name__}: {exc}\n  fix: this is a bug in campaign, not your input; "
            "rerun with CAMPAIGN_DEBUG=1 to see the traceback and report it"
        )
        return InternalError.exit_code
    if code == 130:  # typer turns a Ctrl-C inside a command into the return value 130, silently
        return _interrupted(what)
    return code if isinstance(code, int) else 0


def _interrupted(what: str) -> int:
    say(f"{what} interrupted; rerun the same command to resume (completed work is kept)")
    return 130


@contextlib.contextmanager
def calendar_env(calendar: str | None) -> Iterator[None]:
    """`--calendar PATH` for this command: the flows find the calendar through CAMPAIGN_CALENDAR."""
    from campaign.calendar import CALENDAR_ENV

    if not calendar:
        yield
        return
    saved = os.environ.get(CALENDAR_ENV)
    folder = os.sep if calendar.endswith(("/", os.sep)) else ""  # a folder of calendars, one per cluster
    os.environ[CALENDAR_ENV] = str(Path(calendar).expanduser().resolve()) + folder
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(CALENDAR_ENV, None)
        else:
            os.environ[CALENDAR_ENV] = saved


def workspace_if_any(workspace: str | None) -> Any:
    """The --workspace folder as a Workspace when it already is one (its .prefect keeps the run history)."""
    from campaign import store

    if not workspace:
        return None
    ws = store.Workspace(Path(workspace).resolve())
    return ws if store.is_workspace(ws) else None


@contextlib.contextmanager
def prefect_api(ws: Any = None, warm: Callable[[], object] | None = None) -> Iterator[None]:
    """The command's Prefect API: PREFECT_API_URL if set, else a private local one (campaign_cli/local_api.py) whose run
    history lives in the workspace (`<workspace>/.prefect`) when the command starts in one, else nowhere.
    `warm` (the command's imports) runs while a private server starts."""
    from campaign import store
    from campaign_cli.local_api import configured_api, local_api

    home = ws.root / ".prefect" if ws is not None and store.is_workspace(ws) else None
    private = configured_api() is None
    try:
        with local_api(home, warm):
            console_without_tracebacks(view_links=not private)
            yield
    except Exception as exc:
        if isinstance(exc, DiskFull) and exc.where is None and ws is not None:
            # a library said "no space" without the file: the workspace is the place the user can free
            raise DiskFull(f"{exc.message} in this workspace", where=str(ws.root), fix=exc.fix) from None
        known = None if isinstance(exc, CampaignError) or home is None else api_disk_full(exc, home)
        if known is None:
            raise
        raise known from None


def api_disk_full(exc: BaseException, home: Path) -> DiskFull | None:
    """The private API keeps its run history on the workspace's disk (`home`): when that disk is full, the API
    answers 500 to every call, and the full disk (not the HTTP error) is what the user must hear about."""
    if not disk_is_full(home):
        return None
    return DiskFull(
        "the disk is full: the command's Prefect API keeps its run history here and failed "
        f"({type(exc).__name__})",
        where=str(home),
        fix=DiskFull.RESUME_FIX,
    )


# Each stage's flow and its module. A command imports only its own stage's flow: importing all of them (Great
# Expectations, matplotlib, pandas, SciPy, Numba) cost `campaign prepare` 120 MB and 1.2 CPU-seconds for
# nothing (docs/prefect-ui.md).
STAGE_FLOWS = {
    "prepare": ("flows.prepare", "prepare_flow"),
    "validate": ("flows.validate", "validate_flow"),
    "commit": ("flows.commit", "commit_flow"),
    "execute": ("flows.execute", "execute_flow"),
    "run": ("flows.lifecycle", "lifecycle_flow"),
    "analyse": ("flows.analyse", "analyse_flow"),
}


def stage_flow(stage: str) -> Any:
    """The flow of one stage (`run`: the whole lifecycle), imported on first use."""
    import importlib

    module, name = STAGE_FLOWS[stage]
    return getattr(importlib.import_module(module), name)


def run_stage(
    stage: str,
    config: str,
    workspace: str | None,
    overrides: list[str] | None,
    calendar: str | None = None,
    rerun: list[str] | None = None,
) -> Any:
    """Run one lifecycle stage (or `run`, the whole lifecycle) and return its result; raise its CampaignError.

    Bad input (the config, an override, a value out of range) is refused before any Prefect API starts, and a
    stage that needs an existing workspace is refused before anything is written. `rerun` (validate only): the
    gates to run even when their recorded result could be reused."""
    from campaign import store
    from campaign.config import load_config

    loaded = load_config(config, list(overrides or []))  # bad input fails here, before a Prefect API starts
    ws = store.workspace_for(loaded.config.name, workspace)
    if stage in ("prepare", "run"):
        store.adopt_workspace(
            ws, loaded.config.name
        )  # refuses a folder campaign does not own, before anything
    else:
        from campaign.readiness import require_prepared

        require_prepared(
            ws, f"campaign {stage}"
        )  # refused before a Prefect API starts: printed once, writes nothing
    store.require_writable(ws, f"campaign {stage}")  # a read-only workspace: said before any work, naming it
    with calendar_env(calendar), prefect_api(ws, warm=lambda: stage_flow(stage)):
        from prefect import tags

        from flows.common import StageParams
        from tasks.artifacts import campaign_tag

        params = StageParams(config=config, workspace=workspace, overrides=list(overrides or []))
        with tags(campaign_tag(loaded.config.name)):
            extra = {"rerun": rerun} if rerun else {}
            return finish(stage_flow(stage)(params, return_state=True, **extra))


class _NoTraceback(logging.Formatter):
    """Formats a record without its traceback (the message line stays); other handlers still get the record whole."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            return self.inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def console_without_tracebacks(view_links: bool = True) -> None:
    """On the terminal, a failure is one line (the CLI then says what to do); the Prefect API, and so the UI, keeps
    the whole traceback. CAMPAIGN_DEBUG=1 shows it on the terminal too. Without `view_links` (a private API that
    stops with the command), Prefect's "View at http://127.0.0.1:<port>/..." lines are left off: they would point
    at a server that is gone once the command ends."""
    import prefect  # noqa: F401 - configures Prefect's logging, whose console handlers are changed here
    from prefect.logging.handlers import PrefectConsoleHandler

    for name in [None, *logging.root.manager.loggerDict]:
        for handler in getattr(logging.getLogger(name), "handlers", []):
            if not isinstance(handler, PrefectConsoleHandler):
                continue
            if not view_links and _no_dead_links not in handler.filters:
                handler.addFilter(_no_dead_links)
            if view_links and _no_dead_links in handler.filters:
                handler.removeFilter(_no_dead_links)
            if os.environ.get("CAMPAIGN_DEBUG") or isinstance(handler.formatter, _NoTraceback):
                continue
            handler.setFormatter(_NoTraceback(handler.formatter))
            handler.addFilter(_said_once)


def _no_dead_links(record: logging.LogRecord) -> bool:
    """Drop a flow run's "View at <url>" line (the UI address of a server that ends with the command)."""
    message = record.getMessage() if record.args else str(record.msg)
    return not message.startswith("View at http")


def _said_once(record: logging.LogRecord) -> bool:
    """Keep an outcome off the terminal that the command prints itself, once, when it ends: an expected error
    (a refusal, a failed gate) and every run's `Finished in state Failed(...)` line. The Prefect API, and so the
    UI, still gets each record."""
    if getattr(record, "campaign_expected", False):
        return False
    message = record.getMessage() if record.args else str(record.msg)
    # a Ctrl-C: the command says once what was interrupted, instead of a crash line from every run it was in
    return "Finished in state Failed(" not in message and "aborted by an interrupt signal" not in message


# ------------------------------------------------------------------------------------------- what a stage prints


def gate_table(results: list[Any]) -> str:
    """One row per gate: its verdict, whether it was run now or its recorded result reused (and when it was
    recorded), and its detail."""
    from campaign.reuse import how_judged

    width = max(len(r.gate) for r in results)
    hows = [how_judged(r.details) for r in results]
    how_w = max(len("how"), *map(len, hows))
    lines = [
        f"{'gate'.ljust(width)}  result  {'how'.ljust(how_w)}  detail",
        f"{'-' * width}  ------  {'-' * how_w}  ------",
    ]
    lines += [
        f"{r.gate.ljust(width)}  {'PASS' if r.passed else 'FAIL'}    {how.ljust(how_w)}  {r.summary}"
        for r, how in zip(results, hows, strict=True)
    ]
    return "\n".join(lines)


def _tokens(n: float) -> str:
    """Billions for a window, the count itself for a small real run (which trains thousands)."""
    return f"{n:,.0f}" if isinstance(n, (int, float)) and 0 <= n < 1e8 else tokens_b(n)


def stage_summary(stage: str, r: Any) -> str:
    """What a lifecycle stage prints on stdout when it is done."""
    if stage == "prepare":
        return (
            f"prepared: {r.n_input:,} documents in, {r.n_kept:,} kept, {r.n_rejected:,} rejected, "
            f"{r.n_tokens:,} tokens; prepared-data digest {r.data_digest[:12]}"
        )
    if stage == "validate":
        return gate_table(r)
    if stage == "commit":
        return f"committed {r.commitment_id}: window {r.window_start} .. {r.window_end}, approved by {r.approved_by}"
    if stage == "execute":
        head = (
            f"executed {r.commitment_id}{' (already executed; reused)' if r.reused else ''}: ETTR {r.ettr:.3f}, "
            f"{_tokens(r.tokens_trained)} tokens, {'completed' if r.completed else 'not completed'}"
        )
        if getattr(r, "target_step", None) is None:  # a simulated window
            return head + (
                f"; the window was {r.end}" if str(getattr(r, "end", "")).startswith("cancelled") else ""
            )
        said = {
            "target": "reached its target",
            "short": "ended short of its target (exit 5)",
            "stopped": "stopped by a person (exit 6)",
        }.get(r.outcome, r.outcome)
        return f"{head}; the run {said}: step {r.final_step:,} of {r.target_step:,}; {r.end}"
    if stage == "run":
        return (
            f"campaign done: ETTR {r['ettr']:.3f}, {_tokens(r['tokens_trained'])} of {_tokens(r['tokens_target'])} "
            f"tokens trained, {r['interruptions']['unexpected']} unexpected interruptions\n"
            f"report: {r.get('report_html') or r['report']}"
        )
    return json.dumps(r, indent=2, default=str)


def rerun_names(names: list[str] | None) -> list[str] | None:
    """The gates `--rerun [GATE...]` forces (every gate when it names none; None without --rerun); an unknown
    name is bad input (exit 2), refused before anything runs."""
    if names is None:
        return None
    from campaign.gates import REQUIRED_GATES
    from campaign.reuse import rerun_gates

    try:
        return sorted(rerun_gates(names, REQUIRED_GATES))
    except ValueError as exc:
        raise ConfigError(str(exc), where="--rerun", fix="name gates from the validate table") from None


def print_validate(results_or_error: Any) -> None:
    """validate prints its gate table whether the gates passed or not."""
    if isinstance(results_or_error, GateFailed):
        results = results_or_error.results  # the whole table travels with the failure
    elif isinstance(results_or_error, Exception):
        results = []
    else:
        results = results_or_error
    if results:
        print(gate_table(results))


# ------------------------------------------------------------------------------------------- python -m flows.<stage>


def stage_main(stage: str, argv: list[str] | None = None) -> int:
    """`python -m flows.<stage> CONFIG [--workspace DIR] [--set dotted.key=value]... [--calendar PATH]`: the stage
    flow from a terminal, with the same API, messages and exit codes as `campaign <stage>`."""
    parser = argparse.ArgumentParser(
        prog=f"python -m flows.{'lifecycle' if stage == 'run' else stage}",
        description=f"Run the {stage} flow on one campaign.",
    )
    parser.add_argument("config", help="Campaign YAML, e.g. configs/campaigns/demo.yaml.")
    parser.add_argument("--workspace", "-w", help="Workspace folder (default workspace/<campaign name>).")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="dotted.key=value",
        help="Override one config value (repeatable).",
    )
    parser.add_argument("--calendar", help="The cluster's calendar file.")
    if stage == "validate":
        parser.add_argument(
            "--rerun",
            nargs="*",
            metavar="GATE",
            help="Run these gates (all when none is named) even when their recorded result could be reused.",
        )

    def command() -> int:
        args = parser.parse_args(argv if argv is not None else sys.argv[1:])
        try:
            rerun = rerun_names(getattr(args, "rerun", None))
            result = run_stage(stage, args.config, args.workspace, args.overrides, args.calendar, rerun)
        except CampaignError as err:
            if stage == "validate":
                print_validate(err)
            raise
        print(stage_summary(stage, result))
        return 0

    return exit_code_of(command, f"python -m flows.{'lifecycle' if stage == 'run' else stage}")


def flow_main(flow: Any, argv: list[str] | None = None, call: Callable[[Any], Any] | None = None) -> int:
    """`python -m flows.<name> [CONFIG] [--set k=v]... [--<field> value]...`: run a flow whose one parameter is a
    pydantic model from the terminal. The options are the model's fields (so they cannot drift from the UI form);
    a bad value is refused naming its field before anything runs; the result is printed as JSON. `call(params)`
    runs the flow instead of `flow(params, return_state=True)` where a flow needs its own runner set up."""
    import inspect

    from pydantic import ValidationError

    model = _param_model(flow)
    prog = f"python -m flows.{Path(inspect.getfile(inspect.unwrap(flow.fn))).stem}"
    parser = argparse.ArgumentParser(prog=prog, description=flow.description)
    for name, info in model.model_fields.items():
        if name == "config":
            parser.add_argument("config", help=info.description)
        elif name == "overrides":
            parser.add_argument("--set", dest="overrides", action="append", default=[], help=info.description)
        else:
            many = "list" in str(info.annotation)
            parser.add_argument(
                f"--{name.replace('_', '-')}",
                dest=name,
                help=info.description,
                action="append" if many else "store",
                default=None,
            )

    def command() -> int:
        args = {
            k: v
            for k, v in vars(parser.parse_args(argv if argv is not None else sys.argv[1:])).items()
            if v is not None
        }
        try:
            params = model.model_validate(args)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(map(str, first["loc"]))
            raise ConfigError(
                f"{field}: {first['msg']}", where=f"--{field.replace('_', '-')}", fix=f"see {prog} --help"
            ) from None
        with prefect_api(workspace_if_any(getattr(params, "workspace", None))):
            result = finish(call(params) if call else flow(params, return_state=True))
        print(json.dumps(result, indent=2, default=str))
        return 0

    return exit_code_of(command, prog)


def _param_model(flow: Any) -> Any:
    import inspect

    (param,) = inspect.signature(flow.fn).parameters.values()
    return param.annotation

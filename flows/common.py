"""What every stage flow shares: its typed parameters (the Prefect UI form) and the run bookkeeping."""

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from prefect.states import Failed, State
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from campaign import store
from campaign.data import read_manifest
from campaign.errors import CampaignError, disk_full
from campaign.readiness import require_prepared
from flows.forms import Setting, config_field_schema, overrides_field_schema, setting_overrides


class StageParams(BaseModel):
    """Which campaign to work on, and what to change in its config. The same form serves every stage."""

    model_config = ConfigDict(extra="forbid")

    config: str = Field(
        "configs/campaigns/demo.yaml",
        json_schema_extra=config_field_schema(),
        description="Campaign YAML: one of the shipped campaigns (the CLI takes any path).",
    )
    workspace: str = Field("", description="Workspace folder; empty: `workspace/<campaign name>`.")
    settings: list[Setting] = Field(
        default_factory=list,
        description=(
            "Typed overrides: pick a config key and give its value (checked against the key's range before the run "
            "starts); applied before `overrides`."
        ),
    )
    overrides: list[str] = Field(
        default_factory=list,
        json_schema_extra=overrides_field_schema,
        description=(
            "Config overrides as `dotted.key=value`, e.g. `cluster.nodes=1024`; the key must exist in the config."
        ),
    )

    @field_validator("workspace", mode="before")
    @classmethod
    def _no_workspace_is_empty(cls, value: object) -> object:
        """The CLI passes None for "no --workspace"; the form's field is a plain string (no None toggle)."""
        return "" if value is None else value

    @model_validator(mode="after")
    def _settings_become_overrides(self) -> "StageParams":
        """One list of overrides for every stage: the typed settings first, then the free ones."""
        if self.settings:
            self.overrides = [*setting_overrides(self.settings), *self.overrides]
            self.settings = []
        return self


def failed(err: CampaignError, prefix: str = "") -> State:
    """A clean Failed state that carries the error, so the CLI re-raises it with its exit code, untraced. Its
    message is one line (the UI and the state log show it as is, not with literal `\\n`)."""
    return Failed(message=prefix + one_line(err.render()), data=err)


P = ParamSpec("P")
R = TypeVar("R")


def fails_cleanly(fn: Callable[P, R]) -> Callable[P, R | State]:
    """The one rule of every flow for the errors its user is meant to read: a CampaignError raised anywhere in the
    flow ends it as `failed(err)` (a clean Failed state carrying the error, no traceback in the log). Goes under
    `@flow(...)`, which reads the flow's signature, name and docstring through it."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R | State:
        quiet_expected_errors()
        try:
            return fn(*args, **kwargs)
        except CampaignError as err:
            return failed(err)
        except Exception as exc:
            full = disk_full(exc)  # a full disk is the environment's, however a library wrapped it
            if full is None:
                raise
            return failed(full)

    return run


def one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


@contextlib.contextmanager
def stage_run(
    ws: store.Workspace, stage: str, config_digest: str | None, data_digest: str | None = None
) -> Iterator[str]:
    """Hold the workspace lock and record the stage in `runs` (completed, refused or failed).

    Prepare makes the workspace (refusing a folder that is not one); every other stage needs an existing one and
    creates nothing when it refuses."""
    quiet_expected_errors()
    if stage == "prepare":
        store.adopt_workspace(ws, ws.root.name)
    else:
        require_prepared(ws, f"campaign {stage}")
    with store.locked(ws, f"campaign {stage}"):
        run_id = store.start_run(ws, stage, config_digest, data_digest)
        try:
            yield run_id
        except CampaignError as err:
            status = "refused" if err.exit_code == 3 else "failed"
            _record_failure(ws, run_id, status, err.render(), err)
            raise
        except BaseException as err:
            _record_failure(ws, run_id, "failed", f"{type(err).__name__}: {err}", err)
            raise
        store.finish_run(ws, run_id, "completed", data_digest=_data_digest(ws))


def _record_failure(ws: store.Workspace, run_id: str, status: str, text: str, err: BaseException) -> None:
    """Record how the stage ended; when the disk is full, recording needs space too, and the full disk (not the
    catalog's failure to write) is what the user must hear about."""
    try:
        store.finish_run(ws, run_id, status, text, data_digest=_data_digest(ws))
    except Exception:
        if disk_full(err) is None:
            raise


def _data_digest(ws: store.Workspace) -> str | None:
    """The data digest the stage saw (from data/manifest.json), for the `runs` row."""
    try:
        manifest = read_manifest(ws.data_dir)
    except CampaignError:
        return None
    return manifest["data_digest"] if manifest else None


class _ExpectedErrorFilter(logging.Filter):
    """Drop the traceback from Prefect's log of a CampaignError (and of a full disk, however a library wrapped
    it): it is a message for the user, not a bug."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and (isinstance(error, CampaignError) or disk_full(error) is not None):
            record.exc_info = None
            record.exc_text = None
            record.campaign_expected = (
                True  # the terminal prints the error itself, once (campaign_cli/terminal.py)
            )
        return True


_FILTER = _ExpectedErrorFilter()


def quiet_expected_errors() -> None:
    for name in ("prefect.task_runs", "prefect.flow_runs", "prefect.task_engine", "prefect.flow_engine"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


# ------------------------------------------------------------------------------------------- campaign context


def _getter(params: Any) -> Callable[..., Any]:
    return (
        params.get if isinstance(params, dict) else (lambda key, default=None: getattr(params, key, default))
    )


def params_field(parameters: dict[str, Any], key: str) -> Any:
    """A field of a run's `params` parameter: the model in process, its JSON from a deployment's run."""
    return _getter(parameters.get("params") or {})(key)


def campaign_name_of(params: Any) -> str:
    """The campaign a run's parameters name (its config's `name:`, overrides applied), for run names and tags;
    the config file's stem when the config cannot be read (the run says why); without a config, the campaign of
    the workspace (its marker), else the workspace folder's name."""
    from campaign.config import load_config

    get = _getter(params)
    config, workspace = get("config"), get("workspace")
    if config:
        try:
            return load_config(config, list(get("overrides") or [])).config.name
        except CampaignError:
            return Path(str(config)).stem
    return workspace_campaign(workspace) if workspace else "campaign"


def workspace_campaign(workspace: Any) -> str:
    """The campaign of a workspace (a path, a `store.Workspace` or its parameters as JSON): the name its marker
    records, else its folder's name."""
    root = _getter(workspace)("root") if not isinstance(workspace, str | Path) else workspace
    return store.recorded_campaign(Path(str(root))) or Path(str(root)).name


def stage_run_name(stage: str, subject: Callable[[dict[str, Any]], str] | None = None) -> Callable[[], str]:
    """`flow_run_name` of a flow: `<stage>-<campaign>-<UTC time>`, e.g. `validate-demo-20261201-045700`. The
    campaign is read from the run's `params` (config, else workspace), or by `subject` from its parameters (a
    subflow's workspace, a calendar's cluster); should that fail, the name is still the stage's and the time's."""

    def name() -> str:
        from prefect.runtime import flow_run

        from tasks.artifacts import slug

        parameters = flow_run.parameters or {}
        try:
            what = subject(parameters) if subject else campaign_name_of(parameters.get("params") or {})
        except Exception:  # a name is never worth a failed run
            what = "campaign"
        return f"{stage}-{slug(what)}-{datetime.now(UTC):%Y%m%d-%H%M%S}"

    return name


@contextlib.contextmanager
def campaign_tags(campaign: str) -> Iterator[None]:
    """Tag every task and subflow run inside with the campaign (`campaign:demo`), so the UI filters by it."""
    from prefect import tags

    from tasks.artifacts import campaign_tag

    with tags(campaign_tag(campaign)):
        yield

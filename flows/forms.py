"""The Prefect UI's parameter form for a campaign stage: the shipped campaigns as a choice, typed settings with their
ranges and help, and free overrides whose keys the server checks, all built from the config model so they stay in
step with it.

The Prefect server validates a deployment run's parameters against the flow's JSON schema before it creates the
run (`enforce_parameter_schema`, on by default in Prefect 3), so what can be said in JSON Schema is said here:
- `config`: an `enum` of `configs/campaigns/*.yaml` (the CLI still takes any path: the enum is for the form only);
- `settings`: a list of {key, value} items, one variant per tunable key, each value typed with the config model's
  own bounds and description (an out-of-range value is refused naming `settings.N.value`);
- `overrides`: `dotted.key=value` strings whose key must be one the config model has (a `pattern`), so an unknown
  key is refused naming `overrides.N`; their values are checked when the config loads (exit 2, field named).
Source: Prefect 3 docs, "Deployments: parameters" (parameter schema enforcement) and "Form building" (pydantic
models render as forms; descriptions render as Markdown, so they carry no raw `<...>`).
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, create_model

from campaign.config import CampaignConfig

REPO = Path(__file__).resolve().parents[1]
CAMPAIGNS_DIR = REPO / "configs" / "campaigns"


def shipped_configs() -> list[str]:
    """The campaign files the repository ships, as the form offers them (relative to the repository root)."""
    return sorted(p.relative_to(REPO).as_posix() for p in CAMPAIGNS_DIR.glob("*.yaml"))


# ----------------------------------------------------------------------------------------------- the keys


def _leaves(
    model: type[BaseModel], prefix: tuple[str, ...] = ()
) -> typing.Iterator[tuple[tuple[str, ...], Any]]:
    """Every settable leaf of the config model: (dotted path parts, its FieldInfo); a list item's index is `#`."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        annotation = info.annotation
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin in (list, tuple) and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            yield from _leaves(args[0], (*prefix, key, "#"))
            continue
        models = [a for a in (args or (annotation,)) if isinstance(a, type) and issubclass(a, BaseModel)]
        if models:
            yield from _leaves(models[0], (*prefix, key))
        else:
            yield (*prefix, key), info


def override_keys() -> list[str]:
    """Every dotted key an override may set (`#` stands for a list index)."""
    return sorted(".".join(parts) for parts, _ in _leaves(CampaignConfig))


def override_pattern() -> str:
    """A JSON Schema `pattern` an override must match: a known dotted key, `=`, a value."""
    keys = [re.escape(k).replace("\\#", r"\d+").replace("#", r"\d+") for k in override_keys()]
    return r"^(?:" + "|".join(keys) + r")=.*$"


# ------------------------------------------------------------------------------------------ typed settings

# The knobs a team turns from a form; every other key stays reachable through `overrides`.
SETTING_KEYS = (
    "cluster.nodes",
    "cluster.spare_nodes",
    "plan.layout.tp",
    "plan.layout.pp",
    "plan.layout.dp",
    "plan.layout.cp",
    "plan.micro_batch",
    "plan.global_batch_tokens",
    "plan.zero_stage",
    "plan.recompute",
    "plan.target_tokens",
    "plan.checkpoint.storage_gb_per_s",
    "window.days",
    "seed",
    "commit.require_approval",
    "commit.approval_timeout_s",
    "sim.replicas",
    "gates.config.window_replicas",
)


def _class_name(key: str) -> str:
    return "Set_" + re.sub(r"[^A-Za-z0-9]+", "_", key)


def _setting_model(key: str, info: Any) -> type[BaseModel]:
    bounds = {}
    for meta in info.metadata:
        for attr in ("gt", "ge", "lt", "le"):
            if isinstance(meta, getattr(annotated_types, attr.capitalize())):
                bounds[attr] = getattr(meta, attr)
    value_type = info.annotation
    help_text = (info.description or key).replace("<", "(").replace(">", ")")
    model = create_model(
        _class_name(key),
        __config__=ConfigDict(extra="forbid", title=key),
        # A Literal of a value known at run time: pydantic builds it; a static checker cannot.
        key=(Literal[key], Field(key, description="The config key this sets.")),  # type: ignore[arg-type]
        value=(value_type, Field(..., description=help_text, **bounds)),
    )
    model.__doc__ = help_text
    return model


def _setting_models() -> dict[str, type[BaseModel]]:
    infos = {".".join(parts): info for parts, info in _leaves(CampaignConfig)}
    missing = [k for k in SETTING_KEYS if k not in infos]
    if missing:
        raise RuntimeError(f"flows/forms.py SETTING_KEYS names keys the config model lacks: {missing}")
    return {key: _setting_model(key, infos[key]) for key in SETTING_KEYS}


SETTING_MODELS = _setting_models()
if typing.TYPE_CHECKING:  # the union of SETTING_MODELS exists only at run time; statically, one of them
    Setting = BaseModel
else:
    Setting = Annotated[Union[tuple(SETTING_MODELS.values())], Field(discriminator="key")]  # noqa: UP007 - built at run time


def setting_overrides(settings: list[Any]) -> list[str]:
    """Typed settings as `--set` strings (YAML scalars), applied before the free overrides."""
    out = []
    for item in settings:
        value = item.value
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        out.append(f"{item.key}={text}")
    return out


def config_field_schema() -> dict[str, Any]:
    """The `config` field's extra schema: one of the shipped campaigns."""
    return {"enum": shipped_configs()}


def overrides_field_schema(schema: dict[str, Any]) -> None:
    """The `overrides` field's items must name a key of the config model."""
    schema.setdefault("items", {})["pattern"] = override_pattern()

"""deployments/prefect.yaml and deployments/serve.py describe the same deployments, every entrypoint loads, its
parameters validate against the flow, and the UI form says what the campaign's files allow (no server needed)."""

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from deployments.serve import deployment_specs, load_entrypoint, runner_deployments
from flows.forms import override_keys, override_pattern, shipped_configs
from tests.helpers.paths import REPO

STAGES = ("lifecycle", "prepare", "validate", "commit", "execute-window", "analyse", "simulate")
SPECS = deployment_specs()


def _schema(spec):
    from prefect.utilities.callables import parameter_schema

    return parameter_schema(load_entrypoint(spec["entrypoint"])).model_dump_for_openapi()


def test_served_deployments_are_the_deployed_ones_field_by_field():
    served = {d.name: d for d in runner_deployments()}
    assert list(served) == [s["name"] for s in SPECS]
    for spec in SPECS:
        d = served[spec["name"]]
        assert d.entrypoint.replace("\\", "/").endswith(spec["entrypoint"]), d.entrypoint
        assert d.description == spec["description"] and d.description and d.description != "None"
        assert d.tags == spec["tags"] and d.tags
        assert d.parameters == spec["parameters"]
        yaml_schedules = [
            (s["cron"], s.get("timezone"), s.get("active", True)) for s in spec.get("schedules") or []
        ]
        served_schedules = [(s.schedule.cron, s.schedule.timezone, s.active) for s in d.schedules or []]
        assert served_schedules == yaml_schedules, spec["name"]
        limit = d.concurrency_limit
        assert (getattr(limit, "limit", limit)) == spec.get("concurrency_limit")
        assert [t.name for t in d.triggers] == [t["name"] for t in spec.get("triggers") or []]


def test_every_shipped_campaign_has_every_stage_and_each_form_points_at_it():
    by_name = {s["name"]: s for s in SPECS}
    for config in shipped_configs():
        name = yaml.safe_load((REPO / config).read_text())["name"]
        for stage in STAGES:
            spec = by_name.get(f"{name}-{stage}")
            assert spec is not None, f"deployments/prefect.yaml has no {name}-{stage} for {config}"
            assert name in spec["tags"]
            params = spec["parameters"]["params"]
            assert params.get("config", config) == config and params.get(
                "workspace", f"workspace/{name}"
            ) in ("", f"workspace/{name}")
    assert any(s.get("active", True) for spec in SPECS for s in spec.get("schedules") or [])
    assert all(
        by_name[f"{Path(c).stem}-execute-window"].get("concurrency_limit") == 1 for c in shipped_configs()
    )


@pytest.mark.parametrize("spec", SPECS, ids=[s["name"] for s in SPECS])
def test_each_entrypoint_loads_and_its_parameters_validate(spec):
    flow = load_entrypoint(spec["entrypoint"])
    flow.validate_parameters(spec["parameters"])  # what the worker does
    jsonschema.validate(spec["parameters"], _schema(spec))  # what the server does before creating a run
    for trigger in spec.get("triggers") or []:  # the automation's parameters name real fields
        assert set(trigger["parameters"]) <= set(_schema(spec)["properties"])


def test_the_form_offers_the_shipped_campaigns_and_no_html_in_help():
    schema = _schema(next(s for s in SPECS if s["name"] == "demo-validate"))
    text = json.dumps(schema)
    stage = schema["definitions"]["StageParams"]
    assert stage["properties"]["config"]["enum"] == sorted(
        f"configs/campaigns/{p.name}" for p in (REPO / "configs/campaigns").glob("*.yaml")
    )
    assert stage["properties"]["workspace"]["type"] == "string"  # no None toggle
    assert "anyOf" not in json.dumps(stage["properties"]["workspace"])
    # Descriptions render as Markdown in the UI: a <word> outside a code span would vanish as an HTML tag.
    for description in re.findall(r'"description": "((?:[^"\\]|\\.)*)"', text):
        assert not re.search(r"<[A-Za-z]", re.sub(r"`[^`]*`", "", description)), description


def test_bad_ui_input_is_refused_by_the_schema_naming_the_field():
    schema = _schema(next(s for s in SPECS if s["name"] == "demo-lifecycle"))
    good = {
        "params": {"config": "configs/campaigns/demo.yaml", "workspace": "", "settings": [], "overrides": []}
    }
    jsonschema.validate(good, schema)

    def rejected(**change) -> str:
        params = {**good["params"], **change}
        with pytest.raises(jsonschema.ValidationError) as err:
            jsonschema.validate({"params": params}, schema)
        return "/".join(str(p) for p in err.value.absolute_path)

    assert rejected(config="configs/campaigns/nope.yaml") == "params/config"
    assert rejected(overrides=["cluster.nodez=4"]) == "params/overrides/0"
    assert rejected(settings=[{"key": "cluster.nodes", "value": -3}]).startswith("params/settings/0")
    assert rejected(settings=[{"key": "window.days", "value": 10_000}]).startswith("params/settings/0")
    assert rejected(settings=[{"key": "plan.recompute", "value": "sometimes"}]).startswith(
        "params/settings/0"
    )
    # Known keys pass, list items by index too.
    ok = {
        **good["params"],
        "overrides": ["cluster.failures.0.repair_h=4", "data.sources.1.weight=2"],
        "settings": [{"key": "cluster.nodes", "value": 8}, {"key": "commit.require_approval", "value": True}],
    }
    jsonschema.validate({"params": ok}, schema)


def test_typed_settings_become_overrides_and_the_keys_follow_the_config_model():
    from flows.common import StageParams

    params = StageParams(
        settings=[{"key": "cluster.nodes", "value": 8}, {"key": "commit.require_approval", "value": True}],
        overrides=["seed=3"],
    )
    assert params.overrides == ["cluster.nodes=8", "commit.require_approval=true", "seed=3"]
    assert params.settings == []
    assert StageParams(workspace=None).workspace == ""  # the CLI without --workspace
    keys = override_keys()
    assert {"cluster.nodes", "plan.layout.dp", "window.start", "cluster.failures.#.repair_h"} <= set(keys)
    assert re.match(override_pattern(), "plan.layout.dp=64") and not re.match(
        override_pattern(), "plan.dp=64"
    )

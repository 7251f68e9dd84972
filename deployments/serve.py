"""Serve every deployment of `deployments/prefect.yaml` from one process (no work pool): `make serve` beside a server.

The deployments are built from prefect.yaml itself (names, entrypoints, parameters, descriptions, tags, schedules
with their active flags, concurrency limits, triggers), so `make serve` and `prefect deploy --all` show the same
deployments; `tests/flows/test_deployment_specs.py` checks it field by field.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import yaml

PREFECT_YAML = Path(__file__).with_name("prefect.yaml")


def deployment_specs(path: Path = PREFECT_YAML) -> list[dict[str, Any]]:
    """The `deployments:` entries of prefect.yaml (YAML anchors resolved)."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))["deployments"]


def load_entrypoint(entrypoint: str):
    """`flows/lifecycle.py:campaign` -> the flow object (imported as a module of the repository)."""
    file, name = entrypoint.split(":")
    module = importlib.import_module(file.removesuffix(".py").replace("/", "."))
    return getattr(module, name)


def runner_deployments(path: Path = PREFECT_YAML) -> list[Any]:
    """Every deployment of prefect.yaml as a RunnerDeployment for `prefect.serve`."""
    from prefect.events import DeploymentEventTrigger
    from prefect.schedules import Cron

    out = []
    for spec in deployment_specs(path):
        flow = load_entrypoint(spec["entrypoint"])
        schedules = [
            Cron(s["cron"], timezone=s.get("timezone"), active=s.get("active", True))
            for s in spec.get("schedules") or []
        ]
        triggers = [DeploymentEventTrigger(**t) for t in spec.get("triggers") or []]
        out.append(
            flow.to_deployment(
                name=spec["name"],
                description=spec.get("description"),
                tags=spec.get("tags"),
                parameters=spec.get("parameters"),
                schedules=schedules or None,
                triggers=triggers or None,
                concurrency_limit=spec.get("concurrency_limit"),
            )
        )
    return out


def main() -> None:
    from prefect import serve

    serve(*runner_deployments(), limit=4, pause_on_shutdown=False)


if __name__ == "__main__":
    main()

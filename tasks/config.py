"""Load the campaign config and resolve its workspace."""

from __future__ import annotations

from prefect import task

from campaign.config import LoadedConfig, load_config
from campaign.store import Workspace, workspace_for


@task(name="load-config", cache_policy=None)
def load_campaign(
    config_path: str, overrides: list[str], workspace: str | None
) -> tuple[LoadedConfig, Workspace]:
    loaded = load_config(config_path, overrides)
    return loaded, workspace_for(loaded.config.name, workspace)

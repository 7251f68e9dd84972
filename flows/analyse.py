"""The analyse stage: goodput, failures, checkpoints, power, energy and cost of the executed window."""

import sys

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from campaign import store
from campaign.errors import CampaignError
from flows.common import failed, quiet_expected_errors
from tasks.analyse import analyse


class AnalyseParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: str | None = Field(None, description="Workspace folder (default: the only one under workspace/).")


@flow(name="analyse")
def analyse_flow(params: AnalyseParams = AnalyseParams()):
    quiet_expected_errors()
    try:
        ws = store.existing_workspace(params.workspace)
        with store.locked(ws, "campaign analyse"):
            run_id = store.start_run(ws, "analyse", None, None)
            result = analyse(ws)
            store.finish_run(ws, run_id, "completed")
            return result
    except CampaignError as err:
        return failed(err)


if __name__ == "__main__":
    from flows.cli import run_stage_main

    sys.exit(run_stage_main("analyse"))

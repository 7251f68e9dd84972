"""The analyse stage: goodput, failures, checkpoints, power, energy and cost of the executed window; and runs
side by side (`--compare`)."""

import sys
from pathlib import Path

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from campaign import store
from campaign.analysis.workspace import analysis_workspace
from flows.common import fails_cleanly, params_field, stage_run_name
from tasks.analyse import analyse, compare


class AnalyseParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: str | None = Field(
        None, description="Workspace folder (default: the only one under workspace/)."
    )


class CompareParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    targets: list[str] = Field(
        min_length=2,
        max_length=16,
        description="Workspaces, or JSON files of `campaign simulate --json`, to compare.",
    )
    out_dir: str = Field("compare", description="Folder for compare.html and compare.json.")


@flow(name="analyse", flow_run_name=stage_run_name("analyse"))
@fails_cleanly
def analyse_flow(params: AnalyseParams = AnalyseParams()):
    ws = analysis_workspace(params.workspace)  # bad input refused here, before anything is written
    if not store.is_writable(ws):
        # a read-only workspace is read as it is: no lock file, no run recorded, the report written outside it
        return analyse(ws, store.outside_report_dir(ws))
    with store.locked(ws, "campaign analyse"):
        run_id = store.start_run(ws, "analyse", None, None)
        result = analyse(ws)
        store.finish_run(ws, run_id, "completed")
        return result


def _compared(parameters: dict) -> str:
    """What a comparison is about: its targets' names, `demo-vs-llama3-405b` (at most 40 characters)."""
    return "-vs-".join(Path(str(t)).stem for t in params_field(parameters, "targets") or [])[:40] or "compare"


@flow(name="analyse-compare", flow_run_name=stage_run_name("analyse-compare", _compared))
@fails_cleanly
def compare_flow(params: CompareParams):
    from campaign.analysis.compare import (  # the analysis stack, for this flow only
        check_targets,
        compare_out_dir,
    )

    check_targets(params.targets)
    return compare(params.targets, str(compare_out_dir(params.out_dir)))


if __name__ == "__main__":
    from campaign_cli.terminal import flow_main

    sys.exit(flow_main(analyse_flow))

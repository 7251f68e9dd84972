"""The whole campaign: prepare, validate, commit, execute and analyse, each a subflow; a failed gate stops it.

The parent run's state names the stage that stopped it and why (for validate: each failed gate with its figure
and threshold), and its summary artifact lists every stage's outcome."""

import sys

from prefect import flow

from campaign import store
from campaign.errors import CampaignError
from flows.analyse import AnalyseParams, analyse_flow
from flows.commit import commit_flow
from flows.common import StageParams, campaign_tags, failed, fails_cleanly, one_line, stage_run_name
from flows.execute import execute_flow
from flows.prepare import prepare_flow
from flows.validate import validate_flow
from tasks.config import load_campaign
from tasks.lifecycle import publish_lifecycle_summary


@flow(name="campaign", flow_run_name=stage_run_name("lifecycle"))
@fails_cleanly
def lifecycle_flow(params: StageParams = StageParams()):
    loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
    store.adopt_workspace(ws, loaded.config.name)
    name = loaded.config.name
    outcomes: list[tuple[str, str, str]] = []  # (stage, state name, state message)
    # One lock for the whole lifecycle, so no other process slips in between two stages.
    with store.locked(ws, "campaign run"), campaign_tags(name):
        for stage_name, stage in (
            ("prepare", prepare_flow),
            ("validate", validate_flow),
            ("commit", commit_flow),
            ("execute", execute_flow),
        ):
            # The lifecycle executes the window itself: its commit must not also schedule execute-window.
            extra = {"schedule_execution": False} if stage is commit_flow else {}
            state = stage(params, return_state=True, **extra)
            outcomes.append((stage_name, str(state.name), state.message or ""))
            if not state.is_completed():  # after a failed gate nothing executes
                publish_lifecycle_summary(name, outcomes, None)
                return _stopped_at(stage_name, state)
        state = analyse_flow(AnalyseParams(workspace=str(ws.root)), return_state=True)
        outcomes.append(("analyse", str(state.name), state.message or ""))
        if not state.is_completed():
            publish_lifecycle_summary(name, outcomes, None)
            return _stopped_at("analyse", state)
        result = state.result()
        publish_lifecycle_summary(name, outcomes, result)
        return result


def _stopped_at(stage: str, state):
    """The parent's own Failed state, naming the stage; it carries the stage's error so the CLI exits with its code
    (returning the child's state instead would read as `1/1 states failed`)."""
    err = state.data if isinstance(state.data, CampaignError) else state.result(raise_on_failure=False)
    if isinstance(err, CampaignError):
        return failed(err, prefix=f"stage {stage} failed: ")
    from prefect.states import Failed

    return Failed(message=f"stage {stage} failed: {one_line(state.message or state.name)}", data=err)


if __name__ == "__main__":
    from campaign_cli.terminal import stage_main

    sys.exit(stage_main("run"))

"""The whole campaign: prepare, validate, commit, execute and analyse, each a subflow; a failed gate stops it."""

import sys

from prefect import flow

from campaign import store
from campaign.errors import CampaignError
from flows.analyse import AnalyseParams, analyse_flow
from flows.commit import commit
from flows.common import StageParams, failed, quiet_expected_errors
from flows.execute import execute
from flows.prepare import prepare
from flows.validate import validate
from tasks.config import load_campaign


@flow(name="campaign")
def campaign(params: StageParams = StageParams()):
    quiet_expected_errors()
    try:
        loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
        store.adopt_workspace(ws, loaded.config.name)
        # One lock for the whole lifecycle, so no other process slips in between two stages.
        with store.locked(ws, "campaign run"):
            for stage in (prepare, validate, commit, execute):
                # The lifecycle executes the window itself: its commit must not also schedule execute-window.
                extra = {"schedule_execution": False} if stage is commit else {}
                state = stage(params, return_state=True, **extra)
                if not state.is_completed():
                    return state  # carries the stage's error; after a failed gate nothing executes
            state = analyse_flow(AnalyseParams(workspace=str(ws.root)), return_state=True)
            return state.result() if state.is_completed() else state
    except CampaignError as err:
        return failed(err)


if __name__ == "__main__":
    from flows.terminal import stage_main

    sys.exit(stage_main("run"))

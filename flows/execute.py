"""The execute stage: run the committed window (simulated, or for real with execute.backend: local), refusing if
anything changed since commit."""

import sys

from prefect import flow

from campaign import store
from campaign.window import with_start
from flows.common import StageParams, fails_cleanly, stage_run, stage_run_name
from tasks.calendar import calendar_of, check_booking, record_actual_end
from tasks.config import load_campaign
from tasks.execute import check_commitment, run_window, simulate_window


@flow(name="execute", flow_run_name=stage_run_name("execute"))
@fails_cleanly
def execute_flow(params: StageParams = StageParams()):
    loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
    with stage_run(ws, "execute", loaded.digest) as run_id:
        commitment = check_commitment(ws, loaded)
        path = calendar_of(loaded, ws)
        booking = check_booking(path, loaded, commitment.commitment_id)  # refuses a cancelled commitment
        # The window runs when its booking says (the start `window.start: auto` got at commit).
        config = with_start(loaded.config, booking.start)
        if config.execute.backend == "simulate":
            record = simulate_window(ws, config, commitment, run_id)
            record_actual_end(path, loaded, booking, record.completion_s, store.now())
        else:  # a real run on this machine rehearses the window at small scale: the booking keeps its end
            record = run_window(ws, config, commitment, run_id)
        return record


if __name__ == "__main__":
    from campaign_cli.terminal import stage_main

    sys.exit(stage_main("execute"))

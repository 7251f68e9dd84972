"""The execution window as the simulator sees it: the campaign config joined with its plan.

The simulator takes plain numbers (`SimInputs`) so it can be tested without the performance model; this is the
one place where the plan's step time, checkpoint cost and interval flow into it.
"""

from __future__ import annotations

from campaign.config import CampaignConfig
from campaign.plan import Plan, make_plan
from campaign.sim import SimInputs, sim_inputs_from_config


def window_inputs(config: CampaignConfig, plan: Plan | None = None) -> SimInputs:
    plan = plan or make_plan(config)
    return sim_inputs_from_config(
        config,
        step_time_s=plan.step_time_s,
        tokens_per_step=plan.tokens_per_step,
        checkpoint_write_s=plan.checkpoint.write_s,
        checkpoint_background_s=plan.checkpoint.background_s,
        checkpoint_interval_s=plan.checkpoint.interval_s,
        comm_fraction=plan.comm_fraction,
    )

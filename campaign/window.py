"""The execution window as the simulator sees it: the campaign config joined with its plan.

The simulator takes plain numbers (`SimInputs`) so it can be tested without the performance model; this is the
one place where the plan's step time, checkpoint cost and interval flow into it. A window whose start is `auto` is
simulated from the start its booking got (`with_start`), or from midnight UTC before it is booked (what-if runs:
only the diurnal phase depends on the start).
"""

from __future__ import annotations

from datetime import UTC, datetime

from campaign.config import CampaignConfig
from campaign.plan import Plan, make_plan
from campaign.sim import SimInputs, sim_inputs_from_config
from campaign.window_verdict import plan_band

# The clock phase of an `auto` window that is not booked yet: midnight UTC (any date; only the hour matters).
UNBOOKED_START = datetime(2027, 1, 4, tzinfo=UTC)


def with_start(config: CampaignConfig, start: datetime) -> CampaignConfig:
    """The config with its window starting at `start` (the booked start of an `auto` window)."""
    return config.model_copy(update={"window": config.window.model_copy(update={"start": start})})


def window_inputs(config: CampaignConfig, plan: Plan | None = None) -> SimInputs:
    if config.window.is_auto:
        config = with_start(config, UNBOOKED_START)
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


def window_replicas_inputs(
    config: CampaignConfig, plan: Plan | None = None
) -> tuple[SimInputs, tuple[float, float]]:
    """What `campaign simulate` and the `schedule` gate both simulate: the window's inputs and the plan's step-time
    band (multipliers on its step time) from which each replica draws its own step time (`simulate_batch`)."""
    plan = plan or make_plan(config)
    return window_inputs(config, plan), plan_band(plan.step_time_s, plan.step_time_range_s)

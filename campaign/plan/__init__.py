"""Plan a training campaign: memory, step time, MFU, checkpointing, reliability and layout search.

Layering: flops, kernels, memory, topology and layout (the rules; only config below it) -> performance ->
calibration -> planner -> search; measure (a short run's step time) stands alone.
Source: see each module (flops, kernels, memory, topology, performance, calibration, checkpointing, reliability,
layout, planner, search, measure).
"""

from campaign.plan.checkpointing import (
    CheckpointPlan,
    checkpoint_size_gb,
    checkpoint_write_s,
    daly_expected_wall_s,
    daly_interval_s,
    plan_checkpoint,
    young_interval_s,
)
from campaign.plan.flops import hardware_flops_per_token, model_flops_per_token, parameter_count
from campaign.plan.layout import Violation, candidate_layouts, layout_violations
from campaign.plan.memory import MemoryEstimate, estimate_memory
from campaign.plan.performance import StepEstimate, estimate_step, step_time_s
from campaign.plan.planner import Plan, evaluate_layout, make_plan
from campaign.plan.reliability import (
    expected_days,
    expected_ettr,
    job_failure_rate_per_h,
    job_mtbf_h,
    mean_recovery_s,
)
from campaign.plan.search import search_layouts
from campaign.plan.topology import (
    Fabric,
    Placement,
    all_gather_s,
    all_reduce_s,
    place_group,
    reduce_scatter_s,
)

__all__ = [
    "CheckpointPlan",
    "Fabric",
    "MemoryEstimate",
    "Placement",
    "Plan",
    "StepEstimate",
    "Violation",
    "all_gather_s",
    "all_reduce_s",
    "candidate_layouts",
    "checkpoint_size_gb",
    "checkpoint_write_s",
    "daly_expected_wall_s",
    "daly_interval_s",
    "estimate_memory",
    "estimate_step",
    "evaluate_layout",
    "expected_days",
    "expected_ettr",
    "hardware_flops_per_token",
    "job_failure_rate_per_h",
    "job_mtbf_h",
    "layout_violations",
    "make_plan",
    "mean_recovery_s",
    "model_flops_per_token",
    "parameter_count",
    "place_group",
    "plan_checkpoint",
    "reduce_scatter_s",
    "search_layouts",
    "step_time_s",
    "young_interval_s",
]

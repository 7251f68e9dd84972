"""Search every legal layout of a campaign and rank the plans by throughput.

The search sits above the planner: it enumerates `layout.candidate_layouts`, scores each with the planner's quick
estimate (memory and step time, no checkpoint or reliability work) and builds full plans for the best few.
Source: see `campaign.plan.layout` (rules) and `campaign.plan.planner` (the estimate).
"""

from __future__ import annotations

from campaign.config import CampaignConfig
from campaign.plan.layout import candidate_layouts
from campaign.plan.planner import Plan, PlanContext, rank_key


def search_layouts(config: CampaignConfig, top: int = 10) -> list[Plan]:
    """Plans of the best legal layouts: those that fit first, then by highest tokens_per_s (among the rest, layouts
    that fit in memory before those that do not)."""
    ctx = PlanContext.from_config(config)
    scored = [ctx.quick(lay, b) for lay, b in candidate_layouts(config)]
    scored.sort(key=rank_key)
    return [ctx.plan(q.layout, q.micro_batch) for q in scored[:top]]

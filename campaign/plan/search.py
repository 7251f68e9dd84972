"""Search every legal layout of a campaign and rank the plans by throughput.

The search sits above the planner: it enumerates `layout.candidate_layouts`, estimates each one's memory, times
those that fit (and the rest only when fewer than `top` fit, since they rank below), ranks them with the planner's
key and builds full plans for the best few.
Source: see `campaign.plan.layout` (rules) and `campaign.plan.planner` (the estimate).
"""

from __future__ import annotations

from campaign.config import CampaignConfig
from campaign.plan.layout import candidate_layouts
from campaign.plan.planner import Plan, PlanContext, QuickPlan, rank_key


def search_layouts(config: CampaignConfig, top: int = 10) -> list[Plan]:
    """Plans of the best legal layouts: those that fit first, then by highest tokens_per_s (among the rest, layouts
    that fit in memory before those that do not)."""
    ctx = PlanContext.from_config(config)
    candidates = candidate_layouts(config)
    memory = [ctx.memory_gib(lay, b) for lay, b in candidates]
    # Layouts that fit in memory rank above all that do not: time the others only if too few fit.
    fitting = [(lay, b, g) for (lay, b), g in zip(candidates, memory) if g <= ctx.memory_limit_gib]
    scored = _best_by_bound(ctx, fitting, top) if len(fitting) >= top else [
        ctx.quick(lay, b, g) for (lay, b), g in zip(candidates, memory)]
    scored.sort(key=rank_key)
    return [ctx.plan(q.layout, q.micro_batch) for q in scored[:top]]


def _best_by_bound(ctx: PlanContext, fitting: list, top: int) -> list[QuickPlan]:
    """The `top` fastest of layouts that all fit in memory, timing them in order of their best possible
    tokens/s (compute alone) and stopping once that bound cannot beat the `top`-th found (branch and bound)."""
    seq = ctx.config.model.seq_len
    bounds = []
    for lay, b, g in fitting:
        m = ctx.micro_batches(lay, b)
        bounds.append((m * b * lay.dp * seq / ctx.steps.lower_bound_s(lay, b, m), lay, b, g))
    bounds.sort(key=lambda x: -x[0])
    scored: list[QuickPlan] = []
    best: list[float] = []  # tokens/s of the timed layouts, kept sorted descending, at most `top`
    for bound, lay, b, g in bounds:
        if len(best) >= top and bound <= best[top - 1]:
            break
        q = ctx.quick(lay, b, g)
        scored.append(q)
        best.append(q.tokens_per_s)
        best.sort(reverse=True)
        del best[top:]
    return scored

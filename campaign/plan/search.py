"""Search every legal layout of a campaign and rank the plans by throughput.

The search sits above the planner: it enumerates `layout.candidate_layouts`, estimates each one's memory, times
those that fit (and the rest only when fewer than `top` fit, since they rank below), ranks them with the planner's
key and builds full plans for the best few.
Source: see `campaign.plan.layout` (rules) and `campaign.plan.planner` (the estimate).
"""

from __future__ import annotations

from campaign.config import CampaignConfig
from campaign.plan.layout import Candidate, candidates
from campaign.plan.memory import GIB
from campaign.plan.planner import Plan, PlanContext, QuickPlan, rank_key


def search_layouts(config: CampaignConfig, top: int = 10) -> list[Plan]:
    """Plans of the best legal layouts: those that fit first, then by highest tokens_per_s (among the rest, layouts
    that fit in memory before those that do not)."""
    ctx = PlanContext.from_config(config)
    found = candidates(config)
    sequences = config.plan.global_batch_tokens // config.model.seq_len
    limit = ctx.memory_limit_gib * GIB
    memory = [ctx.memory.total_bytes(c.tp, c.pp, c.dp, c.cp, c.vpp, c.micro_batch,
                                     max(1, sequences // (c.micro_batch * c.dp))) for c in found]
    # Layouts that fit in memory rank above all that do not: time the others only if too few fit.
    fitting = [(c, g / GIB) for c, g in zip(found, memory) if g <= limit]
    if len(fitting) >= top:
        scored = _best_by_bound(ctx, fitting, top, sequences)
    else:
        scored = [ctx.quick(c, c.micro_batch, g / GIB) for c, g in zip(found, memory)]
    scored.sort(key=rank_key)
    return [ctx.plan(q.layout.layout(), q.micro_batch) for q in scored[:top]]


def _best_by_bound(ctx: PlanContext, fitting: list[tuple[Candidate, float]], top: int,
                   sequences: int) -> list[QuickPlan]:
    """The `top` fastest of layouts that all fit in memory, timing them in order of their best possible
    tokens/s (compute alone) and stopping once that bound cannot beat the `top`-th found (branch and bound)."""
    seq = ctx.config.model.seq_len
    bounds = []
    for c, g in fitting:
        m = max(1, sequences // (c.micro_batch * c.dp))
        bounds.append((m * c.micro_batch * c.dp * seq / ctx.steps.lower_bound_s(c, c.micro_batch, m), c, g))
    bounds.sort(key=lambda x: -x[0])
    scored: list[QuickPlan] = []
    best: list[float] = []  # tokens/s of the timed layouts, kept sorted descending, at most `top`
    for bound, c, g in bounds:
        if len(best) >= top and bound <= best[top - 1]:
            break
        q = ctx.quick(c, c.micro_batch, g)
        scored.append(q)
        best.append(q.tokens_per_s)
        best.sort(reverse=True)
        del best[top:]
    return scored

"""Search every legal layout of a campaign and rank the plans by throughput.

The search sits above the planner: it enumerates `layout.candidate_layouts`, estimates each one's memory, times
those that fit (and the rest only when fewer than `top` fit, since they rank below), ranks them with the planner's
key and builds full plans for the best few. Each plan that differs from the config's own layout carries a note
saying by how much it is faster or slower and which parts of the step (per token) make the difference.
Source: see `campaign.plan.layout` (rules) and `campaign.plan.planner` (the estimate).
"""

from __future__ import annotations

from dataclasses import replace

from campaign.config import CampaignConfig
from campaign.plan.layout import Candidate, candidates, layout_config
from campaign.plan.memory import GIB
from campaign.plan.planner import Plan, PlanContext, QuickPlan, rank_key


def search_layouts(config: CampaignConfig, top: int = 10) -> list[Plan]:
    """Plans of the best legal layouts: those that fit first, then by highest tokens_per_s (among the rest, layouts
    that fit in memory before those that do not)."""
    ctx = PlanContext.from_config(config)
    found = candidates(config)
    sequences = config.plan.global_batch_tokens // config.model.seq_len
    limit = ctx.memory_limit_gib * GIB
    memory = [
        ctx.memory.total_bytes(
            c.tp, c.pp, c.dp, c.cp, c.vpp, c.micro_batch, max(1, sequences // (c.micro_batch * c.dp))
        )
        for c in found
    ]
    # Layouts that fit in memory rank above all that do not: time the others only if too few fit.
    fitting = [(c, g / GIB) for c, g in zip(found, memory, strict=False) if g <= limit]
    if len(fitting) >= top:
        scored = _best_by_bound(ctx, fitting, top, sequences)
    else:
        scored = [ctx.quick(c, c.micro_batch, g / GIB) for c, g in zip(found, memory, strict=False)]
    scored.sort(key=rank_key)
    reference = ctx.plan(config.plan.layout, config.plan.micro_batch)
    return [
        _with_comparison(ctx.plan(layout_config(q.layout), q.micro_batch), reference) for q in scored[:top]
    ]


# Step parts a comparison names, in the order they are listed when they differ.
_PARTS = ("compute", "tp_comm", "cp_comm_exposed", "pp_bubble", "pp_comm", "dp_comm_exposed", "optimizer")


def explain_difference(plan: Plan, reference: Plan) -> str:
    """Why `plan` is faster or slower than `reference`: throughput ratio and the step parts that differ most
    (per token, since the two may process different tokens per step), largest first."""
    ratio = plan.tokens_per_s / reference.tokens_per_s - 1.0
    per_token = {
        k: plan.step_breakdown_s[k] / plan.tokens_per_step
        - reference.step_breakdown_s[k] / reference.tokens_per_step
        for k in _PARTS
    }
    total = reference.step_time_s / reference.tokens_per_step
    parts = sorted(
        ((v / total, k) for k, v in per_token.items() if abs(v) / total >= 0.005), key=lambda x: -abs(x[0])
    )
    lay = reference.layout
    ref = f"tp={lay['tp']} pp={lay['pp']} dp={lay['dp']} cp={lay['cp']} vpp={lay['vpp']} mb={reference.micro_batch}"
    detail = ", ".join(f"{k} {v:+.1%}" for v, k in parts) or "no part differs by 0.5 % or more"
    return f"{ratio:+.1%} tokens/s against the config's layout ({ref}); step time per token by part: {detail}"


def _with_comparison(plan: Plan, reference: Plan) -> Plan:
    if plan.layout == reference.layout and plan.micro_batch == reference.micro_batch:
        return plan
    return replace(plan, notes=(*plan.notes, explain_difference(plan, reference)))


def _best_by_bound(
    ctx: PlanContext, fitting: list[tuple[Candidate, float]], top: int, sequences: int
) -> list[QuickPlan]:
    """The `top` fastest of layouts that all fit in memory, timing them in order of their best possible
    tokens/s (`StepModel.lower_bound_s`) and stopping once that bound cannot beat the `top`-th found (branch and bound)."""
    seq = ctx.config.model.seq_len
    # A calibrated step is at least the smaller stack-efficiency factor times the raw one.
    scale = min(ctx.efficiency.compute, ctx.efficiency.communication) if ctx.calibration else 1.0
    bounds = []
    for c, g in fitting:
        m = max(1, sequences // (c.micro_batch * c.dp))
        bound_s = scale * ctx.steps.lower_bound_s(c, c.micro_batch, m)
        bounds.append((m * c.micro_batch * c.dp * seq / bound_s, c, g))
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

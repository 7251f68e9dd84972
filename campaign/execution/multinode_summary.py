"""A multi-node run's journal as the simulator's per-replica summary: the job's nodes and its spares in the GPU-hours,
and per node and per recovery what happened.

The job time per bucket is the one-node run's (`campaign.execution.measured.job_seconds`), except that time
waiting for a repaired node (`waiting_start` to `waiting_end`) is `waiting`, as in the simulator; the buckets are
then GPU-hours of `job_nodes` slots and `spare_nodes` spares (spares standing by are `idle`). Each recovery is
timed as the simulator models it: detection (failure to `detected`), restart (detection to the next start's first
step) and rework (the steps trained again since the last complete checkpoint, at the median step time).
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from dataclasses import replace

from campaign import goodput
from campaign.execution.journal import Journal
from campaign.execution.measured import job_seconds, measured_summary
from campaign.sim.summary import MultiNodeRun, NodeOutcome, Recovery, ReplicaSummary, Straggler


def node_names(journal: Journal) -> list[str]:
    """Node index -> name, as the supervisor numbered them (kept in each start event)."""
    starts = journal.kinds("start")
    return list(starts[-1].names or ()) if starts else []


def _detail(detail: str, key: str) -> str:
    """The `key=value` value of a supervisor's event detail ("" when the detail has none)."""
    for part in detail.split():
        if part.startswith(f"{key}="):
            return part.split("=", 1)[1]
    return ""


def recoveries(journal: Journal) -> list[Recovery]:
    names = node_names(journal)
    steps = journal.steps
    gaps = [b.t_s - a.t_s for a, b in itertools.pairwise(steps) if a.attempt == b.attempt]
    median = statistics.median(gaps) if gaps else 0.0
    out, kept = [], 0
    for failure in journal.kinds("failure"):
        attempt = failure.attempt
        checkpoints = [e.at_step for e in journal.kinds("checkpoint_end") if e.attempt <= attempt]
        kept = max([kept, *checkpoints])
        detected = next((e for e in journal.kinds("detected") if e.attempt == attempt), None)
        later = [s for s in steps if s.attempt > attempt]
        detection = (detected.t_s if detected else failure.t_s) - failure.t_s
        restart = later[0].t_s - median - (detected.t_s if detected else failure.t_s) if later else None
        rework = max(failure.at_step - kept, 0)
        node = failure.node
        out.append(
            Recovery(
                names[node] if 0 <= node < len(names) else "",
                failure.category,
                failure.detail.startswith("injected"),
                failure.at_step,
                kept,
                detection,
                None if restart is None else max(restart, 0.0),
                rework,
                rework * median,
            )
        )
    return out


def multinode_summary(
    journal: Journal,
    target_step: int,
    tokens_per_step: int,
    checkpoint_every: int,
    seed: int,
    gpu_hour_usd: float,
    job_nodes: int,
    spare_nodes: int,
    max_wall_s: float | None = None,
) -> ReplicaSummary:
    """The measured summary of a multi-node run, with its nodes, spares, exclusions and recoveries."""
    summary = measured_summary(
        journal, target_step, tokens_per_step, checkpoint_every, seed, gpu_hour_usd, max_wall_s=max_wall_s
    )
    job_s, window_s = job_seconds(journal, target_step)
    waits = zip(journal.kinds("waiting_start"), journal.kinds("waiting_end"), strict=False)
    spare_wait_s = sum(end.t_s - begin.t_s for begin, end in waits)
    moved = min(spare_wait_s, job_s["restart"])
    job_s = {**job_s, "restart": job_s["restart"] - moved, "waiting": job_s["waiting"] + moved}
    complete = journal.kinds("job_complete")
    completion_s = complete[0].t_s if complete else None
    buckets = goodput.goodput_buckets_gpu_h(job_s, job_nodes, spare_nodes, window_s, completion_s)
    total = goodput.total_gpu_h(job_nodes, spare_nodes, window_s)
    lost = sum(buckets[k] for k in ("lost_rework", "restart", "waiting"))
    names = node_names(journal)
    excluded = [_detail(e.detail, "node") for e in journal.kinds("node_excluded")]
    swaps = journal.kinds("spare_swap")
    first = (journal.kinds("start")[0].nodes or ()) if journal.kinds("start") else ()
    worlds = [int(_detail(e.detail, "world") or 0) for e in journal.kinds("start")]
    failures_by_node = Counter(names[e.node] for e in journal.kinds("failure") if 0 <= e.node < len(names))
    stragglers = [
        Straggler(_detail(e.detail, "node"), int(_detail(e.detail, "rank") or -1), e.detail)
        for e in journal.kinds("straggler")
    ]
    recovered = recoveries(journal)
    per_node = {
        name: NodeOutcome(
            role="job" if name in first else "spare",
            failures=failures_by_node.get(name, 0),
            excluded=name in excluded,
            straggler=any(s.node == name for s in stragglers),
            recovery_s=round(
                sum(r.detection_s + (r.restart_s or 0.0) + r.rework_s for r in recovered if r.node == name), 3
            ),
        )
        for name in names
    }
    shrunk = worlds and worlds[-1] < job_nodes
    nodes = MultiNodeRun(
        job_nodes=job_nodes,
        spare_nodes=spare_nodes,
        world_size=worlds[-1] if worlds else job_nodes,
        world_sizes=worlds,
        spares_used=[_detail(e.detail, "node") for e in swaps],
        nodes_excluded=excluded,
        spare_wait_s=spare_wait_s,
        elastic=(
            f"shrunk to {worlds[-1]} of {job_nodes} nodes (no spare left; the global batch kept by gradient "
            "accumulation)"
            if shrunk
            else None
        ),
        stragglers=stragglers,
        per_node=per_node,
        recoveries=recovered,
    )
    return replace(
        summary,
        gpus=job_nodes,
        spare_gpus=spare_nodes,
        goodput_breakdown_gpu_h=buckets,
        job_time_s={**job_s, "released": window_s - goodput.job_wall_s(window_s, completion_s)},
        window_utilisation=goodput.window_utilisation(
            buckets["productive"], job_nodes, spare_nodes, window_s
        ),
        n_spares_exhausted=len(journal.kinds("spares_exhausted")),
        n_quarantined=len(excluded),
        cost_usd=goodput.CostUsd(
            compute=total * gpu_hour_usd, energy=summary.cost_usd["energy"], lost=lost * gpu_hour_usd
        ),
        measured=summary.measured and replace(summary.measured, nodes=nodes),
    )

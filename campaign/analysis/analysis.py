"""The analysis of an executed window: DuckDB views over the catalog, returned as one typed record
(`campaign.analysis.result.WindowAnalysis`, analysis.json by its `to_json()`).

Every headline figure uses the shared definitions of `campaign.goodput` (ETTR while the job ran, window
utilisation, the goodput buckets with the idle tail split into spares standing by and capacity released early);
they are recomputed here from the simulator's per-bucket job seconds, so an older summary with other figures is
read the same way. Lost cost counts only rework, restarts and waiting: the idle tail after an early finish is
capacity released to the cluster, never a loss of the job.
Source: Meta's ETTR definition as used by Kokolis et al., HPCA 2025 (arXiv 2410.21680); Llama 3 §3.3.4 (arXiv
2407.21783) for interruptions reported over the job's wall time; Daly (2006) for the checkpoint interval.
"""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from campaign import goodput
from campaign.analysis.recorded_config import RecordedConfig
from campaign.analysis.result import (
    Band,
    BandNotSimulated,
    CheckpointIntervals,
    CheckpointSection,
    CostFigures,
    DataSection,
    FailureRow,
    GateFigures,
    InterruptionCounts,
    MixtureRow,
    PiiRow,
    PlannedFigures,
    PowerFigures,
    RejectionRow,
    SmoothingEffect,
    SparesSection,
    WindowAnalysis,
    WindowFigures,
    WindowSpan,
)
from campaign.analysis.statistics import checkpoint_overhead, optimal_interval_s, poisson_interval
from campaign.analysis.workspace import (  # noqa: F401 - where the analysis imported them from before
    REQUIRED_TABLES,
    analysis_workspace,
    check_catalog,
    open_read_only,
)
from campaign.figures import num, when_in_window
from campaign.sim.summary import ReplicaSummary
from campaign.sql.rows import one_row, rows

if TYPE_CHECKING:  # the simulator package imports its compiled kernels: not needed to read a summary
    import pandas as pd

    from campaign.calendar.report_records import ReleasedCapacity
    from campaign.sim.summary import MeasuredRun

LOST_KEYS = goodput.LOST_KEYS
DEFINITIONS = {
    "ettr": goodput.ETTR_DEFINITION,
    "window_utilisation": goodput.UTILISATION_DEFINITION,
    "lost_cost": "GPU-hours of lost rework, restarts (detection + restart) and waiting (for a spare or planned "
    "maintenance) x the GPU-hour price; checkpoint writes are a planned cost, the idle tail is not a loss",
    "idle_spares": "spare GPUs standing by while the job held the window (insurance, not a loss of the job)",
    "idle_released": "every GPU of the allocation after the job finished early: released capacity for the cluster",
    "observed_job_mtbf_h": "job wall hours / unexpected interruptions (Llama 3 reported 54 days / 419)",
    "poisson_interval": "central 95% range of counts a Poisson process with the expected mean gives",
}


def query(name: str) -> str:
    return resources.files("campaign.analysis").joinpath(f"{name}.sql").read_text(encoding="utf-8")


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    """The documented views of views.sql, as temporary views (they work on a read-only catalog)."""
    con.execute(query("views"))


def analyse_window(
    con: duckdb.DuckDBPyConnection, where: str = "campaign.duckdb", data_dir: Path | None = None
) -> WindowAnalysis:
    """Analyse the window the newest execute run executed (`data_dir`: the workspace's data folder, for the tokens
    of rejected documents)."""
    check_catalog(con, where)
    create_views(con)
    window = one_row(
        con,
        "SELECT commitment_id, replica, seed, summary, window_start, window_end, config_digest, "
        "data_digest, config_json FROM executed_window",
    )
    commitment_id, replica = window["commitment_id"], window["replica"]
    summary = ReplicaSummary.from_json(json.loads(window["summary"]))
    config = RecordedConfig.from_json(window["config_json"])
    events = con.execute(
        "SELECT t_s, kind, category, scope, node, tokens_trained, detail FROM window_events ORDER BY event_id"
    ).df()
    power = power_figures(con, commitment_id, replica)
    figures = window_figures(summary, events, config, power)
    booked = WindowSpan(str(window["window_start"]), str(window["window_end"]), summary.window_s / 3600.0)
    measured = summary.measured
    result = WindowAnalysis(
        figures=figures,
        commitment_id=commitment_id,
        replica=replica,
        seed=window["seed"],
        window=booked,
        simulated=measured is None,
        title="Simulated window report" if measured is None else "Measured run report",
        simulation_note=simulation_note(replica, window["seed"])
        if measured is None
        else measured_note(summary),
        config_digest=window["config_digest"],
        data_digest=window["data_digest"],
        data=data_section(con, config, data_dir),
        gates=gates_section(con),
        plan_expected_ettr=figures.planned.expected_ettr,
        plan_expected_ettr_basis="the committed plan",
    )
    if measured is not None:
        # the run's own start and length; the booked window beside it (a real run need not run inside it)
        started = measured.started_at
        if started:
            result = replace(
                result,
                window=WindowSpan(
                    started,
                    _plus_seconds(started, summary.window_s),
                    summary.window_s / 3600.0,
                    {"start": booked.start, "end": booked.end},
                ),
            )
        from campaign.analysis.band import replica_band  # the simulator loads only for a measured run

        result = with_band(as_measured(result, measured), replica_band(summary, events, config))
    return with_recommendations(result)


def as_measured(result: WindowAnalysis, measured: MeasuredRun) -> WindowAnalysis:
    """The analysis of a run measured for real: its measured summary, and its interruptions split into those
    injected on purpose and the organic rest."""
    injected = measured.injected_by_category
    counts = result.figures.interruptions
    interruptions = replace(
        counts,
        injected=sum(injected.values()),
        organic=counts.unexpected - sum(injected.values()),
        injected_by_category=injected,
    )
    return replace(result, figures=replace(result.figures, interruptions=interruptions), measured=measured)


def with_band(result: WindowAnalysis, band: Band | BandNotSimulated) -> WindowAnalysis:
    """A measured run's result with its plan-against-actual band, and the one plan figure for the run as executed
    (the band's closed form at its scale, pace, checkpoints and failures): the same in the headline and in the
    table; the committed plan's stays under `planned`."""
    as_executed = next((f.plan for f in band.figures if f.figure == "ettr"), None)
    return replace(
        result,
        band=band,
        plan_expected_ettr=as_executed,
        plan_expected_ettr_basis="the plan's closed form for the run as executed"
        if as_executed is not None
        else None,
    )


def with_recommendations(result: WindowAnalysis) -> WindowAnalysis:
    """The analysis with the advice its figures support (computed again when a section it reads changed)."""
    advice = recommendations(
        result.figures,
        is_measured=result.measured is not None,
        is_simulated=result.simulated,
        smoothing_effect=result.smoothing_effect,
    )
    return replace(result, recommendations=advice)


def _plus_seconds(iso: str, seconds: float) -> str:
    """An ISO 8601 time `seconds` later, in the same form (a real run's end from its start and length)."""
    import datetime as dt

    return (dt.datetime.fromisoformat(iso) + dt.timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def simulation_note(replica: int, seed: int) -> str:
    """What the report shows, said plainly: a replica of the simulator, never a real run (its dates may be ahead)."""
    return (
        f"replica {replica} of the discrete-event simulator, seed {seed}, run over the committed window; its "
        "failures, checkpoints, tokens and power are modelled, and its dates are the booked window's, "
        "which may lie in the future"
    )


def measured_note(summary: ReplicaSummary) -> str:
    """What a measured report shows: a real run, its times measured, its failures real (some injected)."""
    m = summary.measured_run()
    if m.source:
        return (
            f"a run campaign did not launch, read from its metrics file {m.source.metrics} (incidents: "
            f"{m.source.incidents or 'none given'}), started {m.started_at}: its steps, checkpoints and "
            "restarts are measured, each restart a failure; power is not metered"
        )
    return (
        f"a real run of the trainer under campaign's supervisor, started {m.started_at}: its steps, "
        f"checkpoints, failures ({m.failures_injected} injected on purpose, {m.failures_organic} organic) "
        "and restarts are measured, with the run's own wall time as its window; power is not metered"
    )


def power_figures(con: duckdb.DuckDBPyConnection, commitment_id: str, replica: int) -> dict[str, float]:
    # The columns of power.sql, by name: peak_mw, mean_mw, min_mw, energy_mwh_sampled, max_sampled_ramp_mw_per_s,
    # n_samples.
    return one_row(con, query("power"), {"commitment_id": commitment_id, "replica": replica})


def released_early(
    summary: ReplicaSummary, config: RecordedConfig | None, gpu_hour_usd: float
) -> ReleasedCapacity:
    """The idle tail after this run's early finish with its price, by the one definition the calendar and the
    `schedule` gate use (`campaign.calendar.gaps.released_capacity`): the booking's nodes idle from the job's end,
    in whole seconds, at the GPU-hour price plus idle power. Without a whole recorded config: GPU-hours only."""
    from campaign.calendar.catalog import cluster_identity
    from campaign.calendar.gaps import Pricing, released_capacity, released_seconds

    released_s = released_seconds(float(summary.window_s), summary.completion_s)
    cluster = config.cluster if config is not None else None
    if cluster is None:  # no config, or a partial record (not one commit wrote): priced by its GPU-hours
        gpus = int(summary.gpus) + int(summary.spare_gpus)
        return released_capacity(released_s, gpus, Pricing(1, gpu_hour_usd, 0.0, 0.0))
    return released_capacity(released_s, cluster.booked_nodes, cluster_identity(cluster).pricing)


def window_figures(
    summary: ReplicaSummary,
    events: pd.DataFrame,
    config: RecordedConfig | None,
    power: dict[str, float] | None = None,
) -> WindowFigures:
    """Every figure of one window from its summary and event log (and the committed config, when recorded)."""
    gpus, spare_gpus, window_s = int(summary.gpus), int(summary.spare_gpus), float(summary.window_s)
    completion_s = summary.completion_s
    target_s = summary.target_reached_s
    wall_s = goodput.job_wall_s(window_s, completion_s)
    job_s = summary.job_time_s
    buckets = goodput.goodput_buckets_gpu_h(job_s, gpus, spare_gpus, window_s, completion_s)
    total_gpu_h = goodput.total_gpu_h(gpus, spare_gpus, window_s)
    gpu_hour_usd = goodput.gpu_hour_usd(summary.cost_usd["compute"], gpus, spare_gpus, window_s)
    released = released_early(summary, config, gpu_hour_usd)

    failures = events[events["kind"] == "failure"]
    by_category = failures.groupby("category").size().sort_values(ascending=False)
    n_unexpected = len(failures)
    n_planned = int((events["kind"] == "planned_start").sum())
    wall_h = wall_s / 3600.0
    observed_mtbf_h = wall_h / n_unexpected if n_unexpected else None
    plan = summary.plan or {}
    one_second = summary.power_mw
    power = power or {}
    checkpoint = checkpoint_section(summary, buckets, observed_mtbf_h, gpu_hour_usd)
    return WindowFigures(
        ettr=goodput.ettr(float(job_s["productive"]), wall_s),
        window_utilisation=goodput.window_utilisation(buckets["productive"], gpus, spare_gpus, window_s),
        ettr_whole_window=float(job_s["productive"]) / window_s,
        definitions=DEFINITIONS,
        gpus=gpus,
        spare_gpus=spare_gpus,
        job_wall_h=wall_h,
        planned=PlannedFigures(
            expected_ettr=plan.get("expected_ettr"),
            expected_days=plan.get("expected_days"),
            job_mtbf_h=plan.get("job_mtbf_h"),
            tokens_per_s=plan.get("tokens_per_s"),
            gpus=plan.get("gpus"),
        ),
        # Every bucket, as the simulator's summary has them: the contract's six (idle = idle_spares + idle_released)
        # and the split of idle; goodput.buckets_sum_gpu_h sums them (idle not twice) to the window's GPU-hours.
        goodput_breakdown_gpu_h={k: buckets[k] for k in goodput.ALL_KEYS},
        window_gpu_h=total_gpu_h,
        interruptions=InterruptionCounts(
            unexpected=n_unexpected,
            planned=n_planned,
            by_category={str(k): int(v) for k, v in by_category.items()},
        ),
        failures=failure_table(by_category, config, wall_h),
        observed_job_mtbf_h=observed_mtbf_h,
        planned_job_mtbf_h=plan.get("job_mtbf_h"),
        checkpoint_interval_s=CheckpointIntervals(
            used=float(summary.checkpoint_interval_s),
            optimal=summary.checkpoint_interval_optimal_s,
            optimal_for_observed_mtbf=checkpoint.optimal_for_observed_mtbf_s,
        ),
        checkpoint=checkpoint,
        spares=spares_section(events, summary, config, buckets, gpu_hour_usd),
        power_mw=PowerFigures(
            peak=one_second.get("peak", power.get("peak_mw")),
            mean=one_second.get("mean", power.get("mean_mw")),
            min=one_second.get("min", power.get("min_mw")),
            max_ramp_mw_per_s=one_second.get("max_ramp_mw_per_s", power.get("max_sampled_ramp_mw_per_s")),
            job_start_swing=one_second.get("job_start_swing"),
        ),
        energy_mwh=summary.energy_mwh,
        gpu_hour_usd=gpu_hour_usd,
        energy_usd_per_mwh=(summary.cost_usd["energy"] / summary.energy_mwh if summary.energy_mwh else 0.0),
        cost_usd=CostFigures(
            compute=summary.cost_usd["compute"],
            energy=summary.cost_usd["energy"],
            lost=goodput.lost_usd(buckets, gpu_hour_usd),
            lost_by_bucket={k: buckets[k] * gpu_hour_usd for k in LOST_KEYS},
            checkpoint=buckets["checkpoint"] * gpu_hour_usd,
            idle_spares=buckets["idle_spares"] * gpu_hour_usd,
            # The idle tail priced as the calendar prices its early-finish gap (calendar.gaps.released_capacity).
            released_early=released.cost_usd,
        ),
        released_early_h=released.hours,
        released_early=released,
        tokens_trained=summary.tokens_trained,
        tokens_target=summary.tokens_target,
        completed=bool(summary.completed),
        completion_days=completion_s / 86400.0 if completion_s else None,
        # When the committed tokens reached the target (a snapshot window trains on past it; never "completes").
        target_days=target_s / 86400.0 if target_s is not None else None,
        window_days=window_s / 86400.0,
        smoothing=config.power_smoothing if config is not None else None,
    )


def failure_table(by_category: pd.Series, config: RecordedConfig | None, wall_h: float) -> list[FailureRow]:
    """Per category: observed count, the count the config's rate expected over the job's wall time, and the
    central 95% Poisson range of that expectation (observed outside it: the profile and the window disagree)."""
    observed = {str(k): int(v) for k, v in by_category.items()}
    expected: dict[str, float] = {}
    if config is not None:
        gpus_per_node, nodes = config.gpus_per_node or 0, config.nodes or 0
        for f in config.failure_rates:
            if f.per_gpu_year is not None:
                job_per_h = f.per_gpu_year * gpus_per_node * nodes / (365.0 * 24.0)
            elif f.per_job_hour is not None:
                job_per_h = f.per_job_hour
            else:
                job_per_h = (f.per_1k_node_days or 0.0) / 1000.0 / 24.0 * nodes
            expected[f.name] = job_per_h * wall_h
    rows = []
    for name in sorted(set(observed) | set(expected), key=lambda n: (-expected.get(n, 0.0), n)):
        mean = expected.get(name)
        interval = poisson_interval(mean) if mean is not None else None
        n = observed.get(name, 0)
        rows.append(
            FailureRow(
                category=name,
                observed=n,
                expected=mean,
                interval_lo=interval[0] if interval else None,
                interval_hi=interval[1] if interval else None,
                is_within=None if interval is None else bool(interval[0] <= n <= interval[1]),
            )
        )
    return rows


def checkpoint_section(
    summary: ReplicaSummary, buckets: dict[str, float], observed_mtbf_h: float | None, gpu_hour_usd: float
) -> CheckpointSection:
    """The interval used against Daly's optimum for the MTBF the window showed, and what the difference cost."""
    used = float(summary.checkpoint_interval_s)
    ckpt = (summary.plan or {}).get("checkpoint") or {}
    # A measured run's own checkpoint write time, not the plan's (the plan is the full-scale job).
    write_s = (summary.measured.checkpoint_write_s if summary.measured else None) or ckpt.get("write_s")
    gpus = int(summary.gpus)
    n_fail = summary.interruptions.unexpected
    out = CheckpointSection(used_s=used, write_s=write_s, n_checkpoints=summary.n_checkpoints)
    if not write_s or not used > 0 or observed_mtbf_h is None or n_fail == 0:
        return out
    mtbf_s = observed_mtbf_h * 3600.0
    restart_s = buckets["restart"] * 3600.0 / gpus / n_fail
    best = optimal_interval_s(write_s, mtbf_s)
    productive_s = float(summary.job_time_s["productive"])
    extra_s = productive_s * (
        checkpoint_overhead(used, write_s, restart_s, mtbf_s)
        - checkpoint_overhead(best, write_s, restart_s, mtbf_s)
    )
    return replace(
        out,
        optimal_for_observed_mtbf_s=best,
        mean_restart_s=restart_s,
        extra_gpu_h=max(extra_s, 0.0) * gpus / 3600.0,
        extra_cost_usd=max(extra_s, 0.0) * gpus / 3600.0 * gpu_hour_usd,
    )


def spares_section(
    events: pd.DataFrame,
    summary: ReplicaSummary,
    config: RecordedConfig | None,
    buckets: dict[str, float],
    gpu_hour_usd: float,
) -> SparesSection:
    """Did the spare pool run out, for how long, and would more spare nodes have paid for themselves?"""
    waits = events[events["kind"] == "waiting_start"]["detail"].fillna("")
    short = [int(d.split("slots_without_node=")[1].split()[0]) for d in waits if "slots_without_node=" in d]
    gpus_per_node = config.gpus_per_node if config is not None else None
    spare_nodes = summary.spare_gpus // gpus_per_node if gpus_per_node else None
    n_exhausted = int((events["kind"] == "spares_exhausted").sum())
    more = max(short) if short else 0
    window_h = float(summary.window_s) / 3600.0
    wait_spare_s = _spans_s(events, "waiting_start", "waiting_end")
    wait_spare_gpu_h = wait_spare_s * int(summary.gpus) / 3600.0
    cost_more = more * gpus_per_node * window_h * gpu_hour_usd if gpus_per_node else None
    saving = wait_spare_gpu_h * gpu_hour_usd
    return SparesSection(
        spare_nodes=spare_nodes,
        n_exhausted=n_exhausted,
        n_waits=len(waits),
        waiting_for_spare_h=wait_spare_s / 3600.0,
        waiting_for_spare_gpu_h=wait_spare_gpu_h,
        more_spare_nodes_needed=more,
        cost_of_more_usd=cost_more,
        saving_usd=saving,
        would_pay=bool(cost_more is not None and more > 0 and saving > cost_more),
    )


def _spans_s(events: pd.DataFrame, start: str, end: str) -> float:
    """Seconds inside (start, end) spans; a span still open at the window's end closes there."""
    sub = events[events["kind"].isin((start, end, "window_end"))]
    total, opened = 0.0, None
    for t, kind in zip(sub["t_s"].tolist(), sub["kind"].tolist(), strict=True):
        if kind == start and opened is None:
            opened = t
        elif kind != start and opened is not None:
            total += t - opened
            opened = None
    return total


def data_section(
    con: duckdb.DuckDBPyConnection, config: RecordedConfig | None = None, data_dir: Path | None = None
) -> DataSection:
    """Kept documents and tokens per source with the achieved token share against the planned one (the committed
    config's source weights, normalised), and rejected documents by reason."""
    mixture = con.execute(
        "SELECT source, n_input, n_documents, n_rejected, n_tokens, token_share FROM data_mixture"
    ).df()
    weights = config.source_weights if config is not None else {}
    total = sum(weights.values())
    mixture["planned_share"] = [
        weights[s] / total if total and s in weights else None for s in mixture["source"]
    ]
    rejections = con.execute(
        "SELECT reason, CAST(sum(n_documents) AS BIGINT) AS n_documents FROM rejections_by_reason "
        "GROUP BY reason ORDER BY n_documents DESC, reason"
    ).df()
    tokens = rejected_tokens_by_reason(data_dir, config.tokenizer if config is not None else None)
    rejections["n_tokens"] = [tokens.get(r) for r in rejections["reason"]] if tokens else None
    # The rows as DuckDB gave them (the values unconverted, so analysis.json keeps their exact figures).
    return DataSection(
        mixture=[
            MixtureRow(
                source=m["source"],
                n_input=m["n_input"],
                n_documents=m["n_documents"],
                n_rejected=m["n_rejected"],
                n_tokens=m["n_tokens"],
                token_share=m["token_share"],
                planned_share=m["planned_share"],
            )
            for m in mixture.to_dict("records")
        ],
        rejections=[
            RejectionRow(reason=x["reason"], n_documents=x["n_documents"], n_tokens=x["n_tokens"])
            for x in rejections.to_dict("records")
        ],
        pii=pii_by_source(data_dir),
    )


def pii_by_source(data_dir: Path | None) -> list[PiiRow]:
    """PII replacements in the kept text per source and kind, from the prepare manifest ([] when none)."""
    try:
        manifest = json.loads((Path(data_dir) / "manifest.json").read_text()) if data_dir is not None else {}
    except (OSError, ValueError):
        return []
    return [
        PiiRow(source=s["name"], kind=kind, n_replaced=int(n))
        for s in manifest.get("sources", [])
        for kind, n in (s.get("pii_by_kind") or {}).items()
    ]


def rejected_tokens_by_reason(data_dir: Path | None, tokenizer: str | None) -> dict[str, int]:
    """Tokens of the rejected documents per reason, counted with the campaign's tokenizer ({} if not available)."""
    files = sorted((data_dir / "rejected").glob("*.parquet")) if data_dir is not None else []
    if not files or not tokenizer:
        return {}
    import pyarrow as pa
    import pyarrow.parquet as pq

    from campaign.data.tokenizer import load_tokenizer

    # pyarrow, not DuckDB's read_parquet: DuckDB expands '[', '*' and '?' in a path, and a workspace may have them
    tables = [pq.read_table(f, columns=["reason", "text"]) for f in files]
    frame = pa.concat_tables(tables).to_pandas()
    if frame.empty:
        return {}
    frame["text"] = frame["text"].fillna("")
    frame["n_tokens"] = load_tokenizer(tokenizer).count_many(frame["text"].tolist())
    return {str(k): int(v) for k, v in frame.groupby("reason")["n_tokens"].sum().items()}


def gates_section(con: duckdb.DuckDBPyConnection) -> list[GateFigures]:
    return [
        GateFigures(
            gate=r["gate"],
            passed=bool(r["passed"]),
            summary=r["summary"] or "",
            details=json.loads(r["details"] or "{}"),
            run_id=r["run_id"],
        )
        for r in rows(con, "SELECT gate, passed, summary, details, run_id FROM gate_figures")
    ]


def recommendations(
    r: WindowFigures,
    is_measured: bool = False,
    is_simulated: bool = True,
    smoothing_effect: SmoothingEffect | None = None,
) -> list[dict[str, str]]:
    """Advice computed from the figures, each with the figure that supports it (`is_measured`: a real run with its
    measured summary; `is_simulated` false: its power was not metered)."""
    out = []
    ck = r.checkpoint
    plan_gpus = r.planned.gpus
    if ck.optimal_for_observed_mtbf_s and is_measured and plan_gpus and plan_gpus != r.gpus:
        # A run of another size says nothing about the committed plan's interval: its MTBF scales with the GPUs.
        out.append(
            {
                "topic": "checkpoint interval",
                "advice": f"no change to the committed {plan_gpus:,}-GPU plan from this {r.gpus:,}-GPU run: its "
                f"optimum ({num(ck.optimal_for_observed_mtbf_s, 0)} s) holds for runs of its own size; a "
                "recommendation for the plan takes a run at the plan's scale, or the failure rates fitted from an "
                "incident log (`campaign failures fit`) with plan.checkpoint.interval_s: auto",
                "figure": f"observed MTBF {num(r.observed_job_mtbf_h, 2)} h on {r.gpus:,} GPUs; used "
                f"{num(ck.used_s, 0)} s",
            }
        )
    elif ck.optimal_for_observed_mtbf_s:
        best, used = ck.optimal_for_observed_mtbf_s, ck.used_s
        # Worth changing when the difference cost more than 0.1% of the window's GPU-hours.
        if (ck.extra_gpu_h or 0.0) > 1e-3 * r.window_gpu_h:
            out.append(
                {
                    "topic": "checkpoint interval",
                    "advice": f"set plan.checkpoint.interval_s to about {num(best, 0)} s (used {num(used, 0)} s)",
                    "figure": f"at the observed MTBF of {num(r.observed_job_mtbf_h, 2)} h the used interval cost "
                    f"{num(ck.extra_gpu_h, 1)} GPU-h (${num(ck.extra_cost_usd, 0)}) more than Daly's "
                    "optimum",
                }
            )
        else:
            out.append(
                {
                    "topic": "checkpoint interval",
                    "advice": "keep the interval: it is close enough to the optimum",
                    "figure": f"used {num(used, 0)} s, optimum {num(best, 0)} s for the observed MTBF of "
                    f"{num(r.observed_job_mtbf_h, 2)} h; the difference cost {num(ck.extra_gpu_h, 1)} "
                    f"GPU-h (${num(ck.extra_cost_usd, 0)}), under 0.1% of the window",
                }
            )
    sp = r.spares
    if sp.n_waits:
        verdict = "would have paid" if sp.would_pay else "would not have paid"
        out.append(
            {
                "topic": "spares",
                "advice": f"the spare pool ran out {sp.n_waits} time(s); {sp.more_spare_nodes_needed} more "
                f"spare node(s) {verdict}",
                "figure": f"{num(sp.waiting_for_spare_gpu_h, 0)} GPU-h waiting (${num(sp.saving_usd, 0)}) "
                f"against ${num(sp.cost_of_more_usd or 0, 0)} for the extra spares over the window",
            }
        )
    else:
        out.append(
            {
                "topic": "spares",
                "advice": "spares never ran out",
                "figure": f"{r.spare_gpus:,} spare GPUs idle for {num(r.goodput_breakdown_gpu_h['idle_spares'], 0)}"
                f" GPU-h (${num(r.cost_usd.idle_spares, 0)}) as insurance",
            }
        )
    p = r.power_mw
    effect = smoothing_effect
    if effect:
        extra_usd = effect.extra_energy_mwh * r.energy_usd_per_mwh
        ramp, done = effect.max_ramp_mw_per_s, effect.completion_days
        if done.with_ is not None and done.without is not None:
            slower = f"finished {num((done.with_ - done.without) * 24, 2)} h later"
        else:
            slower = (
                f"trained {num((effect.tokens_trained.without - effect.tokens_trained.with_) / 1e9, 1)} B"
                " fewer tokens"
            )
        out.append(
            {
                "topic": "power smoothing",
                "advice": f"smoothing cost {num(effect.extra_energy_mwh, 2)} MWh (${num(extra_usd, 0)}) of energy "
                f"and {slower}",
                "figure": f"it cut the steepest 1-s ramp from {num(ramp.without, 3)} to {num(ramp.with_, 3)} MW/s "
                "(the same window, same failures, simulated without it)",
            }
        )
    elif p.max_ramp_mw_per_s is not None and is_simulated:  # a measured run's power is not metered
        out.append(
            {
                "topic": "power smoothing",
                "advice": "no smoothing: the facility saw the full swing at every stop and start",
                "figure": f"job-start swing {num(p.job_start_swing or 0, 2)} MW, largest 1-s ramp "
                f"{num(p.max_ramp_mw_per_s, 2)} MW/s",
            }
        )
    if r.completed and r.completion_days is not None:
        spare_days = r.window_days - r.completion_days
        out.append(
            {
                "topic": "window length",
                "advice": f"the window was {num(spare_days, 2)} days longer than needed"
                if spare_days > 0.1 * r.window_days
                else "the window length fitted the job",
                "figure": f"finished {when_in_window(r.completion_days, r.window_days)}; "
                f"{num(r.released_early_h, 1)} h released early (${num(r.cost_usd.released_early, 2)})",
            }
        )
    elif r.tokens_trained > r.tokens_target:
        # sim.stop_at_target: false: the window is a snapshot of a longer run and trains to its end
        out.append(
            {
                "topic": "window length",
                "advice": "the job trained past its target to the window's end (the "
                "window is a snapshot of a longer run)",
                "figure": (
                    f"target reached {when_in_window(r.target_days, r.window_days)}; "
                    if r.target_days is not None
                    else ""
                )
                + f"{r.tokens_trained:.4g} tokens trained, "
                f"{r.tokens_trained / r.tokens_target:.0%} of the {r.tokens_target:.4g} target",
            }
        )
    else:
        rate = r.tokens_trained / max(r.job_wall_h, 1e-9)
        more_days = (r.tokens_target - r.tokens_trained) / rate / 24.0 if rate > 0 else float("inf")
        out.append(
            {
                "topic": "window length",
                "advice": f"the window was too short: about {num(more_days, 1)} more days at the achieved rate",
                "figure": f"{r.tokens_trained:.4g} of {r.tokens_target:.4g} tokens trained",
            }
        )
    return out


def series(con: duckdb.DuckDBPyConnection, name: str, commitment_id: str, replica: int) -> Any:
    """A plot series as a pandas DataFrame (power_series, tokens_over_time)."""
    return con.execute(query(name), {"commitment_id": commitment_id, "replica": replica}).df()

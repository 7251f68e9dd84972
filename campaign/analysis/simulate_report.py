"""The report of a `campaign simulate` run: the distributions over replicas of the completion day, ETTR and
interruptions, and the probability of finishing inside the window with its uncertainty, as a self-contained HTML
page (inline SVG) and a Markdown summary (SVG data URIs, for the Prefect artifact).

The per-replica values travel in the simulate result as `replica_values` (up to `MAX_REPLICA_VALUES` replicas), so
`campaign analyse --compare` of saved simulate JSON files can set the distributions side by side.
Source: Wilson (1927), "Probable inference, the law of succession, and statistical inference", JASA 22(158), for
the score interval of P(finish inside the window) from n replicas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from campaign.analysis.report import css, environment, svg_data_uri
from campaign.analysis.simulate_run import ReplicaValues, SimulateRun, SimulateSummary, window_length_advice
from campaign.records import JsonRecord
from campaign.sim.summary import COMPLETION_DAYS_LABEL, TARGET_DAYS_LABEL
from campaign.window_verdict import DAY_S, window_sufficiency

if TYPE_CHECKING:
    from campaign.analysis.plots import Figure
    from campaign.sim.summary import ReplicaSummary

# Above this many replicas the result carries percentiles only: ten numbers a replica would make the printed JSON
# tens of megabytes, and a histogram of 100,000 draws already shows the shape.
MAX_REPLICA_VALUES = 100_000


@dataclass(frozen=True, slots=True)
class FinishProbability(JsonRecord):
    """P(reaching the target inside the window) over the replicas, with its 95% Wilson interval and the days by
    which 50% and 90% of all replicas had reached it (None: fewer than that ever did)."""

    replicas: int
    finished: int
    p: float
    interval_lo: float
    interval_hi: float
    day_50pct: float | None
    day_90pct: float | None


@dataclass(frozen=True, slots=True)
class SimulateFacts:
    """What the simulate report found besides its pages: P(finish) (None without replica values) and the window
    length advice."""

    finish: FinishProbability | None
    window_length: str | None


@dataclass(frozen=True, slots=True)
class PercentileRow:
    """One row of the report's percentile table, scaled to its unit."""

    label: str
    unit: str
    digits: int
    mean: float | None
    p10: float | None
    p50: float | None
    p90: float | None


def replica_values(summaries: Sequence[ReplicaSummary]) -> ReplicaValues | None:
    """Each replica's figures as lists in replica order (`completion_days` None where a replica did not finish), or
    None above MAX_REPLICA_VALUES replicas."""
    if len(summaries) > MAX_REPLICA_VALUES:
        return None
    return ReplicaValues(
        ettr=[float(s.ettr) for s in summaries],
        window_utilisation=[float(s.window_utilisation) for s in summaries],
        completion_days=[c / DAY_S if (c := s.completion_s) is not None else None for s in summaries],
        target_days=[t / DAY_S if (t := s.target_reached_s) is not None else None for s in summaries],
        interruptions_unexpected=[int(s.interruptions.unexpected) for s in summaries],
        interruptions_planned=[int(s.interruptions.planned) for s in summaries],
        tokens_trained=[float(s.tokens_trained) for s in summaries],
    )


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of a proportion from `successes` out of `n` trials."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes} of {n}")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def finish_probability(values: ReplicaValues, window_days: float) -> FinishProbability:
    """P(reaching the target inside the window) from the replicas, with its 95% Wilson interval and the days by
    which 50% and 90% of all replicas (those that never reach it counted as never) have reached it. For a window
    that stops at the target this is P(finish); a snapshot window never finishes but does reach its target.
    Results saved before target days existed fall back to the completion days."""
    days = values.target_or_completion_days()
    # The schedule gate's rule (campaign.window_verdict), on the same seconds the summary judged.
    judged = window_sufficiency(
        [None if d is None else d * DAY_S for d in days], window_days * DAY_S, trains_through=False
    )
    lo, hi = wilson_interval(judged.reached, judged.replicas)
    return FinishProbability(
        replicas=judged.replicas,
        finished=judged.reached,
        p=judged.p_target_in_window,
        interval_lo=lo,
        interval_hi=hi,
        day_50pct=judged.p50_target_days,
        day_90pct=judged.p90_target_days,
    )


def completion_interval(summaries: Sequence[ReplicaSummary]) -> list[float]:
    """The 95% Wilson interval of P(finish inside the window): of completing, not of reaching the target (a
    snapshot window reaches its target but never completes)."""
    lo, hi = wilson_interval(sum(1 for s in summaries if s.completed), len(summaries))
    return [lo, hi]


def simulate_figures(values: ReplicaValues, window_days: float) -> dict[str, Figure]:
    from campaign.analysis import plots  # matplotlib loads only when a report is drawn

    return {
        "completion": plots.completion_distribution(values.target_or_completion_days(), window_days),
        "ettr": plots.distribution(values.ettr, "ETTR over replicas", "ETTR (productive / job wall time)"),
        "interruptions": plots.interruption_distribution(
            values.interruptions_unexpected, values.interruptions_planned
        ),
    }


def render_simulate_report(
    result: SimulateRun, name: str, values: ReplicaValues | None
) -> tuple[str, str, SimulateFacts]:
    """HTML, Markdown and the figures' facts (P(finish) with its interval) of one simulate result."""
    window_days = result.summary.window_days
    if window_days is None:
        raise ValueError("a simulate result's summary carries its window_days")
    finish = finish_probability(values, window_days) if values else None
    figures = simulate_figures(values, window_days) if values else {}
    advice = window_length_advice(result)
    context = {  # the pages show the result's every figure as it was written
        "s": result.data["summary"],
        "res": result.data,
        "name": name,
        "finish": finish,
        "advice": advice,
        "rows": percentile_rows(result.summary),
        "max_values": MAX_REPLICA_VALUES,
    }
    env = environment()
    html = env.get_template("simulate.html.j2").render(
        **context, css=css(), figures={k: f.svg for k, f in figures.items()}
    )
    markdown = env.get_template("simulate.md.j2").render(
        **context, images={k: svg_data_uri(f.svg) for k, f in figures.items()}
    )
    return html, markdown, SimulateFacts(finish, advice)


def percentile_rows(summary: SimulateSummary) -> list[PercentileRow]:
    rows = []
    for spread, label, unit, scale, digits in (
        (summary.target_days, TARGET_DAYS_LABEL, "d", 1.0, 2),
        (summary.completion_days, COMPLETION_DAYS_LABEL, "d", 1.0, 2),
        (summary.ettr, "ETTR while the job ran", "", 1.0, 3),
        (summary.window_utilisation, "window utilisation", "", 1.0, 3),
        (summary.interruptions_unexpected, "unexpected interruptions", "", 1.0, 1),
        (summary.interruptions_planned, "planned interruptions", "", 1.0, 1),
        (summary.tokens_trained, "tokens trained", "B", 1e9, 1),
        (summary.observed_job_mtbf_h, "observed job MTBF", "h", 1.0, 2),
    ):
        if spread is not None:
            rows.append(
                PercentileRow(
                    label,
                    unit,
                    digits,
                    *(
                        None if v is None else v / scale
                        for v in (spread.mean, spread.p10, spread.p50, spread.p90)
                    ),
                )
            )
    return rows


def report_stem(result: SimulateRun) -> str:
    """The file name of a simulate run's report: config digest, seed and replica count (a rerun replaces its own)."""
    return f"{str(result.config_digest or 'config')[:12]}-seed{result.seed}-{result.replicas}"

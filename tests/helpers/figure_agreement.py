"""Every figure of one executed run, read from each output that shows it, compared with the run's analysis.json.

The outputs are the command's text, `campaign analyse --json`, report.md and report.html, the Prefect artifacts and
the gate messages. A figure shown rounded must read as the analysis figure rounded the same way (to the last digit
shown); a figure a JSON output carries must be the same number. `disagreements` returns one line per figure that
reads differently somewhere (empty when every output agrees), so a failing test names the figure and the outputs.
"""

import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Shown:
    """Where one output shows a figure: `pattern` has one group, the figure as printed (commas allowed)."""

    output: str
    pattern: str


@dataclass(frozen=True)
class Figure:
    name: str
    value: Callable[[dict[str, Any]], float]  # from analysis.json
    decimals: int
    shown: tuple[Shown, ...]
    scale: float = 1.0  # 100 for a percentage, 1e-9 for billions


def html_text(page: str) -> str:
    """The text a reader sees in an HTML page: no figures' SVG, no styles, tags as spaces, whitespace folded."""
    page = re.sub(r"<(svg|style|script)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


NUM = r"(-?[\d,]+(?:\.\d+)?)"

FIGURES = (
    Figure(
        "ETTR while the job ran",
        lambda a: a["ettr"],
        3,
        (
            Shown("cli", rf"campaign done: ETTR {NUM}"),
            Shown("report.md", rf"\*\*ETTR while the job ran\*\* \| \*\*{NUM}\*\*"),
            Shown("report.html", rf"{NUM} ETTR while the job ran"),
            Shown("campaign-report artifact", rf"\*\*ETTR while the job ran\*\* \| \*\*{NUM}\*\*"),
            Shown("campaign-summary artifact", rf"\* ETTR {NUM}"),
            Shown("execute-summary artifact", rf"ETTR \*\*{NUM}\*\*"),
        ),
    ),
    Figure(
        "window utilisation",
        lambda a: a["window_utilisation"],
        3,
        (Shown("campaign-summary artifact", rf"window utilisation {NUM}"),),
    ),
    Figure(
        "window utilisation (percent)",
        lambda a: a["window_utilisation"],
        1,
        (
            Shown("report.md", rf"\| window utilisation \| {NUM}%"),
            Shown("report.html", rf"{NUM}% Window utilisation"),
        ),
        scale=100,
    ),
    Figure(
        "tokens trained (B)",
        lambda a: a["tokens_trained"],
        1,
        (
            Shown("cli", rf"{NUM} B of [\d,.]+ B tokens trained"),
            Shown("report.md", rf"\| tokens trained \| {NUM} B of"),
            Shown("report.html", rf"{NUM} B Tokens trained"),
            Shown("campaign-summary artifact", rf"\* {NUM} B of [\d,.]+ B tokens trained"),
            Shown("execute-summary artifact", rf"tokens trained {NUM} B of"),
        ),
        scale=1e-9,
    ),
    Figure(
        "tokens target (B)",
        lambda a: a["tokens_target"],
        1,
        (
            Shown("cli", rf"[\d,.]+ B of {NUM} B tokens trained"),
            Shown("report.md", rf"\| tokens trained \| [\d,.]+ B of {NUM} B"),
            Shown("report.html", rf"Tokens trained of {NUM} B target"),
            Shown("campaign-summary artifact", rf"\* [\d,.]+ B of {NUM} B tokens trained"),
            Shown("execute-summary artifact", rf"tokens trained [\d,.]+ B of {NUM} B"),
        ),
        scale=1e-9,
    ),
    Figure(
        "unexpected interruptions",
        lambda a: a["interruptions"]["unexpected"],
        0,
        (
            Shown("cli", rf"{NUM} unexpected interruptions"),
            Shown("report.md", rf"\| unexpected interruptions \| {NUM} \(planned"),
            Shown("report.html", rf"all unexpected {NUM}"),
            Shown("campaign-summary artifact", rf"; {NUM} unexpected interruptions"),
            Shown("execute-summary artifact", rf"unexpected interruptions {NUM},"),
        ),
    ),
    Figure(
        "planned interruptions",
        lambda a: a["interruptions"]["planned"],
        0,
        (
            Shown("report.md", rf"\(planned {NUM}\)"),
            Shown("report.html", rf"planned maintenance {NUM}"),
            Shown("execute-summary artifact", rf"planned {NUM}"),
        ),
    ),
    Figure(
        "lost to failures (USD)",
        lambda a: a["cost_usd"]["lost"],
        0,
        (
            Shown("report.md", rf"\| lost to failures \| \${NUM}"),
            Shown("report.html", rf"\${NUM} Lost to failures"),
            Shown("campaign-summary artifact", rf"lost to failures \${NUM}"),
        ),
    ),
    Figure(
        "finished on day",
        lambda a: a["completion_days"],
        2,
        (
            Shown("report.md", rf"finished on day {NUM} of"),
            Shown("report.html", rf"finished on day {NUM} of"),
            Shown("report.md recommendations", rf"\(finished on day {NUM} of"),
        ),
    ),
    Figure(
        "released early (h)",
        lambda a: a["released_early_h"],
        1,
        (
            Shown("report.md", rf"\| released early \| {NUM} h"),
            Shown("report.html", rf"{NUM} h Released early"),
            Shown("report.md recommendations", rf"; {NUM} h released early"),
        ),
    ),
    Figure(
        "released early (USD)",
        lambda a: a["cost_usd"]["released_early"],
        2,
        (
            Shown("report.md", rf"\| released early \| [\d,.]+ h \(\${NUM}\)"),
            Shown("report.html", rf"\(\${NUM} of capacity back to the cluster"),
            Shown("report.md recommendations", rf"h released early \(\${NUM}\)"),
        ),
    ),
    Figure(
        "released early (GPU-hours)",
        lambda a: a["goodput_breakdown_gpu_h"]["idle_released"],
        1,
        (
            Shown("goodput artifact", rf'"released early", "gpu_h": {NUM}'),
            Shown("report.md", rf"\| released early \| {NUM} \| [\d.]+% \|"),
            Shown("report.html", rf"released early {NUM} [\d.]+% "),
        ),
    ),
    Figure(
        "productive training (GPU-hours)",
        lambda a: a["goodput_breakdown_gpu_h"]["productive"],
        1,
        (
            Shown("goodput artifact", rf'"productive training", "gpu_h": {NUM}'),
            Shown("report.md", rf"\| productive training \| {NUM} \|"),
            Shown("report.html", rf"productive training {NUM} "),
        ),
    ),
    Figure(
        "observed job MTBF (h)",
        lambda a: a["observed_job_mtbf_h"],
        2,
        (
            Shown("report.md", rf"observed job MTBF {NUM} h"),
            Shown("report.html", rf"Observed job MTBF {NUM} h"),
            Shown("report.md recommendations", rf"observed MTBF of {NUM} h"),
        ),
    ),
    Figure(
        "plan's expected ETTR",
        lambda a: a["planned"]["expected_ettr"],
        3,
        (
            Shown("report.md", rf"\(plan expected {NUM}\)"),
            Shown("report.html", rf"end; plan expected {NUM}"),
            Shown("gate message", rf"expected [\d.]+ days at ETTR {NUM}"),
            Shown("gates-detail artifact", rf"days expected \(ETTR {NUM}\)"),
        ),
    ),
    Figure(
        "plan's expected days",
        lambda a: a["planned"]["expected_days"],
        2,
        (
            Shown("gate message", rf"expected {NUM} days at ETTR"),
            Shown("gates-detail artifact", rf"\| {NUM} days expected \(ETTR"),
        ),
    ),
)


def _reads(text: str, pattern: str) -> list[str]:
    return re.findall(pattern, text)


def disagreements(
    outputs: dict[str, str], analysis: dict[str, Any], analyse_json: dict[str, Any], schedule: dict[str, Any]
) -> list[str]:
    """One line per figure an output shows differently from analysis.json (or does not show where it should);
    `schedule` is the schedule gate's record in the catalog (its details, with its message as `summary`)."""
    problems = []
    for figure in FIGURES:
        expected = f"{figure.value(analysis) * figure.scale:,.{figure.decimals}f}".replace(",", "")
        for shown in figure.shown:
            found = [v.replace(",", "") for v in _reads(outputs[shown.output], shown.pattern)]
            if not found:
                problems.append(f"{figure.name}: not found in {shown.output} ({shown.pattern})")
            elif any(v != expected for v in found):
                problems.append(f"{figure.name}: {shown.output} shows {found}, analysis.json {expected}")
    # The JSON outputs carry the same numbers, not just the same rounding.
    for key, value in analysis.items():
        if key in analyse_json and key not in ("report", "report_html") and analyse_json[key] != value:
            problems.append(f"{key}: analyse --json {analyse_json[key]!r}, analysis.json {value!r}")
    problems += _gate_problems(outputs, analysis, schedule)
    problems += _identity_problems(outputs, analysis)
    return problems


def _gate_problems(outputs: dict[str, str], analysis: dict[str, Any], schedule: dict[str, Any]) -> list[str]:
    """The schedule gate's message says the figures its record holds; analysis.json carries the same record."""
    length = schedule["window_length"]
    message = outputs["gate message"]
    problems = []
    reported = next(g for g in analysis["gates"] if g["gate"] == "schedule")
    if reported["details"] != schedule:
        problems.append("schedule gate: analysis.json's record differs from the catalog's")
    checks = (
        ("P(target in window)", rf"P\(target in window\) {NUM}%", length["p_target_in_window"] * 100, 0),
        (
            "p90 day the target is reached",
            rf"between the p90 \({NUM} days\)",
            length["p90_completion_days"],
            2,
        ),
        (
            "expected idle tail (USD)",
            rf"early finish [\d.]+ h \(\${NUM},",
            length["expected_idle_tail_cost_usd"],
            2,
        ),
        ("expected idle tail (h)", rf"early finish {NUM} h", length["expected_idle_tail_h"], 1),
        ("replicas", rf"% of {NUM} replicas", length["replicas"], 0),
    )
    for name, pattern, value, decimals in checks:
        found = _reads(message, pattern)
        expected = f"{value:,.{decimals}f}"
        if found != [expected] and not (found and set(found) == {expected}):
            problems.append(f"schedule gate {name}: message shows {found}, its record {expected}")
    return problems


def _identity_problems(outputs: dict[str, str], analysis: dict[str, Any]) -> list[str]:
    """The config and data digests each output names are the run's (the first 12 characters where shortened)."""
    config, data = analysis["config_digest"][:12], analysis["data_digest"][:12]
    problems = []
    for output in ("report.md", "report.html", "gates-detail artifact", "gates artifact"):
        text = outputs[output].lower()
        configs = set(re.findall(r"config `?([0-9a-f]{12})", text))
        datas = set(re.findall(r"data `?([0-9a-f]{12})", text))
        if configs != {config} or datas != {data}:
            problems.append(
                f"digests: {output} names config {configs} data {datas}, analysis.json {config} {data}"
            )
    return problems


def outputs_of(
    cli: str, report_md: str, report_html: str, artifacts: dict[str, Any], gate_message: str
) -> dict[str, str]:
    """The texts `disagreements` reads, by output name; `artifacts` maps an artifact kind (campaign-report,
    campaign-summary, execute-summary, goodput, gates-detail, gates) to its data and description."""

    def text(kind: str) -> str:
        data = artifacts[kind]["data"]
        body = data if isinstance(data, str) else json.dumps(data)
        return f"{artifacts[kind].get('description') or ''}\n{body}"

    recommendations = report_md.split("## Recommendations", 1)[-1].split("\n## ", 1)[0]
    return {
        "cli": cli,
        "report.md": report_md,
        "report.md recommendations": recommendations,
        "report.html": html_text(report_html),
        "campaign-report artifact": text("campaign-report"),
        "campaign-summary artifact": text("campaign-summary"),
        "execute-summary artifact": text("execute-summary"),
        "goodput artifact": text("goodput"),
        "gates-detail artifact": text("gates-detail"),
        "gates artifact": text("gates"),
        "gate message": gate_message,
    }


# ---- What-if surfaces: `campaign simulate` (text, --json, its artifacts, its report) and `campaign plan` ----------


def _g4(v: Any) -> str:  # the command's distributions
    return "n/a" if v is None else f"{v:.4g}"


def _m4(v: Any) -> str:  # the simulate artifact's table
    return "n/a" if v is None else (f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.4e}")


def _html(digits: int) -> Callable[[Any], str]:  # the report's `num` filter
    def fmt(v: Any) -> str:
        from campaign.figures import num

        return num(v, digits)

    return fmt


MONEY = r"(\d(?:[\d,]*\d)?)"  # a dollar figure with separators, without a sentence's comma after it


def _money(v: Any) -> str:
    return f"{v:,.0f}"


VERDICT_WORDS = {
    "cli": {"suffices": "ok", "is too short": "too_short"},
    "plan": {
        "fits the window": "ok",
        "the window is too short": "too_short",
        "the window is too long": "too_long",
    },
    "report": {"fits": "ok", "too short": "too_short", "longer than needed": "too_long"},
}


@dataclass(frozen=True)
class Reads:
    """Where an output shows a figure: `pattern` has one group, read as `fmt` writes the figure."""

    output: str
    pattern: str
    fmt: Callable[[Any], str]


def _dist_reads(key: str, label: str, html_digits: int, unit: str = "") -> list[tuple[str, Reads]]:
    """Each statistic of one distribution as the command, the artifact's table and the report's table show it."""
    unit_re = rf" {unit}" if unit else ""
    out = []
    for i, stat in enumerate(("mean", "p10", "p50", "p90")):
        cells = r"(?:\S+ )" + f"{{{i}}}"
        md_cells = r"(?:[^|]+ \| )" + f"{{{i}}}"
        cli = rf"\n  {key} +mean (\S+)" if stat == "mean" else rf"\n  {key} +mean \S+ .*?{stat} (\S+)"
        out += [
            (stat, Reads("simulate text", cli, _g4)),
            (stat, Reads("simulate artifact", rf"\| {re.escape(label)} \| {md_cells}([^| ]+) \|", _m4)),
            (
                stat,
                Reads(
                    "simulate report.html", rf"{re.escape(label)}{unit_re} {cells}(\S+)", _html(html_digits)
                ),
            ),
        ]
    return out


def simulate_disagreements(
    outputs: dict[str, str], result: dict[str, Any], plan: dict[str, Any]
) -> list[str]:
    """One line per figure of a what-if run that an output shows differently from `campaign simulate --json`
    (`result`), or that `campaign plan --json` (`plan`, judged from the same replicas) states differently."""
    from campaign.goodput import LOST_KEYS
    from campaign.sim.summary import COMPLETION_DAYS_LABEL, TARGET_DAYS_LABEL
    from campaign.window_verdict import DAY_S, empirical_quantile, window_sufficiency

    s = result["summary"]
    problems: list[str] = []

    def check(name: str, value: Any, reads: Reads) -> None:
        found = re.findall(reads.pattern, outputs[reads.output])
        expected = reads.fmt(value)
        if not found:
            problems.append(f"{name}: not found in {reads.output} ({reads.pattern})")
        elif any(v != expected for v in found):
            problems.append(f"{name}: {reads.output} shows {found}, simulate --json {expected}")

    # Distributions: the command, the artifact's table, the report's table; the table artifact carries the numbers.
    dists = (
        ("ettr", "ETTR", "ETTR while the job ran", 3, ""),
        ("window_utilisation", "window utilisation", "window utilisation", 3, ""),
        ("target_days", TARGET_DAYS_LABEL, TARGET_DAYS_LABEL, 2, "d"),
        ("completion_days", COMPLETION_DAYS_LABEL, COMPLETION_DAYS_LABEL, 2, "d"),
    )
    table = {row["figure"]: row for row in json.loads(outputs["simulate-table artifact"])}
    for key, md_label, html_label, digits, unit in dists:
        for stat, reads in _dist_reads(key, md_label, digits, unit):
            if reads.output == "simulate report.html":
                reads = Reads(
                    reads.output, reads.pattern.replace(re.escape(md_label), re.escape(html_label)), reads.fmt
                )
            check(f"{key} {stat}", s[key][stat], reads)
            if table.get(md_label, {}).get(stat, "missing") != s[key][stat]:
                problems.append(
                    f"{key} {stat}: the table artifact has {table.get(md_label)}, simulate --json {s[key][stat]}"
                )
    # A narrower figure says so where it is shown.
    for output in ("simulate text", "simulate artifact", "simulate report.html"):
        for label in (TARGET_DAYS_LABEL, COMPLETION_DAYS_LABEL):
            if label not in outputs[output]:
                problems.append(f"label '{label}' missing from {output}")

    p = s["p_target_in_window"]
    for reads in (
        Reads("simulate text", r"P\(target in window\) +(\S+) \(", lambda v: f"{v:.2f}"),
        Reads("simulate artifact", r"P\(target reached in the window\): (\S+);", lambda v: f"{v:.2f}"),
        Reads(
            "simulate report.html",
            r"(\S+)% P\(target reached inside the window\)",
            lambda v: f"{v * 100:.1f}",
        ),
        Reads(
            "simulate report artifact",
            r"\*\*P\(target reached inside the window\)\*\* \| \*\*(\S+)%",
            lambda v: f"{v * 100:.1f}",
        ),
    ):
        check("P(target in window)", p, reads)
    costs = (
        (
            "lost to failures (USD)",
            s["cost_usd"]["lost"],
            ("lost to failures", "lost to failures", "lost to failures"),
        ),
        ("compute (USD)", s["cost_usd"]["compute"], ("compute", "compute", "compute")),
        ("energy cost (USD)", s["cost_usd"]["energy"], ("energy", "energy", "energy cost")),
    )
    for name, value, (cli, md, page) in costs:
        check(name, value, Reads("simulate text", rf"{cli} \$" + MONEY, _money))
        check(name, value, Reads("simulate artifact", rf"{md} \$" + MONEY, _money))
        check(name, value, Reads("simulate report.html", rf"{page} \$" + MONEY, _money))
    released = s["goodput_breakdown_gpu_h"]["idle_released"]
    one = lambda v: f"{v:,.1f}"  # noqa: E731
    check(
        "released (GPU-hours)",
        released,
        Reads("simulate text", r"released \(mean\) +([\d,.]+) GPU-hours", one),
    )
    check(
        "released (GPU-hours)",
        released,
        Reads("simulate artifact", r"released after an early finish ([\d,.]+) GPU-hours", one),
    )
    check(
        "released (GPU-hours)",
        released,
        Reads(
            "simulate report.html", r"released after an early finish \(not a loss\) ([\d,.]+) GPU-hours", one
        ),
    )

    # The one definition of lost: (lost_rework + restart + waiting) GPU-hours x the GPU-hour price.
    buckets = s["goodput_breakdown_gpu_h"]
    total = sum(buckets[k] for k in ("productive", "lost_rework", "checkpoint", "restart", "waiting", "idle"))
    price = s["cost_usd"]["compute"] / total
    lost = sum(buckets[k] for k in LOST_KEYS) * price
    if abs(s["cost_usd"]["lost"] - lost) > 1e-6 * max(1.0, lost):
        problems.append(
            f"summary.cost_usd.lost {s['cost_usd']['lost']!r} is not (lost_rework + restart + waiting) x price {lost!r}"
        )

    # The verdict: the same on every surface, and the same rule over the replicas' own values.
    verdict = s["window_length"]["verdict"]
    said = {
        "simulate text": (r"the window (suffices|is too short)(?! when)", VERDICT_WORDS["cli"]),
        "simulate artifact": (r"the window (suffices|is too short)(?! when)", VERDICT_WORDS["cli"]),
        "simulate report artifact": (
            r"Window length: (fits|too short|longer than needed)",
            VERDICT_WORDS["report"],
        ),
        "plan text": (
            r"window verdict \(.*?\): (fits the window|the window is too short|the window is too long)",
            VERDICT_WORDS["plan"],
        ),
    }
    for output, (pattern, words) in said.items():
        found = {words[w] for w in re.findall(pattern, outputs[output])}
        expected = {verdict}
        if output in ("simulate text", "simulate artifact"):  # "suffices" or "is too short"
            expected = {"too_short" if verdict == "too_short" else "ok"}
        if found != expected:
            problems.append(f"window verdict: {output} says {found}, simulate --json {verdict}")
    values = result["replica_values"]
    window_s = s["window_days"] * DAY_S
    judged = window_sufficiency(
        [None if d is None else d * DAY_S for d in values["target_days"]],
        window_s,
        s["window_length"]["trains_through"],
    )
    if judged.p_target_in_window != p or judged.verdict != verdict:
        problems.append(
            f"replica_values give P {judged.p_target_in_window} ({judged.verdict}), the summary {p} ({verdict})"
        )
    finished = [d for d in values["completion_days"] if d is not None]
    if finished and float(np.percentile(finished, 90)) != s["completion_days"]["p90"]:
        problems.append("completion_days p90 is not the p90 of the replicas that finished")
    if judged.p90_target_days != s["target_days"]["p90"] or (
        judged.p90_target_days is not None
        and judged.p90_target_days
        != empirical_quantile(
            [d if d is not None and d * DAY_S <= window_s else np.inf for d in values["target_days"]], 0.9
        )
    ):
        problems.append(
            f"target_days p90 {s['target_days']['p90']} is not the replicas' {judged.p90_target_days}"
        )
    # plan states the verdict the gate reaches from the same replicas, with the same figures.
    pv = plan.get("window_verdict")
    if not pv:
        return [*problems, "plan --json states no window verdict"]
    if pv["basis"] != "replicas":
        problems.append(f"plan's verdict rests on {pv['basis']}, not the gate's replicas")
    for key, value in (
        ("verdict", verdict),
        ("p_target_in_window", p),
        ("p90_target_days", s["window_length"]["p90_target_days"]),
        ("p99_target_days", s["window_length"]["p99_target_days"]),
    ):
        if pv[key] != value:
            problems.append(f"plan --json window_verdict.{key} {pv[key]!r}, simulate --json {value!r}")
    if (verdict == "ok") != plan["fits"] or (verdict != "ok") != any(
        v.startswith("schedule") for v in plan["violations"]
    ):
        problems.append(
            f"plan --json fits {plan['fits']} / violations {plan['violations']} against the verdict {verdict}"
        )
    return problems


def simulate_outputs(cli: str, artifacts: dict[str, Any], report_html: str, plan_text: str) -> dict[str, str]:
    """The texts `simulate_disagreements` reads; `artifacts` maps simulate, simulate-table and simulate-report to
    their data."""

    def text(kind: str) -> str:
        data = artifacts[kind]["data"]
        return data if isinstance(data, str) else json.dumps(data)

    return {
        "simulate text": cli,
        "simulate artifact": text("simulate"),
        "simulate-table artifact": text("simulate-table"),
        "simulate report artifact": text("simulate-report"),
        "simulate report.html": html_text(report_html),
        "plan text": plan_text,
    }

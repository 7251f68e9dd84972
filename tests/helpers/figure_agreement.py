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

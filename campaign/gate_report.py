"""Each gate's verdict as a person reads it: the figure it judged and the threshold it was held to, with units.

One row per gate, built from the gate results and the config (and the plan for the configuration gates); the
validate stage shows them as the per-gate run's message and as the `gates-detail` markdown table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from campaign.config import CampaignConfig
from campaign.gates import GateResult
from campaign.plan import Plan
from campaign.window_verdict import rule_threshold


@dataclass(frozen=True)
class GateRow:
    gate: str
    passed: bool
    figure: str
    threshold: str
    summary: str

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "FAIL"

    def message(self) -> str:
        """One line for a run's state message: verdict, figure against threshold, and on a failure the reason."""
        text = f"{self.gate} {self.verdict}: {self.figure} (threshold: {self.threshold})"
        return text if self.passed else f"{text}; {self.summary}"


def _num(value: Any, digits: int = 3) -> str:
    """A figure rounded for reading: 3 significant digits, thousands separated; NaN and None said as such."""
    if value is None:
        return "n/a"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) or (float(value).is_integer() and abs(value) >= 1):
        return f"{int(value):,}"
    return f"{value:,.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"


def gate_rows(results: list[GateResult], config: CampaignConfig, plan: Plan) -> list[GateRow]:
    """The figure and threshold of every gate in `results`, in their order."""
    g, c = config.gates.data, config.gates.config
    memory_limit = c.max_memory_fraction * config.cluster.accelerator.hbm_gib
    days_limit = config.window.days * (1 - c.min_window_margin)
    rows = []
    for r in results:
        d = r.details
        if r.gate == "data_identity":
            figure = (
                f"{len(d.get('files', {}))} prepared files, {len(d.get('problems', []))} differ from what "
                "prepare recorded"
            )
            threshold = "every file, input and the data: section as prepare recorded them"
        elif r.gate == "data_quality":
            figure = (
                f"{_num(d.get('n_passed'))} of {_num(d.get('n_expectations'))} expectations met on "
                f"{_num(d.get('n_rows'))} rows"
            )
            threshold = "every expectation (see the data-quality artifact for each one's bounds)"
        elif r.gate == "data_volume":
            figure = (
                f"{_num(d.get('n_documents'))} documents, {_num(d.get('n_tokens'))} tokens, "
                f"{_num(100 * d.get('rejected_fraction', float('nan')))} % rejected"
            )
            threshold = (
                f">= {_num(g.min_documents)} documents, >= {_num(g.min_tokens)} tokens, "
                f"<= {_num(100 * g.max_rejected_fraction)} % rejected"
            )
        elif r.gate == "data_mixture":
            sources = d.get("sources", {})
            name, worst = (
                max(sources.items(), key=lambda kv: (kv[1]["relative_gap"], kv[0])) if sources else ("", {})
            )
            figure = (
                f"largest relative gap {_num(worst.get('relative_gap'))} (source '{name}': "
                f"{_num(100 * worst.get('share', float('nan')))} % of tokens, planned "
                f"{_num(100 * worst.get('planned', float('nan')))} %)"
            )
            threshold = f"<= {_num(g.mixture_tolerance)} relative gap for every source"
        elif r.gate == "layout":
            lay = plan.layout
            figure = (
                f"tp={lay.get('tp')} pp={lay.get('pp')} dp={lay.get('dp')} cp={lay.get('cp')} on "
                f"{_num(plan.gpus)} GPUs"
            )
            threshold = "world size = GPUs; tp inside the NVLink domain; layers divide over pp"
        elif r.gate == "memory":
            figure = f"{_num(plan.memory_gib_per_gpu)} GiB per GPU"
            threshold = (
                f"<= {_num(memory_limit)} GiB ({_num(100 * c.max_memory_fraction)} % of "
                f"{_num(config.cluster.accelerator.hbm_gib)} GiB HBM)"
            )
        elif r.gate == "schedule":
            figure = f"{_num(plan.expected_days)} days expected (ETTR {_num(plan.expected_ettr)})"
            band = plan.step_time_range_s
            if len(band) == 2:
                figure += (
                    f"; step {_num(plan.step_time_s)} s, band {_num(band[0])}-{_num(band[1])} s "
                    f"({'calibrated' if plan.calibration else 'uncalibrated'})"
                )
            threshold = (
                f"expected days <= {_num(days_limit)} (window {_num(config.window.days)} days, margin "
                f"{_num(100 * c.min_window_margin)} %)"
            )
            length = d.get("window_length")
            if isinstance(length, dict):
                # The window-length rule the gate applied, and what it simulated to apply it.
                p90 = length.get("p90_completion_days")
                figure += (
                    f"; {length.get('simulated') or str(length.get('replicas')) + ' replicas'}: p90 day the target "
                    f"is reached {_num(p90) if p90 is not None else 'beyond the window'}, P(target in window) "
                    f"{_num(100 * length.get('p_target_in_window', float('nan')))} %"
                )
                threshold += "; and " + rule_threshold(config.window.days, bool(length.get("trains_through")))
        elif r.gate == "rehearsal":
            figure = f"loss fell by {_num(d.get('loss_drop'))}, resume check: {d.get('restore_check', 'n/a')}"
            threshold = (
                f"loss drop >= {_num(d.get('min_loss_drop'))}, held-out loss falls, no NaN, resumed run "
                "matches the uninterrupted one"
            )
        else:
            figure, threshold = r.summary, "see the summary"
        rows.append(GateRow(r.gate, r.passed, figure, threshold, r.summary))
    return rows


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def gates_markdown(
    rows: list[GateRow],
    config_digest: str,
    data_digest: str,
    campaign: str,
    links: dict[str, str] | None = None,
) -> str:
    """The `gates-detail` artifact: one markdown table row per gate, failures first in the heading."""
    failed = [r.gate for r in rows if not r.passed]
    head = (
        f"# Gates of `{campaign}`: {'all passed' if not failed else 'FAILED: ' + ', '.join(failed)}\n\n"
        f"config `{config_digest[:12]}`, gate evidence `{data_digest[:12]}`\n"
    )
    table = ["| gate | passed | figure | threshold |", "| --- | --- | --- | --- |"]
    table += [
        f"| {r.gate} | {'yes' if r.passed else '**NO**'} | {_cell(r.figure)} | {_cell(r.threshold)} |"
        for r in rows
    ]
    notes = [f"\n* **{r.gate}** failed: {_cell(r.summary)}" for r in rows if not r.passed]
    # A web address is a link; a file is named by its path (a file:// link opens nothing from the Prefect UI).
    more = [
        f"\n[{_cell(text)}]({target})"
        if target.startswith(("http://", "https://"))
        else f"\n* {text}: `{target}`"
        for text, target in (links or {}).items()
    ]
    return "\n".join([head, *table]) + "".join(notes) + ("\n" if more else "") + "".join(more) + "\n"

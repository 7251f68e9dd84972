"""Which gates stand between a campaign and its window, and whether they let it through.

Every gate is recorded against the config digest and the data digest (`campaign.evidence`) of what it read; every
validate run records a fresh verdict. Commit books the window only if the newest validate run for exactly the
current digests, recomputed from the files, passed every required gate; execute runs only a commitment whose
digests still match. No flag skips a gate: this module has no bypass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from campaign.data.tokenizer import load_tokenizer
from campaign.evidence import DataEvidence
from campaign.gate_result import GateResult

if TYPE_CHECKING:
    from campaign.plan.planner import Plan
    from campaign.store import Commitment, GateRecord

# Order is the order the validate table prints.
REQUIRED_GATES: tuple[str, ...] = (
    "data_identity",  # the prepared files, their inputs and the data: section are what prepare recorded
    "data_quality",  # Great Expectations suite over the clean data
    "data_volume",  # documents, tokens, rejected share
    "data_mixture",  # token shares against the planned weights
    "layout",  # parallel layout against the topology
    "memory",  # memory per GPU against HBM
    "schedule",  # expected campaign length against the window
    "rehearsal",  # a real training loop on a sample, killed and restored (campaign.rehearsal)
)


@dataclass(frozen=True, slots=True)
class SourceFigures:
    """One source's documents and tokens as counted from the prepared files."""

    n_kept: int
    n_rejected: int
    n_tokens: int  # counted again from the clean text
    n_tokens_column: int  # the sum of the clean files' n_tokens column
    n_token_mismatches: int  # clean documents whose n_tokens column differs from the count

    @property
    def n_input(self) -> int:
        return self.n_kept + self.n_rejected


def data_figures(evidence: DataEvidence, tokenizer: str) -> dict[str, SourceFigures]:
    """Per-source figures recomputed from the files themselves (never from the manifest's claims).

    Documents are the rows of the clean and rejected files, attributed by each row's own `source` column; tokens
    are counted again from the clean text with the campaign's tokenizer and compared with the `n_tokens` column."""
    # Per source, in order of first sight: kept, rejected, tokens, tokens in the column, mismatches.
    counts: dict[str, list[int]] = {}
    for f in evidence.files:
        if f.table is None:
            continue
        names = _column(f.table, "source", default=f.source)
        if f.kind == "clean":
            texts = [t or "" for t in _column(f.table, "text", default="")]
            counted = np.asarray(load_tokenizer(tokenizer).count_many(texts), dtype=np.int64)
            column = _column(f.table, "n_tokens", default=None)
            for i, (source, n) in enumerate(zip(names, counted.tolist(), strict=True)):
                row = counts.setdefault(str(source), [0, 0, 0, 0, 0])
                claimed = column[i]
                row[0] += 1
                row[2] += int(n)
                row[3] += int(claimed or 0)
                row[4] += int(claimed != n)
        else:
            for source in names:
                counts.setdefault(str(source), [0, 0, 0, 0, 0])[1] += 1
    return {source: SourceFigures(*row) for source, row in counts.items()}


def _column(table: Any, name: str, default: Any) -> list[Any]:
    if name in table.column_names:
        return table.column(name).to_pylist()
    return [default] * table.num_rows


def identity_gate(evidence: DataEvidence) -> GateResult:
    """The prepared data stands for this config: files as prepare wrote them, inputs and `data:` unchanged."""
    problems = list(evidence.problems)
    return GateResult(
        "data_identity",
        not problems,
        "; ".join(problems)
        or f"{len(evidence.files)} prepared files, inputs and the data: section match prepare",
        {
            "problems": problems,
            "files": {f.path: f.sha256 for f in evidence.files},
            "gate_files": evidence.gate_files_record(),
        },
    )


def data_gates(
    figures: Mapping[str, SourceFigures],
    weights: dict[str, float],
    min_documents: int,
    min_tokens: float,
    max_rejected_fraction: float,
    mixture_tolerance: float,
) -> list[GateResult]:
    """Volume and mixture gates from figures recomputed from the files, judged against the current weights.

    Every comparison is written so that NaN fails it."""
    n_docs = sum(f.n_kept for f in figures.values())
    n_input = sum(f.n_input for f in figures.values())
    tokens = sum(f.n_tokens for f in figures.values())
    mismatches = sum(f.n_token_mismatches for f in figures.values())
    rejected = (n_input - n_docs) / n_input if n_input else 1.0
    problems = []
    if not n_docs >= min_documents:
        problems.append(f"{n_docs} clean documents < gates.data.min_documents {min_documents}")
    if not tokens >= min_tokens:
        problems.append(f"{tokens:,} clean tokens < gates.data.min_tokens {min_tokens:,.0f}")
    if not rejected <= max_rejected_fraction:
        problems.append(
            f"{rejected:.1%} of documents rejected > gates.data.max_rejected_fraction "
            f"{max_rejected_fraction:.0%}"
        )
    if mismatches:
        problems.append(
            f"{mismatches} clean documents carry an n_tokens that the tokenizer does not give; "
            "run `campaign prepare` again"
        )
    volume = GateResult(
        "data_volume",
        not problems,
        "; ".join(problems) or f"{n_docs:,} documents, {tokens:,} tokens, {rejected:.1%} rejected",
        {
            "n_documents": n_docs,
            "n_input": n_input,
            "n_tokens": tokens,
            "rejected_fraction": rejected,
            "n_token_mismatches": mismatches,
        },
    )
    total_w = sum(weights.values())
    gaps = {}
    for name, weight in weights.items():
        share = (figures[name].n_tokens if name in figures else 0) / tokens if tokens else 0.0
        planned = weight / total_w
        gaps[name] = {"share": share, "planned": planned, "relative_gap": abs(share - planned) / planned}
    worst_name, worst = max(gaps.items(), key=lambda kv: (kv[1]["relative_gap"], kv[0]))
    mixture_ok = all(g["relative_gap"] <= mixture_tolerance for g in gaps.values())
    mixture = GateResult(
        "data_mixture",
        mixture_ok,
        f"largest gap: source '{worst_name}' has {worst['share']:.1%} of tokens, planned "
        f"{worst['planned']:.1%} (relative gap {worst['relative_gap']:.2f}, "
        f"tolerance {mixture_tolerance:.2f})",
        {"sources": gaps, "weights": weights},
    )
    return [volume, mixture]


def _band_text(plan: Plan) -> str:
    """', step S s (band LOW-HIGH s, calibrated|uncalibrated)' when the plan states its band."""
    band = plan.step_time_range_s
    if len(band) != 2:
        return ""
    basis = "calibrated" if plan.calibration else "uncalibrated"
    return f", step {plan.step_time_s:.3g} s (band {band[0]:.3g}-{band[1]:.3g} s, {basis})"


def _overheads_text(plan: Plan) -> str:
    """' (framework: NCCL X, CUDA context Y, allocator Z GiB)': the overheads the memory figure counts."""
    gib = plan.memory_breakdown_gib
    kinds = (("nccl", "NCCL"), ("cuda_context", "CUDA context"), ("allocator", "allocator"))
    parts = [f"{name} {gib[key]:.2f}" for key, name in kinds if isinstance(gib.get(key), (int, float))]
    return f" (framework: {', '.join(parts)} GiB)" if parts else ""


def plan_gates(plan: Plan, violations: list[tuple[str, str]]) -> list[GateResult]:
    """Layout, memory and schedule gates from a plan's violations (rule, message)."""
    results = []
    lay = plan.layout
    summaries = {
        "layout": f"tp={lay['tp']} pp={lay['pp']} dp={lay['dp']} cp={lay['cp']} on {plan.gpus:,} GPUs",
        "memory": f"{plan.memory_gib_per_gpu:.1f} GiB per GPU" + _overheads_text(plan),
        "schedule": f"expected {plan.expected_days:.2f} days at ETTR {plan.expected_ettr:.3f}"
        + _band_text(plan),
    }
    # Defence in depth: a figure that is not a finite number fails the gate that reads it.
    finite = {
        "memory": ("memory_gib_per_gpu",),
        "schedule": ("step_time_s", "expected_ettr", "expected_days"),
    }
    for gate in ("layout", "memory", "schedule"):
        messages = [m for rule, m in violations if rule == gate]
        for key in finite.get(gate, ()):
            value = getattr(plan, key)
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                messages.append(
                    f"plan figure {key} is {value!r}, not a finite number; check the config's numbers"
                )
        results.append(
            GateResult(gate, not messages, "; ".join(messages) or summaries[gate], {"violations": messages})
        )
    return results


def commit_problems(
    recorded: Mapping[str, GateRecord], config_digest: str, data_digest: str, ever_validated: bool = True
) -> list[str]:
    """What stops a commitment: each required gate missing or failed in the newest validate run for exactly
    these digests (`recorded`, from `store.latest_gates`). A workspace never validated (`ever_validated` False:
    no gate recorded at all) says so, once, instead of naming a change that never happened."""
    if not recorded and not ever_validated:
        return [
            "never validated: no gate has been run in this workspace yet; run `campaign validate` "
            f"(every gate must pass for config {config_digest[:12]} and gate evidence {data_digest[:12]})"
        ]
    problems = []
    for gate in REQUIRED_GATES:
        record = recorded.get(gate)
        if record is None:
            problems.append(
                f"gate '{gate}' has not been run for config {config_digest[:12]} and gate evidence "
                f"{data_digest[:12]} (the config or the data changed since the last validate): run "
                "`campaign validate`"
            )
        elif record.passed is not True:
            problems.append(
                f"gate '{gate}' failed in the latest validate: {record.details.get('summary', '')}"
            )
    return problems


def execute_problems(
    commitments: Sequence[Commitment],
    config_digest: str,
    data_digest: str | None,
    changed_files: list[str],
    recorded: Mapping[str, GateRecord],
    ever_validated: bool = True,
) -> list[str]:
    """What stops execute: no commitment, or one whose config or data digest no longer matches."""
    if data_digest is None:
        return [
            "no prepared data in this workspace (data/manifest.json missing): run `campaign prepare`, "
            "`campaign validate` and `campaign commit` first",
            *commit_problems(recorded, config_digest, "-", ever_validated),
        ]
    if not commitments:
        return [
            "no commitment for this workspace: run `campaign commit` after every gate passes",
            *commit_problems(recorded, config_digest, data_digest, ever_validated),
        ]
    for c in commitments:
        if c.config_digest == config_digest and c.data_digest == data_digest and not changed_files:
            return commit_problems(recorded, config_digest, data_digest)
    latest = commitments[0]
    problems = []
    if latest.config_digest != config_digest:
        problems.append(
            f"config digest changed since commit: committed {latest.config_digest[:12]}, now "
            f"{config_digest[:12]}; validate and commit this config, or restore the committed one"
        )
    if changed_files or latest.data_digest != data_digest:
        problems.append(
            f"gate evidence digest changed since commit (the prepared data or a file the gates read): committed "
            f"{latest.data_digest[:12]}, now "
            f"{data_digest[:12]}; rerun prepare, validate and commit, or restore the data"
        )
        problems.extend(changed_files)
    return problems


def schedule_with_window_length(schedule: GateResult, assessment: Any) -> GateResult:
    """The schedule gate with the window-length rule (`campaign.calendar.window_length`) folded in: a window
    shorter than the p90 or longer than the p99 completion time fails it, saying which and what it costs."""
    details = {**schedule.details, "window_length": assessment.to_json()}
    if assessment.verdict == "ok":
        return GateResult(
            schedule.gate, schedule.passed, f"{schedule.summary}; {assessment.message}", details
        )
    details["violations"] = [*details.get("violations", []), assessment.message]
    summary = assessment.message if schedule.passed else f"{schedule.summary}; {assessment.message}"
    return GateResult(schedule.gate, False, summary, details)

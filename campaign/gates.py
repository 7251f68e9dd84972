"""Which gates stand between a campaign and its window, and whether they let it through.

Every gate is recorded against the config digest and the data digest it checked. Commit books the window only
if every required gate passed for exactly the current digests; execute runs only a commitment whose digests
still match the config and the files on disk. No flag skips a gate: this module has no bypass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Order is the order the validate table prints.
REQUIRED_GATES: tuple[str, ...] = (
    "data_quality",   # Great Expectations suite over the clean data
    "data_volume",    # documents, tokens, rejected share
    "data_mixture",   # token shares against the planned weights
    "layout",         # parallel layout against the topology
    "memory",         # memory per GPU against HBM
    "schedule",       # expected campaign length against the window
    "rehearsal",      # a real training loop on a sample, killed and restored (campaign.rehearsal)
)


@dataclass(frozen=True)
class GateResult:
    gate: str
    passed: bool
    summary: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_row(self) -> tuple[str, bool, dict[str, Any]]:
        return self.gate, self.passed, {"summary": self.summary, **self.details}


def data_gates(manifest: dict[str, Any], min_documents: int, min_tokens: float, max_rejected_fraction: float,
               mixture_tolerance: float) -> list[GateResult]:
    """Volume and mixture gates from a prepare manifest."""
    sources = manifest["sources"]
    n_docs = sum(s["n_kept"] for s in sources)
    n_input = sum(s["n_input"] for s in sources)
    tokens = sum(s["tokens_kept"] for s in sources)
    rejected = (n_input - n_docs) / n_input if n_input else 1.0
    problems = []
    if n_docs < min_documents:
        problems.append(f"{n_docs} clean documents < gates.data.min_documents {min_documents}")
    if tokens < min_tokens:
        problems.append(f"{tokens:,} clean tokens < gates.data.min_tokens {min_tokens:,.0f}")
    if rejected > max_rejected_fraction:
        problems.append(f"{rejected:.1%} of documents rejected > gates.data.max_rejected_fraction "
                        f"{max_rejected_fraction:.0%}")
    volume = GateResult(
        "data_volume", not problems,
        "; ".join(problems) or f"{n_docs:,} documents, {tokens:,} tokens, {rejected:.1%} rejected",
        {"n_documents": n_docs, "n_input": n_input, "n_tokens": tokens, "rejected_fraction": rejected},
    )
    weights = {s["name"]: s["weight"] for s in sources}
    total_w = sum(weights.values())
    gaps = {}
    for s in sources:
        share = s["tokens_kept"] / tokens if tokens else 0.0
        planned = weights[s["name"]] / total_w
        gaps[s["name"]] = {"share": share, "planned": planned, "relative_gap": abs(share - planned) / planned}
    worst = max(gaps.items(), key=lambda kv: kv[1]["relative_gap"])
    mixture_ok = worst[1]["relative_gap"] <= mixture_tolerance
    mixture = GateResult(
        "data_mixture", mixture_ok,
        f"largest gap: source '{worst[0]}' has {worst[1]['share']:.1%} of tokens, planned "
        f"{worst[1]['planned']:.1%} (relative gap {worst[1]['relative_gap']:.2f}, "
        f"tolerance {mixture_tolerance:.2f})",
        {"sources": gaps},
    )
    return [volume, mixture]


def plan_gates(plan_json: dict[str, Any], violations: list[tuple[str, str]]) -> list[GateResult]:
    """Layout, memory and schedule gates from a plan's violations (rule, message)."""
    results = []
    summaries = {
        "layout": f"tp={plan_json['layout']['tp']} pp={plan_json['layout']['pp']} dp={plan_json['layout']['dp']} "
                  f"cp={plan_json['layout']['cp']} on {plan_json['gpus']:,} GPUs",
        "memory": f"{plan_json['memory_gib_per_gpu']:.1f} GiB per GPU",
        "schedule": f"expected {plan_json['expected_days']:.2f} days at ETTR {plan_json['expected_ettr']:.3f}",
    }
    for gate in ("layout", "memory", "schedule"):
        messages = [m for rule, m in violations if rule == gate]
        results.append(GateResult(gate, not messages, "; ".join(messages) or summaries[gate],
                                  {"violations": messages}))
    return results


def commit_problems(recorded: dict[str, Any], config_digest: str, data_digest: str) -> list[str]:
    """What stops a commitment: each required gate missing or failed for these digests."""
    problems = []
    for gate in REQUIRED_GATES:
        record = recorded.get(gate)
        if record is None:
            problems.append(f"gate '{gate}' has not been run for config {config_digest[:12]} and data "
                            f"{data_digest[:12]}: run `campaign validate`")
        elif not record.passed:
            problems.append(f"gate '{gate}' failed: {record.details.get('summary', '')}")
    return problems


def execute_problems(commitments: list[Any], config_digest: str, data_digest: str | None,
                     changed_files: list[str], recorded: dict[str, Any]) -> list[str]:
    """What stops execute: no commitment, or one whose config or data digest no longer matches."""
    if data_digest is None:
        return [("no prepared data in this workspace (data/manifest.json missing): run `campaign prepare`, "
                "`campaign validate` and `campaign commit` first")] + commit_problems(recorded, config_digest, "-")
    if not commitments:
        return ["no commitment for this workspace: run `campaign commit` after every gate passes"] + \
            commit_problems(recorded, config_digest, data_digest)
    for c in commitments:
        if c.config_digest == config_digest and c.data_digest == data_digest and not changed_files:
            return commit_problems(recorded, config_digest, data_digest)
    latest = commitments[0]
    problems = []
    if latest.config_digest != config_digest:
        problems.append(f"config digest changed since commit: committed {latest.config_digest[:12]}, now "
                        f"{config_digest[:12]}; validate and commit this config, or restore the committed one")
    if changed_files or latest.data_digest != data_digest:
        problems.append(f"data digest changed since commit: committed {latest.data_digest[:12]}, now "
                        f"{data_digest[:12]}; rerun prepare, validate and commit, or restore the data")
        problems.extend(changed_files)
    return problems

"""Token shares per source against the planned mixture weights."""

from __future__ import annotations

from campaign.data.manifest import MixtureEntry


def mixture_report(token_counts: dict[str, float], weights: dict[str, float]) -> list[MixtureEntry]:
    """One row per source (weights' order, then any source only in `token_counts`).

    Each row: source, tokens, share (of all tokens counted), planned_share (weights normalised to sum 1),
    relative_gap = (share - planned_share) / planned_share (None where the planned share is 0).
    """
    names = list(weights) + [name for name in token_counts if name not in weights]
    total_tokens = float(sum(token_counts.get(name, 0.0) for name in names))
    total_weight = float(sum(weights.get(name, 0.0) for name in names))
    rows: list[MixtureEntry] = []
    for name in names:
        tokens = float(token_counts.get(name, 0.0))
        share = tokens / total_tokens if total_tokens > 0 else 0.0
        planned = weights.get(name, 0.0) / total_weight if total_weight > 0 else 0.0
        gap = (share - planned) / planned if planned > 0 else None
        rows.append(
            {"source": name, "tokens": tokens, "share": share, "planned_share": planned, "relative_gap": gap}
        )
    return rows

"""The per-second facility power around chosen moments of an executed window.

The catalog keeps power sampled every `sim.power_sample_s`; the per-second curve is not stored. The simulator is
deterministic for a config and seed, so the per-second curve is rebuilt by simulating the committed config again
(well under a second) and is used only if the rebuilt run matches the recorded one (same ETTR, tokens and events).
Source: campaign.sim.power (exact 1-second means of the step or ramp-limited curve).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from campaign.analysis.result import FinishWithWithout, SmoothingEffect, WithWithout, ZoomPanel
from campaign.sim.power import one_second_series
from campaign.sim.summary import ReplicaSummary


def rebuild_one_second(
    config_json: str | None, replica: int, summary: ReplicaSummary, n_events: int
) -> tuple[np.ndarray | None, str]:
    """The window's 1-second power series (MW, index = second), or None and the reason it is not available."""
    if not config_json:
        return None, "the commitment has no recorded config (made before config_json existed)"
    from campaign.config import CampaignConfig
    from campaign.plan import make_plan
    from campaign.sim import simulate
    from campaign.window import window_inputs

    try:
        config = CampaignConfig.model_validate(json.loads(config_json))
        result = simulate(window_inputs(config, make_plan(config)), replica=replica)
    except Exception as exc:  # a report without the zoom beats no report; the reason is shown
        return None, f"the committed config could not be simulated again ({type(exc).__name__}: {exc})"
    same = (
        math.isclose(result.summary.tokens_trained, summary.tokens_trained, rel_tol=1e-12, abs_tol=1e-6)
        and len(result.events) == n_events
    )
    if not same or result.power_curve is None:
        return (
            None,
            "simulating the committed config again gave a different window (another campaign version)",
        )
    return one_second_series(result.power_curve), ""


def zoom(series_mw: np.ndarray, centre_s: float, title: str, half_width_s: int = 300) -> ZoomPanel:
    """The per-second series from centre - half_width to centre + half_width, with its swing and steepest ramp."""
    lo = max(int(centre_s) - half_width_s, 0)
    hi = min(int(centre_s) + half_width_s, len(series_mw))
    mw = series_mw[lo:hi]
    steps = np.abs(np.diff(mw)) if len(mw) > 1 else np.zeros(1)
    return ZoomPanel(
        title=title,
        centre_s=float(centre_s),
        t_s=np.arange(lo, hi, dtype=float),
        power_mw=mw,
        swing_mw=float(mw.max() - mw.min()) if len(mw) else 0.0,
        max_ramp_mw_per_s=float(steps.max()),
    )


def zoom_moments(events: pd.DataFrame) -> list[tuple[float, str]]:
    """One failure and one checkpoint, the moments the report zooms into: the first failure, and the checkpoint
    nearest the middle of the job (clear of the job's start)."""
    out = []
    for kind, label in (("failure", "failure"), ("checkpoint_start", "checkpoint")):
        hits = events[events["kind"] == kind]
        if len(hits):
            row = hits.iloc[0] if kind == "failure" else hits.iloc[len(hits) // 2]
            what = f" ({row['category']})" if kind == "failure" and row["category"] else ""
            out.append((float(row["t_s"]), f"{label}{what} at day {row['t_s'] / 86400.0:.2f}"))
    return out


def smoothing_effect(
    config_json: str | None, replica: int, summary: ReplicaSummary
) -> SmoothingEffect | None:
    """What the window's power smoothing cost against the swing it removed: the same window (same seed, so the same
    failures) simulated again without smoothing, set beside the recorded one. None when smoothing was off."""
    if not config_json:
        return None
    from campaign.config import CampaignConfig
    from campaign.plan import make_plan
    from campaign.sim import simulate
    from campaign.window import window_inputs

    config = CampaignConfig.model_validate(json.loads(config_json))
    if config.plan.power_smoothing is None:
        return None
    plain = config.model_copy(update={"plan": config.plan.model_copy(update={"power_smoothing": None})})
    without = simulate(window_inputs(plain, make_plan(plain)), replica=replica).summary
    on, off = summary.power_mw, without.power_mw
    return SmoothingEffect(
        energy_mwh=WithWithout(summary.energy_mwh, without.energy_mwh),
        extra_energy_mwh=summary.energy_mwh - without.energy_mwh,
        max_ramp_mw_per_s=WithWithout(on["max_ramp_mw_per_s"], off["max_ramp_mw_per_s"]),
        swing_mw=WithWithout(on["peak"] - on["min"], off["peak"] - off["min"]),
        tokens_trained=WithWithout(summary.tokens_trained, without.tokens_trained),
        completion_days=FinishWithWithout(*(completion_days(s.completion_s) for s in (summary, without))),
    )


def completion_days(completion_s: float | None) -> float | None:
    return completion_s / 86400.0 if completion_s else None

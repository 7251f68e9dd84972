"""The plan calibrated on a team's own measured steps, and the band a step time is expected to land in.

The accelerator calibration (`configs/accelerators/*.yaml`) is fitted on best-case benchmark tables of Megatron-LM
and Megatron-Core; a production run of the same model and layout on another stack, over months, runs slower, and
nothing in the kernel model can know by how much. Two stack-efficiency factors carry what it cannot know:
`compute` scales the time the GPUs compute (kernels, optimizer, and the compute share of the pipeline bubble) and
`communication` the exposed communication (TP, CP, PP p2p, DP, and their share of the bubble). Fitted to the
measured steps (`plan.measured`) by least squares on relative errors, with a prior that pulls the two together
(one run cannot tell them apart), bounded to [1/3, 3]; the model then predicts the configured layout from there.
Without measurements the plan states the band `UNCALIBRATED_BAND` derived from published production runs (a ratio
of the published step time to the model's), and with them the in-sample residuals widened by
`CALIBRATED_EXTRAPOLATION`, what calibrating on one scale missed at the others.
Source: published production runs (tests/oracles/production_runs.py: MT-NLG 530B arXiv 2201.11990 §2.4, Nemotron-4
340B arXiv 2406.11704 Table 2, Llama 3 405B arXiv 2407.21783 Table 4, BLOOM arXiv 2211.05100); the derivation and
the held-out split in docs/plan-model.md#production-runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from campaign.plan.performance import StepEstimate

# Published step time / uncalibrated model step time on the fitted split of the production runs (MT-NLG 530B:
# 1.29-1.34; Llama 3 405B: 0.965-1.005; docs/plan-model.md#production-runs): the smallest and the largest ratio,
# each widened by 3 % for what two families cannot show. Checked on the held-out split (Nemotron-4 340B, BLOOM).
UNCALIBRATED_BAND = (0.94, 1.38)
# Leave-one-scale-out error of a calibration on one measured run (largest seen on the production runs, rounded up):
# the calibrated band is the in-sample residuals widened by this on both sides.
CALIBRATED_EXTRAPOLATION = 0.05
FACTOR_BOUNDS = (1.0 / 3.0, 3.0)
# Weight of the prior that the two factors are equal, against squared relative errors: small, so runs whose
# communication shares differ separate the factors, and one run (which cannot) gets two equal ones.
PRIOR_WEIGHT = 1e-3

COMPUTE_PARTS = ("compute", "optimizer")
COMM_PARTS = ("tp_comm", "cp_comm_exposed", "pp_comm", "dp_comm_exposed")


def step_split_s(step: StepEstimate) -> tuple[float, float]:
    """(compute seconds, exposed communication seconds) of a step, the pipeline bubble split between them in
    the proportion of a micro-batch's stage time (compute versus exposed TP and CP)."""
    busy = step.compute_s + step.optimizer_s
    comm = step.tp_comm_s + step.cp_comm_s + step.pp_comm_s + step.dp_comm_exposed_s
    stage = step.compute_s + step.tp_comm_s + step.cp_comm_s
    share = step.compute_s / stage if stage > 0 else 1.0
    return busy + step.pp_bubble_s * share, comm + step.pp_bubble_s * (1.0 - share)


@dataclass(frozen=True)
class StackEfficiency:
    """Multipliers on the model's compute and exposed communication time (1.0 = the calibration tables' stack)."""

    compute: float = 1.0
    communication: float = 1.0

    def step_s(self, step: StepEstimate) -> float:
        busy, comm = step_split_s(step)
        return self.compute * busy + self.communication * comm

    def breakdown(self, step: StepEstimate) -> dict[str, float]:
        """The step's parts with the factors applied (the bubble by its compute share), summing to `step_s`."""
        parts = step.breakdown()
        stage = step.compute_s + step.tp_comm_s + step.cp_comm_s
        share = step.compute_s / stage if stage > 0 else 1.0
        out = dict(parts)
        for k in ("compute", "compute_memory_bound", "optimizer"):
            out[k] = parts[k] * self.compute
        for k in ("tp_comm", "tp_comm_total", "cp_comm_exposed", "cp_comm_total", "pp_comm"):
            out[k] = parts[k] * self.communication
        out["dp_comm_exposed"] = parts["dp_comm_exposed"] * self.communication
        out["dp_comm_total"] = parts["dp_comm_total"] * self.communication
        out["pp_bubble"] = parts["pp_bubble"] * (share * self.compute + (1.0 - share) * self.communication)
        return out

    def to_json(self) -> dict[str, float]:
        return {"compute": self.compute, "communication": self.communication}


@dataclass(frozen=True)
class MeasuredRow:
    nodes: int
    layout: dict[str, int]
    measured_s: float
    predicted_s: float  # the calibrated model's step time for this run

    @property
    def error(self) -> float:
        """Relative error of the calibrated prediction: predicted / measured - 1."""
        return self.predicted_s / self.measured_s - 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "layout": dict(self.layout),
            "measured_s": self.measured_s,
            "predicted_s": self.predicted_s,
            "error": self.error,
        }


@dataclass(frozen=True)
class Calibration:
    """The fitted factors and the in-sample rows; `sources` names the measurements."""

    factors: StackEfficiency
    rows: tuple[MeasuredRow, ...]
    sources: tuple[str, ...]

    def band(self) -> tuple[float, float]:
        """(low, high) multipliers on the calibrated step time: the residuals (measured / predicted), widened by
        the extrapolation error."""
        ratios = [r.measured_s / r.predicted_s for r in self.rows]
        return min(ratios) * (1.0 - CALIBRATED_EXTRAPOLATION), max(ratios) * (1.0 + CALIBRATED_EXTRAPOLATION)

    def to_json(self) -> dict[str, Any]:
        return {
            "factors": self.factors.to_json(),
            "rows": [r.to_json() for r in self.rows],
            "sources": list(self.sources),
        }


def fit_stack_efficiency(splits: list[tuple[float, float]], measured_s: list[float]) -> StackEfficiency:
    """Least squares on relative errors, sum (f_c a_i + f_n b_i) / y_i - 1)^2 + w (f_c - f_n)^2, within
    FACTOR_BOUNDS: `splits` are each run's (compute, communication) seconds from `step_split_s`."""
    a = np.array([[c / y, n / y] for (c, n), y in zip(splits, measured_s, strict=True)])
    rhs = np.ones(len(measured_s))
    w = np.sqrt(PRIOR_WEIGHT)
    a = np.vstack([a, [w, -w]])
    rhs = np.append(rhs, 0.0)
    (fc, fn), *_ = np.linalg.lstsq(a, rhs, rcond=None)
    low, high = FACTOR_BOUNDS
    if not (low <= fc <= high and low <= fn <= high):
        # Clamp the factor out of bounds and refit the other alone (a two-variable bounded least squares).
        best: tuple[float, float, float] | None = None
        for index in (0, 1):
            for fixed in (low, high):
                col, other = a[:, index], a[:, 1 - index]
                r = rhs - col * fixed
                free = float(np.clip(other @ r / max(other @ other, 1e-300), low, high))
                res = float(np.sum((r - other * free) ** 2))
                pair = (fixed, free) if index == 0 else (free, fixed)
                if best is None or res < best[2]:
                    best = (*pair, res)
        assert best is not None
        fc, fn = best[0], best[1]
    return StackEfficiency(compute=float(fc), communication=float(fn))

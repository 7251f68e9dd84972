"""The plan calibrated on a team's own measured steps, and the band a step time is expected to land in.

The accelerator calibration (`configs/accelerators/*.yaml`) is fitted on best-case benchmark tables of Megatron-LM
and Megatron-Core; a production run of the same model and layout on another stack, over months, runs slower, and
nothing in the kernel model can know by how much. Two stack-efficiency factors carry what it cannot know:
`compute` scales the time the GPUs compute (kernels, optimizer, and the compute share of the pipeline bubble) and
`communication` the exposed communication (TP, CP, PP p2p, DP, and their share of the bubble). Fitted to the
measured steps (`plan.measured`) by least squares on relative errors, with a prior that pulls the two together
(one run cannot tell them apart), within [1/3, 3]; the model then predicts the configured layout from there. A
measured step that needs a factor outside those bounds on its own is outside what the model can explain (another
model, another stack, a wrong layout or batch, or not a step time): it is refused with its factor, never clipped.
Runs each explainable that only a factor outside the bounds fits together are fitted within them, the band widened
to hold every measured run and the plan's own point, and the calibration says so.
Without measurements the plan states the band `UNCALIBRATED_BAND` derived from published production runs (a ratio
of the published step time to the model's), and with them the in-sample residuals widened by
`CALIBRATED_EXTRAPOLATION`, what calibrating on one scale missed at the others.
Source: published production runs (tests/oracles/production_runs.py: MT-NLG 530B arXiv 2201.11990 §2.4, Nemotron-4
340B arXiv 2406.11704 Table 2, Llama 3 405B arXiv 2407.21783 Table 4, BLOOM arXiv 2211.05100); the derivation and
the held-out split in docs/plan-model.md#production-runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from campaign.errors import ConfigError
from campaign.plan.performance import StepEstimate
from campaign.records import JsonRecord

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


@dataclass(frozen=True, slots=True)
class StackEfficiency(JsonRecord):
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


@dataclass(frozen=True, slots=True)
class MeasuredRow(JsonRecord):
    nodes: int
    layout: dict[str, int]
    measured_s: float
    predicted_s: float  # the calibrated model's step time for this run

    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("error",)

    @property
    def error(self) -> float:
        """Relative error of the calibrated prediction: predicted / measured - 1."""
        return self.predicted_s / self.measured_s - 1.0


@dataclass(frozen=True, slots=True)
class Calibration(JsonRecord):
    """The fitted factors and the in-sample rows; `sources` names the measurements."""

    factors: StackEfficiency
    rows: tuple[MeasuredRow, ...]
    sources: tuple[str, ...]
    note: str = ""  # what the fit could not do as asked (factors held at their bounds), said on every surface

    OMIT_WHEN_EMPTY: ClassVar[frozenset[str]] = frozenset({"note"})

    def band(self) -> tuple[float, float]:
        """(low, high) multipliers on the calibrated step time: the residuals (measured / predicted) and 1 (the
        plan's own point), widened by the extrapolation error. Never a band that excludes its own point."""
        ratios = [r.measured_s / r.predicted_s for r in self.rows] + [1.0]
        return min(ratios) * (1.0 - CALIBRATED_EXTRAPOLATION), max(ratios) * (1.0 + CALIBRATED_EXTRAPOLATION)


def check_explainable(splits: list[tuple[float, float]], measured_s: list[float]) -> None:
    """Refuse (ConfigError naming plan.measured[i]) a measured step whose own factor on the model's step,
    measured / (compute + communication), lies outside FACTOR_BOUNDS: no stack efficiency of this model explains
    it."""
    low, high = FACTOR_BOUNDS
    for i, ((c, n), y) in enumerate(zip(splits, measured_s, strict=True)):
        model_s = c + n
        factor = y / model_s if model_s > 0 else float("inf")
        if not low <= factor <= high:
            raise ConfigError(
                f"the measured step {y:.4g} s is {factor:.3g}x the model's {model_s:.4g} s for this run's layout, "
                f"nodes and batch; a stack runs this model at {low:.2f}x-{high:.0f}x the model's step, so this "
                "measurement is not one the model can explain (another model or stack, a wrong layout, batch or node "
                "count, or not seconds per optimizer step)",
                where=f"plan.measured[{i}].step_time_s",
                fix="check the row against the run it came from (`campaign plan measure` prints one), or remove it",
            )


def fit_calibration(
    splits: list[tuple[float, float]], measured_s: list[float]
) -> tuple[StackEfficiency, str]:
    """The factors fitted to explainable runs (`check_explainable` first), and a note when the joint fit needed
    factors outside FACTOR_BOUNDS and was held at them."""
    check_explainable(splits, measured_s)
    factors = fit_stack_efficiency(splits, measured_s)
    free = _unbounded_fit(splits, measured_s)
    low, high = FACTOR_BOUNDS
    if all(low <= f <= high for f in free):
        return factors, ""
    note = (
        f"the measured runs together ask for stack factors x{free[0]:.3g} on compute and x{free[1]:.3g} on exposed "
        f"communication, outside the {low:.2f}x-{high:.0f}x a stack can show; fitted within those bounds "
        f"(x{factors.compute:.3g}, x{factors.communication:.3g}) and the band widened to hold every run: check the "
        "runs' layouts and batches"
    )
    return factors, note


def _system(splits: list[tuple[float, float]], measured_s: list[float]) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([[c / y, n / y] for (c, n), y in zip(splits, measured_s, strict=True)])
    w = np.sqrt(PRIOR_WEIGHT)
    return np.vstack([a, [w, -w]]), np.append(np.ones(len(measured_s)), 0.0)


def _unbounded_fit(splits: list[tuple[float, float]], measured_s: list[float]) -> tuple[float, float]:
    a, rhs = _system(splits, measured_s)
    (fc, fn), *_ = np.linalg.lstsq(a, rhs, rcond=None)
    return float(fc), float(fn)


def fit_stack_efficiency(splits: list[tuple[float, float]], measured_s: list[float]) -> StackEfficiency:
    """Least squares on relative errors, sum (f_c a_i + f_n b_i) / y_i - 1)^2 + w (f_c - f_n)^2, within
    FACTOR_BOUNDS: `splits` are each run's (compute, communication) seconds from `step_split_s`."""
    a, rhs = _system(splits, measured_s)
    fc, fn = _unbounded_fit(splits, measured_s)
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

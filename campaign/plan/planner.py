"""The plan: memory, step time, MFU, checkpointing, reliability and expected length of one campaign layout.

`evaluate_layout` joins the models of this package for one (layout, micro_batch); an infeasible layout is a Plan
with violations (layout, memory, schedule), never an exception; `Plan.runs` is false only for layout or memory
violations (what `campaign plan`'s exit code reports). `make_plan` evaluates the config's own layout.
MFU = tokens/s x model FLOPs per token (Megatron-Core causal convention, no recompute) / (GPUs x peak dense BF16).
Source: Narayanan et al. 2021; Korthikanti et al. 2022; Daly 2006; Llama 3 (arXiv 2407.21783) §3.3 — see the
modules flops, kernels, memory, topology, performance, checkpointing and reliability.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from campaign.config import CampaignConfig, LayoutConfig
from campaign.plan.calibration import (
    UNCALIBRATED_BAND,
    Calibration,
    MeasuredRow,
    StackEfficiency,
    fit_calibration,
    step_split_s,
)
from campaign.plan.checkpointing import CheckpointPlan, finite_or_none, plan_checkpoint
from campaign.plan.flops import hardware_flops_per_token, model_flops_per_token, parameter_count
from campaign.plan.kernels import Kernels
from campaign.plan.layout import LayoutShape, Violation, layout_violations
from campaign.plan.memory import GIB, MemoryEstimate, MemoryModel, split_layers
from campaign.plan.performance import StepEstimate, StepModel
from campaign.plan.reliability import expected_days, expected_ettr, job_mtbf_h
from campaign.plan.topology import Fabric


@dataclass(frozen=True)
class Plan:
    gpus: int
    nodes: int
    layout: dict[str, int]  # tp, pp, dp, cp, vpp
    parameters: int
    memory_gib_per_gpu: float
    memory_breakdown_gib: dict[str, float]
    step_time_s: float
    step_breakdown_s: dict[str, float]
    comm_fraction: float
    mfu: float
    tokens_per_step: int
    tokens_per_s: float
    checkpoint: CheckpointPlan
    job_mtbf_h: float
    expected_ettr: float
    expected_days: float
    fits: bool  # no violation at all (layout, memory, schedule)
    violations: tuple[Violation, ...]
    notes: tuple[str, ...]
    micro_batch: int = 1
    micro_batches: int = 1
    hfu: float = 0.0
    memory_limit_gib: float = 0.0
    window_days: float = 0.0
    step_time_range_s: tuple[float, float] = (0.0, 0.0)  # where the step is expected to land (the band)
    basis: str = ""  # what the step time rests on: calibrated on measured runs, or the tables and the band
    calibration: Calibration | None = None

    @property
    def runs(self) -> bool:
        """The layout can run: no layout or memory violation (a schedule miss is a performance answer)."""
        return not any(v.rule in ("layout", "memory") for v in self.violations)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (`campaign plan --json`); violations as 'rule: message' strings."""
        return {
            "gpus": self.gpus,
            "nodes": self.nodes,
            "layout": dict(self.layout),
            "micro_batch": self.micro_batch,
            "micro_batches": self.micro_batches,
            "parameters": self.parameters,
            "memory_gib_per_gpu": self.memory_gib_per_gpu,
            "memory_limit_gib": self.memory_limit_gib,
            "memory_breakdown_gib": dict(self.memory_breakdown_gib),
            "step_time_s": self.step_time_s,
            "step_time_range_s": list(self.step_time_range_s),
            "basis": self.basis,
            "calibration": self.calibration.to_json() if self.calibration else None,
            "step_breakdown_s": dict(self.step_breakdown_s),
            "comm_fraction": self.comm_fraction,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "tokens_per_step": self.tokens_per_step,
            "tokens_per_s": self.tokens_per_s,
            "checkpoint": self.checkpoint.to_json(),
            "job_mtbf_h": finite_or_none(self.job_mtbf_h),
            "expected_ettr": self.expected_ettr,
            "expected_days": self.expected_days,
            "window_days": self.window_days,
            "fits": self.fits,
            "runs": self.runs,
            "violations": [str(v) for v in self.violations],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class QuickPlan:
    """What a search ranks by, without building a full Plan."""

    layout: LayoutShape
    micro_batch: int
    fits: bool
    fits_memory: bool
    tokens_per_s: float


def rank_key(q: QuickPlan | Plan) -> tuple:
    """Fits first, then highest tokens/s; among layouts that do not fit, those that fit in memory (only the
    schedule fails) come first. Ties go to the simpler layout."""
    if isinstance(q, QuickPlan):
        lay, fits_memory = q.layout, q.fits_memory
    else:
        lay, fits_memory = LayoutConfig(**q.layout), not any(v.rule == "memory" for v in q.violations)
    return (not q.fits, not fits_memory, -q.tokens_per_s, lay.tp, lay.pp, lay.cp, lay.vpp, q.micro_batch)


@dataclass(frozen=True)
class PlanContext:
    """Everything about a campaign that does not depend on the layout, computed once."""

    config: CampaignConfig
    parameters: int
    fabric: Fabric
    kernels: Kernels
    steps: StepModel
    memory: MemoryModel
    flops_per_token: float
    checkpoint: CheckpointPlan
    job_mtbf_h: float
    ettr: float
    memory_limit_gib: float
    days_limit: float
    notes: tuple[str, ...] = field(default=())
    efficiency: StackEfficiency = field(default_factory=StackEfficiency)
    calibration: Calibration | None = None

    @classmethod
    def from_config(cls, config: CampaignConfig) -> PlanContext:
        cl, plan = config.cluster, config.plan
        params = parameter_count(config.model)
        mtbf_h = job_mtbf_h(cl)
        ckpt = plan_checkpoint(params, cl.gpus, plan.checkpoint, mtbf_h * 3600.0)
        notes = []
        if plan.checkpoint.is_async:
            notes.append(
                f"async checkpoint: blocking part is the copy of 1/{cl.gpus} of the state to host memory; "
                f"the {ckpt.background_s:.0f} s upload runs in the background"
            )
        if plan.checkpoint.interval_s == "auto":
            notes.append("checkpoint interval: Daly's optimum for the job MTBF (interval_s: auto)")
        for key, what in plan.stack.unsupported(plan):
            notes.append(
                f"plan.{key}: the {plan.stack.preset} stack (plan.stack) does not run {what}; this plan assumes a "
                "stack that does (the search proposes only what plan.stack runs)"
            )
        gates = config.gates.config
        ctx = cls(
            config=config,
            parameters=params,
            fabric=Fabric.from_cluster(cl),
            kernels=(kernels := Kernels.from_accelerator(cl.accelerator, plan.attention_kernel)),
            steps=StepModel(config.model, plan, kernels, Fabric.from_cluster(cl)),
            memory=MemoryModel(
                config.model,
                zero_stage=plan.zero_stage,
                recompute=plan.recompute,
                attention=plan.attention,
                sequence_parallel=plan.sequence_parallel,
                recompute_pointwise=plan.recompute_pointwise,
                allocator_fragmentation=plan.allocator_fragmentation,
                overheads=plan.memory,
            ),
            flops_per_token=model_flops_per_token(config.model),
            checkpoint=ckpt,
            job_mtbf_h=mtbf_h,
            ettr=expected_ettr(cl, ckpt),
            memory_limit_gib=gates.max_memory_fraction * cl.accelerator.hbm_gib,
            days_limit=config.window.days * (1.0 - gates.min_window_margin),
            notes=tuple(notes),
        )
        return ctx.calibrated() if plan.measured else ctx

    def calibrated(self) -> PlanContext:
        """This context with the stack efficiency fitted to `plan.measured` (the same model and stack)."""
        cfg = self.config
        seq = cfg.model.seq_len
        runs = cfg.plan.measured
        steps = []
        for run in runs:
            mb = run.micro_batch or cfg.plan.micro_batch
            m = max(1, run.global_batch_tokens // seq // (mb * run.layout.dp))
            steps.append(self.steps.estimate(run.layout, mb, m))
        factors, note = fit_calibration([step_split_s(s) for s in steps], [r.step_time_s for r in runs])
        rows = tuple(
            MeasuredRow(
                nodes=run.nodes,
                layout=_layout_dict(run.layout),
                measured_s=run.step_time_s,
                predicted_s=factors.step_s(step),
            )
            for run, step in zip(runs, steps, strict=True)
        )
        calibration = Calibration(factors, rows, tuple(r.source for r in runs), note)
        return replace(self, efficiency=factors, calibration=calibration)

    def step_s(self, step: StepEstimate) -> float:
        """The step time with the stack efficiency applied (the raw model's when uncalibrated)."""
        return self.efficiency.step_s(step) if self.calibration else step.step_s

    def band(self) -> tuple[float, float]:
        """(low, high) multipliers on the step time: the calibrated residuals, or the production-run band."""
        return self.calibration.band() if self.calibration else UNCALIBRATED_BAND

    def basis(self) -> str:
        if self.calibration is None:
            low, high = UNCALIBRATED_BAND
            return (
                "uncalibrated: kernel efficiencies of the benchmark tables (best-case Megatron runs); a production "
                f"run on a stack it was not calibrated to lands at {low:.2f}-{high:.2f}x this step time "
                "(published production runs); measure a short run and add it to plan.measured"
            )
        f = self.calibration.factors
        runs = ", ".join(
            f"{r.nodes} nodes tp={r.layout['tp']} pp={r.layout['pp']} dp={r.layout['dp']} cp={r.layout['cp']} "
            f"{r.measured_s:.3g} s"
            for r in self.calibration.rows
        )
        note = f"; {self.calibration.note}" if self.calibration.note else ""
        return (
            f"calibrated on {len(self.calibration.rows)} measured run(s) ({runs}): stack efficiency x{f.compute:.3f} "
            f"on compute, x{f.communication:.3f} on exposed communication{note}"
        )

    def micro_batches(self, layout: LayoutShape, micro_batch: int) -> int:
        sequences = self.config.plan.global_batch_tokens // self.config.model.seq_len
        return max(1, sequences // (micro_batch * layout.dp))

    def _memory(self, layout: LayoutShape, micro_batch: int, m: int) -> MemoryEstimate:
        return self.memory.estimate(
            tp=layout.tp,
            pp=layout.pp,
            dp=layout.dp,
            cp=layout.cp,
            vpp=layout.vpp,
            micro_batch=micro_batch,
            micro_batches=m,
        )

    def _estimate(self, layout: LayoutShape, micro_batch: int) -> tuple[MemoryEstimate, StepEstimate, int]:
        m = self.micro_batches(layout, micro_batch)
        step = self.steps.estimate(layout, micro_batch, m)
        return self._memory(layout, micro_batch, m), step, m

    def memory_gib(self, layout: LayoutShape, micro_batch: int) -> float:
        """GiB per GPU of a candidate (the cheap half of `quick`)."""
        return self._memory(layout, micro_batch, self.micro_batches(layout, micro_batch)).total / GIB

    def quick(self, layout: LayoutShape, micro_batch: int, mem_gib: float | None = None) -> QuickPlan:
        m = self.micro_batches(layout, micro_batch)
        step = self.steps.estimate(layout, micro_batch, m)
        if mem_gib is None:
            mem_gib = self._memory(layout, micro_batch, m).total / GIB
        tokens = m * micro_batch * layout.dp * self.config.model.seq_len
        tps = tokens / self.step_s(step)
        days = expected_days(self.config.plan.target_tokens, tps, self.ettr)
        fits_memory = mem_gib <= self.memory_limit_gib
        return QuickPlan(
            layout=layout,
            micro_batch=micro_batch,
            fits=fits_memory and days <= self.days_limit,
            fits_memory=fits_memory,
            tokens_per_s=tps,
        )

    def plan(self, layout: LayoutConfig, micro_batch: int) -> Plan:
        cfg, cl = self.config, self.config.cluster
        violations = layout_violations(cfg, layout, micro_batch)
        mem, step, m = self._estimate(layout, micro_batch)
        mem_gib = mem.total / GIB
        tokens = m * micro_batch * layout.dp * cfg.model.seq_len
        step_s = self.step_s(step)
        tps = tokens / step_s
        gpus = layout.world
        peak = gpus * cl.accelerator.peak_bf16_tflops * 1e12
        mfu = tps * self.flops_per_token / peak
        hfu = tps * hardware_flops_per_token(cfg.model, cfg.plan.recompute) / peak
        days = expected_days(cfg.plan.target_tokens, tps, self.ettr)

        if mem_gib > self.memory_limit_gib:
            violations.append(
                Violation(
                    "memory",
                    (
                        f"{mem_gib:.1f} GiB per GPU is over the limit of {self.memory_limit_gib:.1f} GiB "
                        f"({cfg.gates.config.max_memory_fraction:.0%} of {cl.accelerator.hbm_gib:g} GiB); raise tp or pp, "
                        f"lower micro_batch, use recompute: full or a higher zero_stage"
                    ),
                )
            )
        if days > self.days_limit:
            violations.append(
                Violation(
                    "schedule",
                    (
                        f"expected {days:.1f} days (ETTR {self.ettr:.1%}) is over the {self.days_limit:.1f} days the window "
                        f"allows ({cfg.window.days:g} days, margin {cfg.gates.config.min_window_margin:.0%}); lower "
                        f"plan.target_tokens, lengthen the window or add GPUs"
                    ),
                )
            )

        notes = list(self.notes)
        split_note = split_layers(cfg.model.layers, layout.pp, layout.vpp).note
        if split_note:
            notes.append(split_note)
        notes.extend(step.notes)
        notes.append(
            "MFU counts model FLOPs 6*(layer matmul params + h*V) + 6*l*h*s per token (causal attention, "
            "no recompute) over peak dense BF16"
        )
        notes.append(
            "ETTR = productive/elapsed time: Daly's expected wall time for unexpected failures "
            "(checkpoint writes, lost work, detect + restart) x share of time outside planned maintenance"
        )
        return Plan(
            gpus=gpus,
            nodes=-(-gpus // cl.gpus_per_node),
            layout={"tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "cp": layout.cp, "vpp": layout.vpp},
            parameters=self.parameters,
            memory_gib_per_gpu=mem_gib,
            memory_breakdown_gib=mem.gib(),
            step_time_s=step_s,
            step_breakdown_s=self.efficiency.breakdown(step) if self.calibration else step.breakdown(),
            comm_fraction=(
                max(
                    0.0,
                    min(1.0, 1.0 - self.efficiency.compute * (step.compute_s + step.optimizer_s) / step_s),
                )
                if self.calibration
                else step.comm_fraction
            ),
            mfu=mfu,
            tokens_per_step=tokens,
            tokens_per_s=tps,
            checkpoint=self.checkpoint,
            job_mtbf_h=self.job_mtbf_h,
            expected_ettr=self.ettr,
            expected_days=days,
            fits=not violations,
            violations=tuple(violations),
            notes=tuple(notes),
            micro_batch=micro_batch,
            micro_batches=m,
            hfu=hfu,
            memory_limit_gib=self.memory_limit_gib,
            window_days=cfg.window.days,
            step_time_range_s=(step_s * self.band()[0], step_s * self.band()[1]),
            basis=self.basis(),
            calibration=self.calibration,
        )


def _layout_dict(layout: LayoutConfig) -> dict[str, int]:
    return {"tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "cp": layout.cp, "vpp": layout.vpp}


def evaluate_layout(config: CampaignConfig, layout: LayoutConfig, micro_batch: int | None = None) -> Plan:
    """The plan for one candidate layout (micro_batch defaults to the config's)."""
    return PlanContext.from_config(config).plan(layout, micro_batch or config.plan.micro_batch)


def make_plan(config: CampaignConfig) -> Plan:
    """The plan for the config's own layout and micro-batch."""
    return evaluate_layout(config, config.plan.layout, config.plan.micro_batch)

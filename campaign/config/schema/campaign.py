"""The whole campaign config, its cross-section rules, and its digest."""

from __future__ import annotations

import hashlib
import json

from pydantic import Field, model_validator

from campaign.config.schema.base import (
    MAX_EXPECTED_FAILURES,
    MAX_POWER_SAMPLES,
    MAX_SEED,
    MAX_WINDOW_CHECKPOINTS,
    Frozen,
)
from campaign.config.schema.cluster import ClusterConfig
from campaign.config.schema.data import DataConfig
from campaign.config.schema.execute import ExecuteConfig
from campaign.config.schema.gates import CommitConfig, GatesConfig, RuntimeConfig, SimConfig
from campaign.config.schema.model import ModelConfig
from campaign.config.schema.plan import MEASURED_AGREEMENT, PlanConfig
from campaign.config.schema.rehearsal import RehearsalConfig
from campaign.config.schema.window import WindowConfig


class CampaignConfig(Frozen):
    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Campaign name (names the workspace)."
    )
    seed: int = Field(
        0, ge=0, le=MAX_SEED, description="Seed of every random stream (numpy SeedSequence), 0 to 2^53-1."
    )
    cluster: ClusterConfig
    model: ModelConfig
    plan: PlanConfig
    window: WindowConfig
    data: DataConfig
    gates: GatesConfig = GatesConfig()
    commit: CommitConfig = CommitConfig()
    sim: SimConfig = SimConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    rehearsal: RehearsalConfig = RehearsalConfig()
    execute: ExecuteConfig = ExecuteConfig()

    @model_validator(mode="after")
    def _layout_matches_cluster(self) -> CampaignConfig:
        # A leading "@dotted.path: " tells the loader which key (and so which file:line) to blame.
        lay, cl, m = self.plan.layout, self.cluster, self.model
        if lay.world != cl.gpus:
            raise ValueError(
                f"@plan.layout: tp x pp x dp x cp = {lay.tp}x{lay.pp}x{lay.dp}x{lay.cp} = {lay.world} GPUs, but "
                f"cluster has nodes x gpus_per_node = {cl.nodes}x{cl.gpus_per_node} = {cl.gpus}; "
                "change plan.layout.dp or cluster.nodes so they match"
            )
        if m.heads % lay.tp:
            raise ValueError(
                f"@plan.layout.tp: tp ({lay.tp}) must divide model.heads ({m.heads}); pick a divisor"
            )
        if m.seq_len % lay.cp:
            raise ValueError(f"@plan.layout.cp: cp ({lay.cp}) must divide model.seq_len ({m.seq_len})")
        if self.plan.global_batch_tokens % m.seq_len:
            raise ValueError(
                f"@plan.global_batch_tokens: {self.plan.global_batch_tokens} must be a multiple of "
                f"model.seq_len ({m.seq_len})"
            )
        sequences = self.plan.global_batch_tokens // m.seq_len
        per_replica = self.plan.micro_batch * lay.dp
        if sequences % per_replica:
            raise ValueError(
                f"@plan.global_batch_tokens: a global batch of {sequences} sequences is not divisible by "
                f"micro_batch x dp = {per_replica}; use a multiple of {per_replica * m.seq_len} tokens"
            )
        if lay.vpp > 1 and lay.pp == 1:
            raise ValueError("@plan.layout.vpp: vpp > 1 needs pp > 1 (interleaving splits pipeline stages)")
        self._check_measured_identity()
        for i, run in enumerate(self.plan.measured):
            where = f"@plan.measured.{i}"
            if run.layout.world != run.nodes * cl.gpus_per_node:
                raise ValueError(
                    f"{where}.layout: tp x pp x dp x cp = {run.layout.world} GPUs, but nodes x gpus_per_node = "
                    f"{run.nodes}x{cl.gpus_per_node} = {run.nodes * cl.gpus_per_node}; give the layout the run used"
                )
            if m.heads % run.layout.tp or m.seq_len % run.layout.cp:
                raise ValueError(
                    f"{where}.layout: tp must divide model.heads ({m.heads}) and cp model.seq_len ({m.seq_len}); "
                    "a measured run is of the same model"
                )
            per_replica = (run.micro_batch or self.plan.micro_batch) * run.layout.dp * m.seq_len
            if run.global_batch_tokens % per_replica:
                raise ValueError(
                    f"{where}.global_batch_tokens: {run.global_batch_tokens} is not a multiple of micro_batch x dp x "
                    f"seq_len = {per_replica}; give the batch the run used"
                )
        # Llama 3 put 126 layers on 16 x 8 virtual stages: embedding and output each take one stage's place.
        if m.layers + 2 < lay.pp * lay.vpp:
            raise ValueError(
                f"@plan.layout: pp x vpp = {lay.pp * lay.vpp} stages is more than model.layers + 2 = {m.layers + 2}; "
                "lower pp or vpp"
            )
        return self

    def _check_measured_identity(self) -> None:
        """A measured row of another model or stack is refused, naming both; rows of one layout whose step times
        contradict each other (beyond MEASURED_AGREEMENT) are named, not averaged."""
        stack = self.plan.stack.preset
        for i, run in enumerate(self.plan.measured):
            # a step of another model, pasted without its name, would calibrate this one
            if run.model is None:
                raise ValueError(
                    f"@plan.measured.{i}.model: name the model the run trained (model: {self.model.name} if it was "
                    "this config's model): a step time calibrates only the model it was measured on, and a row "
                    "without a name cannot be checked (campaign plan measure writes it)"
                )
            if run.model != self.model.name:
                raise ValueError(
                    f"@plan.measured.{i}.model: the run was measured on {run.model!r}, this config plans "
                    f"{self.model.name!r}; a step time of another model does not calibrate this one (remove the row, "
                    "or measure this model)"
                )
            if run.stack is not None and run.stack != stack:
                raise ValueError(
                    f"@plan.measured.{i}.stack: the run was measured on the {run.stack!r} stack, this config plans "
                    f"on {stack!r}; remove the row, or measure on this stack"
                )
        seen: dict[tuple[object, ...], int] = {}
        for i, run in enumerate(self.plan.measured):
            key = (
                run.nodes,
                run.layout.model_dump_json(),
                run.global_batch_tokens,
                run.micro_batch or self.plan.micro_batch,
            )
            j = seen.setdefault(key, i)
            first = self.plan.measured[j]
            ratio = max(run.step_time_s, first.step_time_s) / min(run.step_time_s, first.step_time_s)
            if j != i and ratio > MEASURED_AGREEMENT:
                raise ValueError(
                    f"@plan.measured.{i}.step_time_s: {run.step_time_s:g} s ({run.source}) and plan.measured[{j}]'s "
                    f"{first.step_time_s:g} s ({first.source}) measure the same layout, batch and nodes "
                    f"{ratio:.2f}x apart (more than the {MEASURED_AGREEMENT:g}x two measurements of one layout may "
                    "differ): they contradict each other; keep the one that stands for the run"
                )

    @model_validator(mode="after")
    def _representable(self) -> CampaignConfig:
        """Bounds that involve several fields: what the simulator can hold in memory and time."""
        window_h = self.window.days * 24.0
        nodes = self.cluster.nodes + self.cluster.spare_nodes
        expected = (
            sum(f.job_rate_per_hour(nodes, self.cluster.gpus_per_node) for f in self.cluster.failures)
            * window_h
        )
        expected += self.cluster.planned.per_day * self.window.days
        if not expected <= MAX_EXPECTED_FAILURES:
            raise ValueError(
                f"@cluster.failures: these rates give {expected:,.0f} expected interruptions in the "
                f"{self.window.days:g}-day window, more than the {MAX_EXPECTED_FAILURES:,} the simulator handles; "
                "check the units (per_gpu_year, per_1k_node_days, per_job_hour) or shorten the window"
            )
        interval = self.plan.checkpoint.interval_s
        if interval != "auto" and not interval < window_h * 3600.0:
            raise ValueError(
                f"@plan.checkpoint.interval_s: {interval:g} s is not shorter than the {self.window.days:g}-day window: "
                "no checkpoint could ever commit; use a shorter interval, 'auto', or a longer window.days"
            )
        if interval != "auto" and not window_h * 3600.0 / interval <= MAX_WINDOW_CHECKPOINTS:
            raise ValueError(
                f"@plan.checkpoint.interval_s: {interval:g} s gives more than {MAX_WINDOW_CHECKPOINTS:,} checkpoints "
                "in the window; use a longer interval or 'auto'"
            )
        if not window_h * 3600.0 / self.sim.power_sample_s <= MAX_POWER_SAMPLES:
            raise ValueError(
                f"@sim.power_sample_s: {self.sim.power_sample_s:g} s samples give more than {MAX_POWER_SAMPLES:,} "
                f"power samples over a {self.window.days:g}-day window; use at least "
                f"{window_h * 3600.0 / MAX_POWER_SAMPLES:.0f} s"
            )
        return self

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per step, m = B / (b * dp)."""
        return (
            self.plan.global_batch_tokens
            // self.model.seq_len
            // (self.plan.micro_batch * self.plan.layout.dp)
        )


def config_digest(config: CampaignConfig) -> str:
    """sha256 of the canonical JSON of the validated config (sources and descriptions included), without
    `execute:`."""
    # How a committed window is executed (`execute:`) is chosen at execute time and judged by no gate.
    canonical = json.dumps(
        config.model_dump(mode="json", by_alias=True, exclude={"execute"}),
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()

"""What the simulator needs, as one frozen record: cluster, job pace, checkpoint policy, power and cost.

The simulator never imports the plan package: the caller passes the step time, checkpoint times and the
communication share it got from the performance model; everything else comes from the campaign config.
Source: the config (configs/), docs/simulation-model.md; diurnal phase assumption below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from datetime import UTC

from campaign.config import CampaignConfig, FailureCategoryConfig, LoadedConfig
from campaign.errors import ConfigError

DAY_S = 86_400.0

# Hour of day (site clock) at which diurnal throughput is lowest: mid-afternoon heat makes GPUs clock down.
# Llama 3 §3.3.4 reports a 1-2% diurnal variation "from mid-day temperatures" but not its phase; 15:00 is
# our assumption. The window start's clock (UTC for a `Z` timestamp) is taken as the site clock.
DIURNAL_SLOWEST_HOUR = 15.0


@dataclass(frozen=True)
class SimInputs:
    """Everything one replica of the window needs. Times in seconds, power in watts, money in USD."""

    nodes: int
    gpus_per_node: int
    spare_nodes: int
    window_s: float
    step_time_s: float  # seconds per optimizer step at nominal speed (diurnal mean)
    tokens_per_step: int
    target_tokens: float  # the job stops when this many tokens are committed, else runs to window end
    checkpoint_write_s: float  # blocking seconds per checkpoint
    checkpoint_background_s: float  # async upload after the blocking part; a failure during it loses it
    checkpoint_interval_s: float  # productive seconds between checkpoints
    comm_fraction: float  # share of a step that is communication or pipeline bubble, 0..1
    failures: tuple[FailureCategoryConfig, ...]
    planned_per_day: float
    planned_duration_s: float
    diurnal_amplitude: float
    gpu_tdp_w: float
    gpu_idle_w: float
    node_overhead_w: float
    pue: float
    floor_fraction: float | None  # GPU power floor while the job runs, fraction of TDP; None = off
    ramp_mw_per_s: float | None  # facility ramp limit; None = off
    gpu_hour_usd: float
    energy_usd_per_mwh: float
    power_sample_s: float
    seed: int
    # Seconds after the window start at which diurnal throughput is lowest (see DIURNAL_SLOWEST_HOUR).
    diurnal_slowest_s: float = DIURNAL_SLOWEST_HOUR * 3600.0
    # False: the window is a snapshot of a longer run; the job trains to the window end whatever the target.
    stop_at_target: bool = True
    # True: a failure category carrying observed failures and exposure draws each replica's rate from its posterior.
    rate_uncertainty: bool = True
    # Lemon nodes among the job's nodes and spares (placed at random per replica), whose gpu- and node-scope
    # failures come at lemon_factor times the healthy rate the categories state.
    lemon_nodes: int = 0
    lemon_factor: float = 1.0
    # Retire a node at its quarantine_failures-th node-losing failure within quarantine_window_s (0: never).
    quarantine_failures: int = 0
    quarantine_window_s: float = 0.0

    def __post_init__(self) -> None:
        positive = (
            "nodes",
            "gpus_per_node",
            "window_s",
            "step_time_s",
            "tokens_per_step",
            "target_tokens",
            "checkpoint_interval_s",
            "gpu_tdp_w",
            "power_sample_s",
        )
        non_negative = (
            "spare_nodes",
            "checkpoint_write_s",
            "checkpoint_background_s",
            "planned_per_day",
            "planned_duration_s",
            "diurnal_amplitude",
            "gpu_idle_w",
            "node_overhead_w",
            "gpu_hour_usd",
            "energy_usd_per_mwh",
            "seed",
            "lemon_nodes",
            "quarantine_failures",
            "quarantine_window_s",
        )
        for name in positive:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                _bad(name, f"must be a positive finite number (got {value!r})", "pass a value above zero")
        for name in non_negative:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                _bad(name, f"must be a non-negative finite number (got {value!r})", "pass zero or more")
        if self.lemon_nodes > self.nodes + self.spare_nodes:
            _bad(
                "lemon_nodes",
                f"({self.lemon_nodes}) is more than nodes + spare_nodes ({self.nodes + self.spare_nodes})",
                "pass at most every node as a lemon",
            )
        if not (math.isfinite(self.lemon_factor) and self.lemon_factor >= 1.0):
            _bad("lemon_factor", f"must be at least 1 (got {self.lemon_factor})", "pass 1 for healthy lemons")
        if self.quarantine_failures > 0 and not self.quarantine_window_s > 0:
            _bad(
                "quarantine_window_s",
                f"must be positive with quarantine on (got {self.quarantine_window_s})",
                "pass the window, in seconds, the failures count over",
            )
        if not 0.0 <= self.comm_fraction <= 1.0:
            _bad(
                "comm_fraction",
                f"must lie in [0, 1] (got {self.comm_fraction})",
                "pass the communication and bubble share of a step",
            )
        if not 0.0 <= self.diurnal_amplitude < 0.5:
            _bad("diurnal_amplitude", f"must lie in [0, 0.5) (got {self.diurnal_amplitude})", "use e.g. 0.01")
        if self.pue < 1.0:
            _bad("pue", f"must be at least 1 (got {self.pue})", "facility power is IT power times PUE >= 1")
        if self.gpu_idle_w > self.gpu_tdp_w:
            _bad(
                "gpu_idle_w",
                f"({self.gpu_idle_w}) is above gpu_tdp_w ({self.gpu_tdp_w})",
                "set idle below TDP",
            )
        if self.floor_fraction is not None and not 0.0 <= self.floor_fraction <= 1.0:
            _bad(
                "floor_fraction",
                f"must lie in [0, 1] or be None (got {self.floor_fraction})",
                "pass a fraction of TDP, or None for no floor",
            )
        if self.ramp_mw_per_s is not None and not self.ramp_mw_per_s > 0:
            _bad(
                "ramp_mw_per_s",
                f"must be positive or None (got {self.ramp_mw_per_s})",
                "pass MW per second, or None for no ramp limit",
            )

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def spare_gpus(self) -> int:
        return self.spare_nodes * self.gpus_per_node

    @property
    def tokens_per_s(self) -> float:
        """Nominal training throughput (diurnal mean), tokens per second."""
        return self.tokens_per_step / self.step_time_s


def _bad(name: str, message: str, fix: str) -> None:
    raise ConfigError(f"{message}", where=f"SimInputs.{name}", fix=fix)


def sim_inputs_from_config(
    config: CampaignConfig | LoadedConfig,
    *,
    step_time_s: float,
    tokens_per_step: int,
    checkpoint_write_s: float,
    checkpoint_background_s: float,
    checkpoint_interval_s: float,
    comm_fraction: float,
) -> SimInputs:
    """Build SimInputs from a campaign config and the plan's step time, checkpoint times and comm share.

    Args:
        step_time_s: seconds per optimizer step at nominal speed.
        checkpoint_write_s: blocking seconds per checkpoint; checkpoint_background_s: async upload after it.
        checkpoint_interval_s: productive seconds between checkpoints.
        comm_fraction: share of a step spent in communication or pipeline bubble, 0..1.
    """
    cfg = config.config if isinstance(config, LoadedConfig) else config
    cluster = cfg.cluster
    window_s = cfg.window.days * DAY_S
    if checkpoint_interval_s + checkpoint_write_s > window_s:
        raise ConfigError(
            f"the window ({window_s:,.0f} s) is shorter than one checkpoint interval and its write "
            f"({checkpoint_interval_s:,.0f} s + {checkpoint_write_s:,.0f} s): no checkpoint could ever commit",
            where="window.days",
            fix="lengthen window.days or set plan.checkpoint.interval_s below the window",
        )
    smoothing = cfg.plan.power_smoothing
    start = cfg.window.fixed_start
    if start is not None:
        if start.tzinfo is not None:
            start = start.astimezone(UTC)
        start_of_day_s = start.hour * 3600.0 + start.minute * 60.0 + start.second + start.microsecond / 1e6
    else:
        start_of_day_s = 0.0  # not booked yet: simulated from midnight UTC (campaign.window.UNBOOKED_START)
    return SimInputs(
        nodes=cluster.nodes,
        gpus_per_node=cluster.gpus_per_node,
        spare_nodes=cluster.spare_nodes,
        window_s=cfg.window.days * DAY_S,
        step_time_s=float(step_time_s),
        tokens_per_step=int(tokens_per_step),
        target_tokens=float(cfg.plan.target_tokens),
        checkpoint_write_s=float(checkpoint_write_s),
        checkpoint_background_s=float(checkpoint_background_s),
        checkpoint_interval_s=float(checkpoint_interval_s),
        comm_fraction=float(comm_fraction),
        failures=tuple(cluster.failures),
        planned_per_day=cluster.planned.per_day,
        planned_duration_s=cluster.planned.duration_min * 60.0,
        diurnal_amplitude=cluster.diurnal_amplitude,
        gpu_tdp_w=cluster.accelerator.tdp_w,
        gpu_idle_w=cluster.accelerator.idle_w,
        node_overhead_w=cluster.power.node_overhead_w,
        pue=cluster.power.pue,
        floor_fraction=(smoothing.floor_fraction or None) if smoothing is not None else None,
        ramp_mw_per_s=smoothing.ramp_mw_per_s if smoothing is not None else None,
        gpu_hour_usd=cluster.cost.gpu_hour_usd,
        energy_usd_per_mwh=cluster.cost.energy_usd_per_mwh,
        power_sample_s=cfg.sim.power_sample_s,
        seed=cfg.seed,
        diurnal_slowest_s=(DIURNAL_SLOWEST_HOUR * 3600.0 - start_of_day_s) % DAY_S,
        stop_at_target=cfg.sim.stop_at_target,
        lemon_nodes=cluster.lemon_nodes,
        lemon_factor=cluster.lemons.factor,
        quarantine_failures=cluster.quarantine.after_failures,
        quarantine_window_s=cluster.quarantine.window_h * 3600.0,
    )


def describe_inputs(inputs: SimInputs) -> dict:
    """The inputs as a JSON-ready dict (failure categories as dicts), for logs and the catalog."""
    out: dict = {}
    for f in fields(inputs):
        value = getattr(inputs, f.name)
        out[f.name] = [c.model_dump(mode="json") for c in value] if f.name == "failures" else value
    return out

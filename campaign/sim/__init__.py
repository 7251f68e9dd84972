"""The discrete-event simulator of one execution window: failures, checkpoints, restarts, spares, power.

`simulate(inputs, replica)` runs one seeded replica; `summarise_replicas` turns many into percentiles.
Source: see each module (Llama 3 §3.3.4, Young 1974, Daly 2006, Choukse et al. 2025).
"""

from campaign.sim.events import Event, EventQueue
from campaign.sim.failures import (
    NODE_LOSING_SCOPES,
    expected_failures,
    expected_rework_s,
    job_failure_rate_per_s,
    random_streams,
)
from campaign.sim.fast import simulate_summary
from campaign.sim.inputs import SimInputs, describe_inputs, sim_inputs_from_config
from campaign.sim.power import (
    COMM_POWER_FRACTION,
    COMPUTE_POWER_FRACTION,
    PowerCurve,
    PowerLevels,
    one_second_series,
    power_levels,
    ramp_delay_s,
)
from campaign.sim.replicas import (
    check_replicas_fit,
    distribution,
    replica_batches,
    replica_table,
    replicas_memory_bytes,
    simulate_batch,
    simulate_replicas,
    summarise_replicas,
)
from campaign.sim.simulator import (
    BREAKDOWN_KEYS,
    EVENT_COLUMNS,
    EVENT_KINDS,
    SimResult,
    diurnal_multiplier,
    nominal_seconds,
    simulate,
)

__all__ = [
    "BREAKDOWN_KEYS",
    "COMM_POWER_FRACTION",
    "COMPUTE_POWER_FRACTION",
    "EVENT_COLUMNS",
    "EVENT_KINDS",
    "NODE_LOSING_SCOPES",
    "Event",
    "EventQueue",
    "PowerCurve",
    "PowerLevels",
    "SimInputs",
    "SimResult",
    "check_replicas_fit",
    "describe_inputs",
    "distribution",
    "diurnal_multiplier",
    "expected_failures",
    "expected_rework_s",
    "job_failure_rate_per_s",
    "nominal_seconds",
    "one_second_series",
    "power_levels",
    "ramp_delay_s",
    "random_streams",
    "replica_batches",
    "replica_table",
    "replicas_memory_bytes",
    "sim_inputs_from_config",
    "simulate",
    "simulate_batch",
    "simulate_replicas",
    "simulate_summary",
    "summarise_replicas",
]

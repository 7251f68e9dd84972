"""The discrete-event simulator of one execution window: failures, checkpoints, restarts, spares, power.

`simulate(inputs, replica)` runs one seeded replica; `summarise_replicas` turns many into percentiles.
Source: see each module (Llama 3 §3.3.4, Young 1974, Daly 2006, Choukse et al. 2025).
The names below are imported from their module on first use (PEP 562): reading a config's inputs or checking a
sweep does not import the compiled kernels, pandas and Numba.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from campaign.sim.diurnal import diurnal_multiplier, nominal_seconds
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
        simulate,
    )

_MODULE_OF = {
    "BREAKDOWN_KEYS": "simulator",
    "COMM_POWER_FRACTION": "power",
    "COMPUTE_POWER_FRACTION": "power",
    "EVENT_COLUMNS": "simulator",
    "EVENT_KINDS": "simulator",
    "Event": "events",
    "EventQueue": "events",
    "NODE_LOSING_SCOPES": "failures",
    "PowerCurve": "power",
    "PowerLevels": "power",
    "SimInputs": "inputs",
    "SimResult": "simulator",
    "check_replicas_fit": "replicas",
    "describe_inputs": "inputs",
    "distribution": "replicas",
    "diurnal_multiplier": "diurnal",
    "expected_failures": "failures",
    "expected_rework_s": "failures",
    "job_failure_rate_per_s": "failures",
    "nominal_seconds": "diurnal",
    "one_second_series": "power",
    "power_levels": "power",
    "ramp_delay_s": "power",
    "random_streams": "failures",
    "replica_batches": "replicas",
    "replica_table": "replicas",
    "replicas_memory_bytes": "replicas",
    "sim_inputs_from_config": "inputs",
    "simulate": "simulator",
    "simulate_batch": "replicas",
    "simulate_replicas": "replicas",
    "simulate_summary": "fast",
    "summarise_replicas": "replicas",
}

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


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once imported, an ordinary attribute
    return value

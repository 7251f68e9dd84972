"""Failure and planned-maintenance arrivals: one Poisson process per category, one random stream each.

A category fails at its rate per GPU, per node or per job-hour times the job's GPUs, nodes or 1, for as long
as the job holds its nodes (the whole window, until completion), including while it is already down: this is
how the rates were calibrated (Llama 3 counts interruptions over elapsed time). Scope says what a failure
costs: `gpu` and `node` take a node out for repair (a spare replaces it); `network` and `job` (software) lose
no node. A category whose rate carries the failures and exposure it was fitted from draws each replica's rate
from its posterior, Gamma(failures + 1/2, exposure) (Jeffreys prior), before its arrivals, so a window's spread
includes not knowing the rate (docs/failures.md). Planned maintenance is a Poisson process too (operators'
timing is not published). Arrivals are drawn up front, independent of the job's state, so two runs with the
same seed see the same failures whatever their spares or checkpoint policy (common random numbers).
A replica is a history: each source draws its arrivals in sequence from its own stream (exponential gaps, with
the slot each one hits, in fixed blocks of `ARRIVAL_BLOCK`, continued until past the horizon), so the arrivals
before any time t are the same whatever the horizon simulated, the window length or the other categories.
Lemon nodes (a few physical nodes, placed at random per replica from a stream of their own) fail at `factor`
times the healthy rate: each node-losing category has, beside its slot arrivals, the lemons' excess arrivals
aimed at a physical node (a stream of their own, so lemons leave the slot arrivals alone), which interrupt the
job only while that node holds one of its slots (thinning a Poisson process keeps it Poisson, so arrivals stay
drawn up front).
Source: Llama 3 Herd of Models (arXiv 2407.21783) §3.3.4 and Table 5; numpy SeedSequence.spawn; the Jeffreys
posterior of a Poisson rate (Gelman et al., Bayesian Data Analysis, 3rd ed., §2.6).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from campaign.config import FailureCategoryConfig
from campaign.sim.compiled import pcg64_stream_states
from campaign.sim.inputs import DAY_S, SimInputs

NODE_LOSING_SCOPES = frozenset({"gpu", "node"})

# Child index of each stream under SeedSequence([seed, replica]): planned maintenance first, then one per
# failure category in config order, so adding a category never changes the streams before it; after them the
# lemons' placement, then each category's lemon excess arrivals (only drawn when there are lemons).
PLANNED_STREAM = 0
FIRST_CATEGORY_STREAM = 1
# Arrivals a source draws at a time: its inter-arrival gaps (and their slots) come in blocks of this many, block
# after block until one passes the horizon. A fixed size keeps the sequence of draws, hence the history, the same
# whatever the horizon; 64 is one block for most categories of a 54-day Llama 3 window.
ARRIVAL_BLOCK = 64


@dataclass(frozen=True)
class Arrivals:
    """Arrival times (s) of one stochastic source; `slot` is the job node slot hit (-1 when none); `node`, when
    given, the physical node a lemon's excess failure hits (-1: the arrival hits `slot`)."""

    name: str
    scope: str
    t_s: np.ndarray
    slot: np.ndarray
    node: np.ndarray | None = None

    def nodes(self) -> np.ndarray:
        """The physical node each arrival aims at (-1 for slot arrivals)."""
        return np.full(self.t_s.size, -1, dtype=np.int64) if self.node is None else self.node


def random_streams(seed: int, replica: int, n_categories: int) -> list[np.random.Generator]:
    """One independent Generator per stochastic source: [planned, category 0, category 1, ...]."""
    children = np.random.SeedSequence([seed, replica]).spawn(FIRST_CATEGORY_STREAM + n_categories)
    return [np.random.Generator(np.random.PCG64(child)) for child in children]


def _uint32_words(n: int) -> list[int]:
    """A non-negative integer as SeedSequence reads it: 32-bit words, lowest first (0 is one word)."""
    words = [n & 0xFFFFFFFF]
    n >>= 32
    while n:
        words.append(n & 0xFFFFFFFF)
        n >>= 32
    return words


def stream_states(seed: int, replica: int, n_categories: int) -> list[Mapping[str, Any]]:
    """The bit generator states of `random_streams(seed, replica, n_categories)`, computed directly (compiled:
    the same SeedSequence and PCG64 seeding, ~10x faster than building the 19 objects of a Llama 3 replica)."""
    if seed < 0 or replica < 0:  # let NumPy raise its own error
        return [g.bit_generator.state for g in random_streams(seed, replica, n_categories)]
    entropy = np.array(_uint32_words(seed) + _uint32_words(replica), dtype=np.uint64)
    return [
        {
            "bit_generator": "PCG64",
            "state": {"state": (s_hi << 64) | s_lo, "inc": (i_hi << 64) | i_lo},
            "has_uint32": 0,
            "uinteger": 0,
        }
        for s_hi, s_lo, i_hi, i_lo in pcg64_stream_states(
            entropy, FIRST_CATEGORY_STREAM + n_categories
        ).tolist()
    ]


_THREAD = threading.local()


def _stream_generator() -> np.random.Generator:
    """This thread's Generator, set to each stream's state in turn by draw_arrivals (one per thread: replica
    batches run on threads)."""
    generator = getattr(_THREAD, "generator", None)
    if generator is None:
        generator = _THREAD.generator = np.random.Generator(np.random.PCG64(0))
    return generator


def category_rate_per_s(category: FailureCategoryConfig, inputs: SimInputs) -> float:
    """Failures per second of the whole job for one category (its rate x the job's GPUs, nodes or 1)."""
    return category.job_rate_per_hour(inputs.nodes, inputs.gpus_per_node) / 3600.0


# Shape added to the observed failures in a rate's posterior: Jeffreys' prior for a Poisson rate.
JEFFREYS_SHAPE = 0.5


def replica_rate_per_s(category: FailureCategoryConfig, inputs: SimInputs, rng: np.random.Generator) -> float:
    """One replica's rate of a category: drawn from its posterior (one gamma variate from the category's own
    stream) when it carries observed failures and exposure and `inputs.rate_uncertainty` is on, else the rate."""
    observed = category.observed
    if observed is None or not inputs.rate_uncertainty:
        return category_rate_per_s(category, inputs)
    unit_rate_per_h = rng.standard_gamma(observed.failures + JEFFREYS_SHAPE) / observed.exposure_h
    return unit_rate_per_h * category.units_per_job(inputs.nodes, inputs.gpus_per_node) / 3600.0


def job_failure_rate_per_s(inputs: SimInputs) -> float:
    """All unexpected failures per second of the job, every category together."""
    return sum(category_rate_per_s(c, inputs) for c in inputs.failures)


def expected_failures(inputs: SimInputs, exposure_s: float | None = None) -> float:
    """Closed form: mean number of unexpected failures in `exposure_s` (default: the whole window)."""
    return job_failure_rate_per_s(inputs) * (inputs.window_s if exposure_s is None else exposure_s)


def poisson_arrivals_s(
    rng: np.random.Generator, rate_per_s: float, horizon_s: float, mark: Callable[[int], None] | None = None
) -> np.ndarray:
    """Sorted arrival times of a homogeneous Poisson process on [0, horizon_s), drawn as a history.

    Exponential gaps in blocks of ARRIVAL_BLOCK, block after block until the last time reaches the horizon;
    `mark(n)`, when given, draws each block's marks (e.g. the slots hit) right after its gaps, from the same
    stream. The draws consumed depend on the horizon only through how many blocks run, never on what a block
    holds, so the arrivals before any time t are the same for every horizon past t.
    """
    if rate_per_s <= 0.0 or horizon_s <= 0.0:
        return np.empty(0)
    blocks = []
    last = 0.0
    while True:
        with np.errstate(over="ignore"):  # a vanishing rate's first gap is past any horizon (inf)
            t = last + np.cumsum(rng.standard_exponential(ARRIVAL_BLOCK)) / rate_per_s
        if mark is not None:
            mark(ARRIVAL_BLOCK)
        blocks.append(t)
        last = float(t[-1])
        if last >= horizon_s:
            break
    times = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
    return times[: int(np.searchsorted(times, horizon_s, side="left"))]


def _slot_arrivals(
    rng: np.random.Generator, rate_per_s: float, horizon_s: float, high: int
) -> tuple[np.ndarray, np.ndarray]:
    """Arrival times and, drawn with each block, a uniform integer in [0, high) per arrival (a slot or a lemon)."""
    marks: list[np.ndarray] = []
    t = poisson_arrivals_s(
        rng, rate_per_s, horizon_s, lambda n: marks.append(rng.integers(0, high, size=n, dtype=np.int64))
    )
    slot = np.concatenate(marks)[: t.size] if marks else np.empty(0, dtype=np.int64)
    return t, slot


def lemon_node_ids(inputs: SimInputs, replica: int) -> np.ndarray:
    """The physical nodes that are lemons in this replica (job nodes are 0..nodes-1, spares after them)."""
    if inputs.lemon_nodes == 0:
        return np.empty(0, dtype=np.int64)
    n = len(inputs.failures)
    rng = _stream_generator()
    rng.bit_generator.state = stream_states(inputs.seed, replica, n + 1)[FIRST_CATEGORY_STREAM + n]
    return _lemons(rng, inputs)


def _lemons(rng: np.random.Generator, inputs: SimInputs) -> np.ndarray:
    total = inputs.nodes + inputs.spare_nodes
    return np.sort(rng.choice(total, size=inputs.lemon_nodes, replace=False)).astype(np.int64)


def draw_arrivals(inputs: SimInputs, replica: int) -> tuple[Arrivals, list[Arrivals]]:
    """Planned maintenance and every failure category's arrivals over the window, for one replica."""
    # Each source draws from its own stream: random_streams' Generators, their states set on one Generator.
    # The lemons' placement, when there are lemons, has the stream after the categories', then each category's
    # excess arrivals one each.
    n = len(inputs.failures)
    has_lemons = inputs.lemon_nodes > 0 and inputs.lemon_factor > 1.0
    states = stream_states(inputs.seed, replica, n + (1 + n if has_lemons else 0))
    rng = _stream_generator()
    horizon = inputs.window_s
    lemons = np.empty(0, dtype=np.int64)
    if has_lemons:
        rng.bit_generator.state = states[FIRST_CATEGORY_STREAM + n]
        lemons = _lemons(rng, inputs)
    rng.bit_generator.state = states[PLANNED_STREAM]
    planned_t = poisson_arrivals_s(rng, inputs.planned_per_day / DAY_S, horizon)
    planned = Arrivals("planned", "", planned_t, np.full(planned_t.size, -1, dtype=np.int64))
    categories = []
    for i, category in enumerate(inputs.failures):
        rng.bit_generator.state = states[FIRST_CATEGORY_STREAM + i]
        rate_per_s = replica_rate_per_s(category, inputs, rng)
        if category.scope not in NODE_LOSING_SCOPES:
            t = poisson_arrivals_s(rng, rate_per_s, horizon)
            categories.append(Arrivals(category.name, category.scope, t, np.full(t.size, -1, dtype=np.int64)))
            continue
        t, slot = _slot_arrivals(rng, rate_per_s, horizon, inputs.nodes)
        if lemons.size == 0:
            categories.append(Arrivals(category.name, category.scope, t, slot))
            continue
        # Each lemon fails at factor x the healthy node's rate: its slot share of `t`, plus this excess.
        rng.bit_generator.state = states[FIRST_CATEGORY_STREAM + n + 1 + i]
        excess_per_s = rate_per_s / inputs.nodes * (inputs.lemon_factor - 1.0) * lemons.size
        extra_t, which = _slot_arrivals(rng, excess_per_s, horizon, lemons.size)
        extra_node = lemons[which]
        order = np.argsort(np.concatenate([t, extra_t]), kind="stable")
        categories.append(
            Arrivals(
                category.name,
                category.scope,
                np.concatenate([t, extra_t])[order],
                np.concatenate([slot, np.full(extra_t.size, -1, dtype=np.int64)])[order],
                np.concatenate([np.full(t.size, -1, dtype=np.int64), extra_node])[order],
            )
        )
    return planned, categories


def expected_rework_s(interval_s: float, rate_per_s: float) -> float:
    """Closed form: mean productive seconds lost per failure that strikes a running job.

    With checkpoints every `interval_s` productive seconds (instant writes) and failures at `rate_per_s`
    restarting the clock, the time since the last checkpoint is X mod tau with X ~ Exp(rate):
    E = 1/rate - tau e^(-rate tau) / (1 - e^(-rate tau)), which tends to tau/2 when rate x tau is small.
    """
    if rate_per_s <= 0.0:
        return interval_s / 2.0
    x = rate_per_s * interval_s
    return 1.0 / rate_per_s - interval_s * np.exp(-x) / (-np.expm1(-x))

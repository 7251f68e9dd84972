"""Per-GPU memory beside the figures production runs publish (docs/plan-model.md#memory-against-published-per-gpu-figures).

Only BLOOM 176B publishes a per-GPU figure: "one copy of the model takes 48 GPUs (using 60 GB of memory on each
GPU)" (BigScience's 176B model page; the run: tests/oracles/production_runs.py). Every production run ran, so each
published layout is also an upper bound: the model's figure must fit the accelerator it ran on, or the memory gate
would refuse a layout that trained for months.
"""

from __future__ import annotations

import pytest

from campaign.plan import make_plan
from campaign.plan.memory import GIB
from tests.oracles.production_runs import all_production_runs, bloom_176b

BLOOM_PUBLISHED_GIB = 60e9 / GIB  # "60 GB of memory on each GPU", a round figure: +-5 GB
# The model counts Megatron's allocations and the framework's overheads; what the GPUs showed also holds what
# Megatron-DeepSpeed's BF16 optimizer adds (a bf16 gradient per parameter beside the fp32 one, 2 B/param) and what
# the caching allocator reserves beyond its allocations (GMLake's mean 15 %). The published figure is rounded to
# the nearest 10 GB (+-8 %) and the fragmentation ranges 15-33 % (+-6 % of the total): 15 % covers both.
BLOOM_ITEMIZED_TOLERANCE = 0.15


@pytest.mark.parametrize("run", all_production_runs(), ids=lambda r: r.name)
def test_every_published_layout_fits_the_accelerator_it_ran_on(run) -> None:
    plan = make_plan(run.config)
    assert plan.memory_gib_per_gpu <= run.config.cluster.accelerator.hbm_gib, plan.memory_breakdown_gib


def test_bloom_per_gpu_memory_is_below_the_published_figure_by_what_the_model_leaves_out() -> None:
    (run,) = bloom_176b()
    plan = make_plan(run.config)
    gib = plan.memory_breakdown_gib
    assert plan.memory_gib_per_gpu < BLOOM_PUBLISHED_GIB  # never above what the GPUs showed
    bf16_gradients = gib["weights"]  # 2 B/param, as the bf16 weights
    transient = gib["activations"] + gib["activation_gradients"] + gib["communication"] + gib["other"]
    fragmentation = transient * 0.15 / 0.85
    itemized = plan.memory_gib_per_gpu + bf16_gradients + fragmentation
    assert itemized == pytest.approx(BLOOM_PUBLISHED_GIB, rel=BLOOM_ITEMIZED_TOLERANCE)

"""The compiled replica kernels release the GIL, which is what lets the simulate flow batch replicas on threads
(flows/simulate.py) and keep every core busy; and batches on threads give the same summaries as one batch."""

from concurrent.futures import ThreadPoolExecutor

from numba.core.registry import CPUDispatcher

from campaign.config import load_config
from campaign.sim import compiled, simulate_batch
from campaign.window import window_inputs
from tests.helpers.paths import DEMO


def test_every_kernel_is_compiled_without_the_gil():
    kernels = {name: f for name, f in vars(compiled).items() if isinstance(f, CPUDispatcher)}
    assert {"run_replica", "curve_stats", "coalesce", "rate_limited"} <= set(kernels)
    assert [name for name, f in kernels.items() if not f.targetoptions.get("nogil")] == []


def test_batches_on_threads_equal_one_batch():
    inputs = window_inputs(load_config(DEMO, ["seed=5"]).config)
    with ThreadPoolExecutor(2) as pool:
        halves = list(pool.map(lambda r: simulate_batch(inputs, r), [range(6), range(6, 12)]))
    assert halves[0] + halves[1] == simulate_batch(inputs, range(12))

"""The compiled kernels' build options: helpers that only touch their caller's arrays skip the Numba runtime's
reference counting (an atomic incref and decref per array argument per call was 80% of the event loop), and the
runtime stays on where an array is allocated."""

from numba.core.registry import CPUDispatcher

from campaign.sim import compiled, compiled_curve, compiled_streams, compiled_time

ALLOCATING = {"run_replica", "coalesce", "rate_limited", "pcg64_stream_states", "_grown"}


def _kernels() -> dict[str, CPUDispatcher]:
    modules = (compiled, compiled_curve, compiled_streams, compiled_time)
    return {name: f for m in modules for name, f in vars(m).items() if isinstance(f, CPUDispatcher)}


def test_helpers_skip_reference_counting_and_allocating_kernels_keep_it():
    kernels = _kernels()
    assert set(kernels) >= ALLOCATING
    with_runtime = {name for name, f in kernels.items() if f.targetoptions.get("_nrt", True)}
    assert with_runtime <= ALLOCATING
    assert {"_run_events", "_push", "_pop", "_sift_down", "_before", "_second_value", "curve_stats"} <= (
        set(kernels) - with_runtime
    )

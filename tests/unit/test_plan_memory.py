"""The memory gate's framework overheads: NCCL buffers, the CUDA context and cuBLAS workspace, and the caching
allocator's fragmentation, each its own line of the breakdown from a documented `plan.memory` setting
(docs/plan-model.md#memory-as-the-framework-allocates-it)."""

from __future__ import annotations

import pytest

from campaign.config import MemoryOverheadsConfig, load_config
from campaign.plan import make_plan
from campaign.plan.memory import (
    GIB,
    MIB,
    MemoryModel,
    cuda_context_bytes,
    nccl_buffer_bytes,
    nccl_communicators,
)
from tests.helpers.paths import DEMO, LLAMA


def test_the_defaults_are_the_documented_figures() -> None:
    """NCCL: 4 MiB Simple (NCCL_BUFFSIZE), 4,915,200 B LL128 and 524,288 B LL per connection (NCCL src/init.cc);
    the CUDA context 287,047,680 B with lazy loading (PyTorch pull request 86509); cuBLAS 32 MiB on Hopper."""
    m = MemoryOverheadsConfig()
    assert m.nccl_buffsize_mib * MIB == 4 * 2**20
    assert m.nccl_ll128_buffsize_mib * MIB == 120 * 640 * 8 * 8
    assert m.nccl_ll_buffsize_mib * MIB == 8 * 512 * 8 * 16
    assert m.cuda_context_mib == pytest.approx(287_047_680 / 2**20, abs=0.5)
    assert cuda_context_bytes(m) == (m.cuda_context_mib + 32) * MIB


@pytest.mark.parametrize(
    ("layout", "groups"),
    [((1, 1, 1, 1), 0), ((8, 1, 1, 1), 1), ((8, 16, 128, 1), 3), ((8, 16, 8, 16), 4), ((1, 1, 64, 1), 1)],
)
def test_nccl_counts_one_communicator_per_parallel_group(layout: tuple[int, ...], groups: int) -> None:
    tp, pp, dp, cp = layout
    assert nccl_communicators(tp, pp, dp, cp) == groups
    m = MemoryOverheadsConfig()
    per_connection = (4 + 4.6875 + 0.5) * MIB
    assert nccl_buffer_bytes(groups, m) == pytest.approx(groups * 16 * 2 * per_connection, rel=1e-12)


def test_each_overhead_is_its_own_line_and_the_lines_sum_to_the_total() -> None:
    plan = make_plan(load_config(LLAMA).config)
    gib = plan.memory_breakdown_gib
    assert gib["nccl"] == pytest.approx(3 * 16 * 2 * (4 + 4.6875 + 0.5) / 1024, rel=1e-9)  # tp, pp, dp
    assert gib["cuda_context"] == pytest.approx((274 + 32) / 1024, rel=1e-9)
    assert gib["allocator"] == 0.0
    assert plan.memory_gib_per_gpu == pytest.approx(sum(gib.values()), rel=1e-12)
    assert {"nccl", "cuda_context", "allocator"} <= set(plan.to_json()["memory_breakdown_gib"])


def test_the_settings_move_their_own_line_and_the_memory_gate() -> None:
    base = make_plan(load_config(DEMO).config)
    more = make_plan(
        load_config(
            DEMO,
            [
                "plan.memory.nccl_channels=32",
                "plan.memory.cuda_context_mib=636",
                "plan.memory.nccl_buffsize_mib=8",
            ],
        ).config
    )
    b, m = base.memory_breakdown_gib, more.memory_breakdown_gib
    assert m["nccl"] == pytest.approx(b["nccl"] * 2 * (8 + 4.6875 + 0.5) / (4 + 4.6875 + 0.5), rel=1e-9)
    assert m["cuda_context"] - b["cuda_context"] == pytest.approx((636 - 274) / 1024, rel=1e-9)
    assert more.memory_gib_per_gpu - base.memory_gib_per_gpu == pytest.approx(
        m["nccl"] - b["nccl"] + m["cuda_context"] - b["cuda_context"], rel=1e-9
    )
    limit = [
        "gates.config.max_memory_fraction=0.3"
    ]  # 24 GiB of 80: the demo's 16 GiB fits, 16 GiB more does not
    assert not any(v.rule == "memory" for v in make_plan(load_config(DEMO, limit).config).violations)
    tight = load_config(DEMO, [*limit, "plan.memory.cuda_context_mib=16000"]).config
    assert any(v.rule == "memory" for v in make_plan(tight).violations)


def test_fragmentation_is_only_the_caching_allocators() -> None:
    """NCCL and the CUDA context allocate outside PyTorch's caching allocator: fragmentation never scales them."""
    cfg = load_config(LLAMA).config
    overheads = MemoryOverheadsConfig(cuda_context_mib=1000, nccl_channels=32)
    shape = {"tp": 8, "pp": 16, "dp": 128, "cp": 1, "vpp": 8, "micro_batch": 1, "micro_batches": 16}
    plain = MemoryModel(cfg.model, zero_stage=1, recompute="selective", overheads=overheads).estimate(**shape)
    model = MemoryModel(
        cfg.model, zero_stage=1, recompute="selective", allocator_fragmentation=0.2, overheads=overheads
    )
    frag = model.estimate(**shape)
    transient = plain.activations + plain.activation_gradients + plain.communication + plain.other
    assert frag.allocator == pytest.approx(transient * 0.2 / 0.8, rel=1e-12)
    assert (frag.nccl, frag.cuda_context) == (plain.nccl, plain.cuda_context)
    assert model.total_bytes(8, 16, 128, 1, 8, 1, 16) == pytest.approx(frag.total, rel=1e-12)
    assert frag.total / GIB == pytest.approx(sum(frag.gib().values()), rel=1e-12)


def test_the_memory_gate_names_the_framework_overheads_it_counts() -> None:
    from campaign.gates import plan_gates

    plan = make_plan(load_config(DEMO).config)
    (memory,) = [g for g in plan_gates(plan, []) if g.gate == "memory"]
    gib = plan.memory_breakdown_gib
    assert memory.passed
    assert memory.summary == (
        f"{plan.memory_gib_per_gpu:.1f} GiB per GPU (framework: NCCL {gib['nccl']:.2f}, CUDA context "
        f"{gib['cuda_context']:.2f}, allocator {gib['allocator']:.2f} GiB)"
    )

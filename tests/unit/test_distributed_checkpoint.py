"""The distributed reference trainer's sharded checkpoint and its shard-ordered gradient sum (no JAX needed)."""

import json

import numpy as np
import pytest

from campaign.rehearsal.distributed import (
    MANIFEST,
    complete_checkpoints,
    load_sharded,
    seal_checkpoint,
    shard_sum,
    staging_folder,
    write_part,
)
from campaign.rehearsal.trainer import UsageError


def _leaves(n: int = 7) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal((i + 1, 3)).astype(np.float32) for i in range(n)]


def _save(directory, step, world, leaves, shards=3):
    shas = [write_part(directory, step, r, world, leaves) for r in range(world)]
    return seal_checkpoint(
        directory, step, world, len(leaves), shas, {"data_position": step * 6, "shards": shards}
    )


@pytest.mark.parametrize("world", [1, 2, 3])
def test_a_checkpoint_written_by_any_world_restores_every_leaf(tmp_path, world):
    leaves = _leaves()
    _save(tmp_path, 10, world, leaves)
    meta, restored = load_sharded(tmp_path, len(leaves), 3)
    assert meta["step"] == 10 and meta["world"] == world and len(meta["parts"]) == world
    assert all(np.array_equal(a, b) for a, b in zip(leaves, restored, strict=True))


def test_a_checkpoint_is_complete_only_with_its_manifest_and_every_part(tmp_path):
    leaves = _leaves()
    _save(tmp_path, 10, 3, leaves)
    # step 20: two of three parts written, no manifest (a rank killed mid-checkpoint): not a checkpoint
    for r in range(2):
        write_part(tmp_path, 20, r, 3, leaves)
    assert [p.name for p in complete_checkpoints(tmp_path)] == ["step_00000010"]
    assert staging_folder(tmp_path, 20).exists()
    assert load_sharded(tmp_path, len(leaves), 3)[0]["step"] == 10
    # a part that does not match its manifest: the older checkpoint is used
    _save(tmp_path, 30, 3, leaves)
    (tmp_path / "step_00000030" / "part-00001.npz").write_bytes(b"damaged")
    assert load_sharded(tmp_path, len(leaves), 3)[0]["step"] == 10


def test_another_layout_is_refused_with_the_variable_to_set(tmp_path):
    leaves = _leaves()
    _save(tmp_path, 10, 2, leaves, shards=2)
    with pytest.raises(UsageError, match="CAMPAIGN_DIST_SHARDS"):
        load_sharded(tmp_path, len(leaves), 3)
    manifest = json.loads((tmp_path / "step_00000010" / MANIFEST).read_text())
    assert manifest["parts"][1]["leaves"] == [1, 3, 5]


def test_the_shard_sum_is_the_same_bits_for_every_world_size():
    rng = np.random.default_rng(0)
    shards = rng.standard_normal((5, 101)).astype(np.float32) * 1e3
    sums = []
    for world in (1, 2, 3, 5):
        slots = -(-5 // world)
        gathered = np.zeros((world, slots, 101), np.float32)
        for s in range(5):
            gathered[s % world, s // world] = shards[s]
        sums.append(shard_sum(gathered, 5, world))
    assert all(np.array_equal(sums[0], s) for s in sums[1:])

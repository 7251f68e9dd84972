"""The reference trainer, data-parallel: `python -m campaign.rehearsal.distributed`, one process per node.

The same model, optimizer and data order as `campaign.rehearsal.trainer` (the trainer contract), trained by
`world` processes that meet over JAX's multi-process CPU collectives (gloo, over TCP). Each step's B rows (rows
(k-1) x B .. k x B - 1 of the training file, the contract's order) are cut into `shards` equal gradient shards,
the layout; rank r computes the gradients of shards r, r + world, ... (more than one when the world has shrunk
below the layout: gradient accumulation, so the global batch stays B). One all-gather brings every shard's
gradient and loss to every rank, which sums them in shard order: the sum is the same bits on every rank and for
every world size of the same layout, so every rank applies the same update, and a run that shrank or restarted
computes what the uninterrupted run computed.

A checkpoint is sharded: rank r writes the leaves i of the state with i mod world = r into `part-RRRRR.npz` of a
staging folder (a temporary file, fsynced, renamed); an all-gather of the parts' sha256 is the barrier after
which rank 0 writes `manifest.json` (step, data position, layout, every part and its leaves and sha256) the same
way, and renames the folder to `step_XXXXXXXX/`. So a checkpoint is complete only when every part and its manifest
are on disk; a kill leaves a staging folder the next start deletes. Any world size restores it (every rank reads
every part), provided the layout and the model are the same.

Environment, beyond the contract's: `CAMPAIGN_DIST_COORDINATOR` (host:port of rank 0's rendezvous, when world > 1),
`CAMPAIGN_DIST_WORLD` and `CAMPAIGN_DIST_RANK` (else Slurm's `SLURM_NTASKS` and `SLURM_PROCID`; else 1 and 0),
`CAMPAIGN_DIST_SHARDS` (the layout; default the world), `CAMPAIGN_DIST_RANKS_DIR` (each rank appends a line per
step there, its heartbeat: the step and the seconds it computed before the collective), and
`CAMPAIGN_DIST_SLOW` (`NODE=SECONDS,...`: that node's rank sleeps so long each step, a straggler on purpose).
Rank 0 writes the contract's metrics file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from campaign.rehearsal import contract as c
from campaign.rehearsal.trainer import (
    CHECKPOINT_PREFIX,
    KEEP_CHECKPOINTS,
    MAX_EVAL_BATCHES,
    TrainerSettings,
    UsageError,
    append_metric,
    batch_rows,
    load_tokens,
    make_optimizer,
    settings_from_env,
)

ENV_COORDINATOR = "CAMPAIGN_DIST_COORDINATOR"
ENV_WORLD = "CAMPAIGN_DIST_WORLD"
ENV_RANK = "CAMPAIGN_DIST_RANK"
ENV_SHARDS = "CAMPAIGN_DIST_SHARDS"
ENV_RANKS_DIR = "CAMPAIGN_DIST_RANKS_DIR"
ENV_SLOW = "CAMPAIGN_DIST_SLOW"
MANIFEST = "manifest.json"
STAGING = ".staging-"


@dataclass(frozen=True)
class Topology:
    """Who this process is in the job: its rank, the world, the layout, where it reports and how slow it is."""

    rank: int
    world: int
    shards: int
    coordinator: str
    node: str
    ranks_dir: Path | None
    slow_s: float


def topology_from_env(env: dict[str, str], batch: int) -> Topology:
    """Read the distributed variables; raises UsageError naming a bad one."""

    def integer(names: tuple[str, ...], default: int, minimum: int) -> int:
        for name in names:
            raw = env.get(name)
            if raw:
                try:
                    value = int(raw)
                except ValueError:
                    raise UsageError(f"{name}={raw!r} is not an integer") from None
                if value < minimum:
                    raise UsageError(f"{name}={value} must be at least {minimum}")
                return value
        return default

    world = integer((ENV_WORLD, "SLURM_NTASKS"), 1, 1)
    rank = integer((ENV_RANK, "SLURM_PROCID"), 0, 0)
    if rank >= world:
        raise UsageError(f"rank {rank} is not below the world size {world} ({ENV_RANK}, {ENV_WORLD})")
    shards = integer((ENV_SHARDS,), world, 1)
    if batch % shards:
        raise UsageError(
            f"{ENV_SHARDS}={shards} does not divide {c.ENV_BATCH_SEQUENCES}={batch}: each gradient shard "
            "takes B / shards rows"
        )
    coordinator = env.get(ENV_COORDINATOR, "")
    if world > 1 and not coordinator:
        raise UsageError(f"{ENV_COORDINATOR} (host:port of rank 0) is needed for {world} processes")
    node = env.get("SLURMD_NODENAME") or env.get("CAMPAIGN_EXECUTE_NODE") or socket.gethostname()
    slow_s = 0.0
    for item in filter(None, env.get(ENV_SLOW, "").split(",")):
        name, _, seconds = item.partition("=")
        try:
            if name.strip() == node:
                slow_s = float(seconds)
        except ValueError:
            raise UsageError(f"{ENV_SLOW}: {item!r} is not NODE=SECONDS") from None
    ranks_dir = Path(env[ENV_RANKS_DIR]) if env.get(ENV_RANKS_DIR) else None
    return Topology(rank, world, shards, coordinator, node, ranks_dir, slow_s)


# ------------------------------------------------------------------------------------------ checkpoints


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def staging_folder(directory: Path, step: int) -> Path:
    return directory / f"{STAGING}{CHECKPOINT_PREFIX}{step:08d}"


def write_part(directory: Path, step: int, rank: int, world: int, leaves: list[np.ndarray]) -> str:
    """This rank's part of the checkpoint of `step` (leaves i with i mod world = rank), atomically; its sha256."""
    staging = staging_folder(directory, step)
    staging.mkdir(parents=True, exist_ok=True)
    import io

    buffer = io.BytesIO()
    mine = {f"leaf_{i:05d}": leaf for i, leaf in enumerate(leaves) if i % world == rank}
    np.savez(buffer, **mine)  # type: ignore[arg-type]  # names are leaf_NNNNN only
    data = buffer.getvalue()
    _write_atomic(staging / f"part-{rank:05d}.npz", data)
    return hashlib.sha256(data).hexdigest()


def seal_checkpoint(
    directory: Path, step: int, world: int, n_leaves: int, shas: list[str], meta: dict[str, Any]
) -> Path:
    """Rank 0, once every part is on disk: the manifest, then the folder renamed complete; keeps the last two."""
    staging, final = staging_folder(directory, step), directory / f"{CHECKPOINT_PREFIX}{step:08d}"
    manifest = {
        **meta,
        "step": step,
        "world": world,
        "n_leaves": n_leaves,
        "parts": [
            {
                "file": f"part-{r:05d}.npz",
                "sha256": shas[r],
                "leaves": [i for i in range(n_leaves) if i % world == r],
            }
            for r in range(world)
        ],
    }
    _write_atomic(staging / MANIFEST, json.dumps(manifest, indent=1).encode())
    _fsync_dir(staging)
    if final.exists():  # a checkpoint of this step from an earlier start: replaced whole
        shutil.rmtree(final)
    os.replace(staging, final)
    _fsync_dir(directory)
    for old in complete_checkpoints(directory)[:-KEEP_CHECKPOINTS]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def complete_checkpoints(directory: Path) -> list[Path]:
    """Checkpoint folders with a manifest, oldest first."""
    if not directory.exists():
        return []
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX) and (p / MANIFEST).exists()
    )


def load_sharded(
    directory: Path, n_leaves: int, shards: int
) -> tuple[dict[str, Any], list[np.ndarray]] | None:
    """The newest checkpoint whose every part matches its manifest's sha256, whatever world wrote it; raises
    UsageError if it was written for another layout."""
    for path in reversed(complete_checkpoints(directory)):
        try:
            manifest = json.loads((path / MANIFEST).read_text())
            blobs = [(part, (path / part["file"]).read_bytes()) for part in manifest["parts"]]
        except (OSError, json.JSONDecodeError, KeyError):
            sys.stderr.write(f"trainer: skipping damaged checkpoint {path}\n")
            continue
        if any(hashlib.sha256(blob).hexdigest() != part["sha256"] for part, blob in blobs):
            sys.stderr.write(f"trainer: skipping checkpoint {path}: a part does not match its manifest\n")
            continue
        if manifest.get("n_leaves") != n_leaves or manifest.get("shards") != shards:
            raise UsageError(
                f"{path} holds {manifest.get('n_leaves')} leaves in {manifest.get('shards')} gradient shards; this "
                f"run has {n_leaves} in {shards} ({ENV_SHARDS}): restore with the layout it was written with"
            )
        import io

        leaves: list[np.ndarray | None] = [None] * n_leaves
        for part, blob in blobs:
            with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
                for i in part["leaves"]:
                    leaves[i] = npz[f"leaf_{i:05d}"]
        if any(leaf is None for leaf in leaves):
            sys.stderr.write(f"trainer: skipping checkpoint {path}: its parts miss a leaf\n")
            continue
        return manifest, [leaf for leaf in leaves if leaf is not None]
    return None


# ---------------------------------------------------------------------------------------------- training


def shard_sum(gathered: np.ndarray, shards: int, world: int) -> np.ndarray:
    """The sum over shards, in shard order, of `gathered[rank, slot]` (shard s is rank s mod world's slot
    s div world): the same bits whatever the world size."""
    total = np.array(gathered[0, 0], copy=True)
    for s in range(1, shards):
        total = total + gathered[s % world, s // world]
    return total


def train(settings: TrainerSettings, topo: Topology) -> int:
    """Run (or resume) this rank's part of the data-parallel training; returns the last step trained."""
    import jax

    jax.config.update("jax_platforms", "cpu")
    cache_dir = os.environ.get(c.ENV_CACHE_DIR)
    if cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(Path(cache_dir) / "jax"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    if topo.world > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=topo.coordinator,
            num_processes=topo.world,
            process_id=topo.rank,
            initialization_timeout=120,
            heartbeat_timeout_seconds=30,
        )
    try:
        return _train(settings, topo)
    finally:
        if topo.world > 1:
            jax.distributed.shutdown()


def _train(settings: TrainerSettings, topo: Topology) -> int:
    import jax
    import jax.numpy as jnp
    import optax
    from jax.experimental import multihost_utils
    from jax.flatten_util import ravel_pytree

    from campaign.rehearsal.transformer import TransformerShape, init_params, loss

    b = settings.batch_sequences
    train_tokens = load_tokens(settings.train, settings.vocab, "training")
    if train_tokens.shape[0] < settings.steps * b:
        raise UsageError(f"{settings.train}: {train_tokens.shape[0]} rows, fewer than {settings.steps} x {b}")
    heldout_tokens = load_tokens(settings.heldout, settings.vocab, "held-out")
    shape = TransformerShape(vocab=settings.vocab, **settings.model)
    optimizer = make_optimizer(settings)
    params = init_params(shape, jax.random.PRNGKey(settings.seed))
    opt_state = optimizer.init(params)
    state_leaves, treedef = jax.tree_util.tree_flatten((params, opt_state))
    _, unravel = ravel_pytree(params)
    lead = topo.rank == 0

    directory = settings.checkpoint_dir
    directory.mkdir(parents=True, exist_ok=True)
    if lead:
        for p in directory.glob(f"{STAGING}*"):  # a kill mid-checkpoint: incomplete by construction
            shutil.rmtree(p, ignore_errors=True)
    start = 0
    restored = load_sharded(directory, len(state_leaves), topo.shards)
    if restored is not None:
        meta, leaves = restored
        if meta["data_position"] != meta["step"] * b:
            raise UsageError(f"checkpoint step {meta['step']} has data position {meta['data_position']}")
        params, opt_state = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(x) for x in leaves])
        start = int(meta["step"])
        if lead:
            append_metric(settings.metrics, {"event": "resumed", "step": start})
    beat = None
    if topo.ranks_dir is not None:
        topo.ranks_dir.mkdir(parents=True, exist_ok=True)
        beat = topo.ranks_dir / f"rank-{topo.rank:05d}.jsonl"
        append_metric(
            beat,
            {
                "event": "up",
                "rank": topo.rank,
                "world": topo.world,
                "node": topo.node,
                "pid": os.getpid(),
                "step": start,
            },
        )

    def shard_grad(params: Any, batch: jax.Array) -> tuple[jax.Array, jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, batch, shape)
        flat, _ = ravel_pytree(grads)
        return flat, value

    def apply(params: Any, opt_state: Any, flat: jax.Array) -> tuple[Any, Any]:
        updates, opt_state = optimizer.update(unravel(flat), opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    grad_fn, apply_fn = jax.jit(shard_grad), jax.jit(apply)
    eval_loss = jax.jit(lambda p, x: loss(p, x, shape))
    n_eval = min(heldout_tokens.shape[0] // b, MAX_EVAL_BATCHES) * b if heldout_tokens.shape[0] >= b else 0
    eval_batches = [jnp.asarray(heldout_tokens[i : i + b].astype(np.int32)) for i in range(0, n_eval, b)] or [
        jnp.asarray(heldout_tokens.astype(np.int32))
    ]

    def evaluate(step: int) -> None:
        values = [float(eval_loss(params, x)) for x in eval_batches]
        append_metric(settings.metrics, {"step": step, "heldout_loss": float(np.mean(values))})

    if start == 0 and lead:
        evaluate(0)
    size = b // topo.shards
    mine = list(range(topo.rank, topo.shards, topo.world))
    slots = -(-topo.shards // topo.world)
    tokens_per_step = b * (train_tokens.shape[1] - 1)
    for step in range(start + 1, settings.steps + 1):
        began = time.perf_counter()
        rows = train_tokens[batch_rows(step, b)].astype(np.int32)
        local: list[np.ndarray] = []
        for s in mine:
            flat, value = grad_fn(params, jnp.asarray(rows[s * size : (s + 1) * size]))
            local.append(np.concatenate([np.asarray(flat), np.asarray(value, dtype=np.float32)[None]]))
        while len(local) < slots:
            local.append(np.zeros_like(local[0]))
        if topo.slow_s:
            time.sleep(topo.slow_s)
        compute_s = time.perf_counter() - began
        stacked = np.stack(local)
        gathered = np.asarray(multihost_utils.process_allgather(stacked)) if topo.world > 1 else stacked[None]
        mean = shard_sum(gathered, topo.shards, topo.world) / np.float32(topo.shards)
        params, opt_state = apply_fn(params, opt_state, jnp.asarray(mean[:-1]))
        if beat is not None:
            append_metric(beat, {"step": step, "compute_s": round(compute_s, 6), "t": time.time()})
        if lead:
            append_metric(
                settings.metrics, {"step": step, "loss": float(mean[-1]), "tokens": tokens_per_step}
            )
            if step % settings.eval_every == 0 or step == settings.steps:
                evaluate(step)
        if step % settings.checkpoint_every == 0 or step == settings.steps:
            leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves((params, opt_state))]
            sha = write_part(directory, step, topo.rank, topo.world, leaves)
            digest = np.frombuffer(bytes.fromhex(sha), dtype=np.uint8)
            shas = (
                np.asarray(multihost_utils.process_allgather(digest)) if topo.world > 1 else digest[None]
            )  # the barrier: every part is on disk
            if lead:
                seal_checkpoint(
                    directory,
                    step,
                    topo.world,
                    len(leaves),
                    [bytes(row).hex() for row in shas],
                    {
                        "data_position": step * b,
                        "shards": topo.shards,
                        "seed": settings.seed,
                        "model": shape.as_dict(),
                    },
                )
                append_metric(settings.metrics, {"event": "checkpoint", "step": step})
    return settings.steps


def main() -> int:
    try:
        env = dict(os.environ)
        settings = settings_from_env(env)
        train(settings, topology_from_env(env, settings.batch_sequences))
    except UsageError as exc:
        sys.stderr.write(f"trainer: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

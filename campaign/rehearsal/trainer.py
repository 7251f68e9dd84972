"""The reference rehearsal trainer: `python -m campaign.rehearsal.trainer`, obeying the trainer contract.

A small Llama-style decoder (`campaign.rehearsal.transformer`) trained with optax's AdamW (beta2 0.95, weight
decay 0.1, gradient clipping at 1.0) under a linear warm-up and cosine decay to a tenth of the peak, in JAX on
the CPU. Deterministic for a seed: the parameters come from `jax.random.PRNGKey(seed)` and the batch of step k is
rows (k-1) x B .. k x B - 1 of the training file, in the order the harness laid them out (the trainer contract),
so a run resumed from a checkpoint computes exactly what the uninterrupted run computed.

A checkpoint is a folder `step_XXXXXXXX/` holding the parameters and the optimizer state (`state.npz`) and
`meta.json` (step, data position, the state's sha256). It is written into a temporary folder, fsynced and
renamed, so a kill leaves either a complete checkpoint or a temporary folder the next start deletes.

Source: Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization" (AdamW); Touvron et al. 2023, "LLaMA"
§2.2 (AdamW beta2 0.95, weight decay 0.1, clipping 1.0, warm-up then cosine to 10% of the peak).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from campaign.rehearsal import contract as c

CHECKPOINT_PREFIX = "step_"
KEEP_CHECKPOINTS = 2
MAX_EVAL_BATCHES = 4


class UsageError(Exception):
    """The environment does not follow the contract; the message says which variable and what to set."""


@dataclass(frozen=True)
class TrainerSettings:
    train: Path
    heldout: Path
    vocab: int
    steps: int
    seed: int
    checkpoint_every: int
    checkpoint_dir: Path
    metrics: Path
    learning_rate: float
    warmup_steps: int
    batch_sequences: int
    eval_every: int
    model: dict[str, int]


def settings_from_env(env: dict[str, str]) -> TrainerSettings:
    """Read the contract's variables; raises UsageError naming a missing or malformed one."""
    missing = [name for name in c.REQUIRED_ENV if not env.get(name)]
    if missing:
        raise UsageError(
            f"missing environment variable(s): {', '.join(missing)}; the rehearsal harness sets "
            "them (see the trainer contract, docs/rehearsal.md)"
        )

    def integer(name: str, default: int | None = None, minimum: int = 0) -> int:
        raw = env.get(name)
        if raw is None and default is not None:
            return default
        try:
            value = int(str(raw))
        except ValueError:
            raise UsageError(f"{name}={raw!r} is not an integer") from None
        if value < minimum:
            raise UsageError(f"{name}={value} must be at least {minimum}")
        return value

    try:
        learning_rate = float(env.get(c.ENV_LEARNING_RATE, "3e-3"))
    except ValueError:
        raise UsageError(f"{c.ENV_LEARNING_RATE}={env.get(c.ENV_LEARNING_RATE)!r} is not a number") from None
    try:
        model = json.loads(
            env.get(c.ENV_MODEL)
            or '{"layers": 2, "hidden": 128, "heads": 4, "kv_heads": 2, "ffn_hidden": 512}'
        )
    except json.JSONDecodeError as exc:
        raise UsageError(f"{c.ENV_MODEL} is not JSON: {exc.msg}") from None
    if not isinstance(model, dict) or not {"layers", "hidden", "heads", "kv_heads", "ffn_hidden"} <= set(
        model
    ):
        raise UsageError(
            f"{c.ENV_MODEL} must be a JSON object with layers, hidden, heads, kv_heads, ffn_hidden"
        )
    steps = integer(c.ENV_STEPS, minimum=1)
    return TrainerSettings(
        train=Path(env[c.ENV_TRAIN]),
        heldout=Path(env[c.ENV_HELDOUT]),
        vocab=integer(c.ENV_VOCAB, minimum=2),
        steps=steps,
        seed=integer(c.ENV_SEED),
        checkpoint_every=integer(c.ENV_CHECKPOINT_EVERY, minimum=1),
        checkpoint_dir=Path(env[c.ENV_CHECKPOINT_DIR]),
        metrics=Path(env[c.ENV_METRICS]),
        learning_rate=learning_rate,
        warmup_steps=integer(c.ENV_WARMUP_STEPS, default=max(1, steps // 10)),
        batch_sequences=integer(c.ENV_BATCH_SEQUENCES, default=8, minimum=1),
        eval_every=integer(c.ENV_EVAL_EVERY, default=max(1, steps // 10), minimum=1),
        model={k: int(model[k]) for k in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden")},
    )


def load_tokens(path: Path, vocab: int, what: str) -> np.ndarray:
    """A `[n, seq_len + 1]` uint32 array from `path`; raises UsageError if it is not one."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the {what} tokens {path}: {exc}") from None
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 2 or array.dtype != np.uint32:
        raise UsageError(
            f"{path}: expected uint32 [n_sequences >= 1, seq_len + 1 >= 2], got {array.dtype} "
            f"{list(array.shape)}"
        )
    if int(array.max()) >= vocab:
        raise UsageError(f"{path}: token id {int(array.max())} is not below {c.ENV_VOCAB}={vocab}")
    return np.ascontiguousarray(array)


def batch_rows(step: int, batch: int) -> slice:
    """Rows of step `step` (1-based) in the contract's order: (step - 1) x batch .. step x batch - 1."""
    return slice((step - 1) * batch, step * batch)


def append_metric(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line with a single write, so a kill cuts at most this line short."""
    line = (json.dumps(record) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------------ checkpoints


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(
    directory: Path, step: int, data_position: int, leaves: list[np.ndarray], extra: dict[str, Any]
) -> Path:
    """Write a complete checkpoint for `step` atomically (temporary folder, fsync, rename); keep the last two."""
    final = directory / f"{CHECKPOINT_PREFIX}{step:08d}"
    tmp = directory / f".tmp-{CHECKPOINT_PREFIX}{step:08d}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    state_path = tmp / "state.npz"
    with open(state_path, "wb") as handle:
        arrays = {f"leaf_{i:05d}": leaf for i, leaf in enumerate(leaves)}
        # numpy's stubs read `**arrays` as possibly `allow_pickle`; the names are leaf_NNNNN only.
        np.savez(handle, **arrays)  # type: ignore[arg-type]
        handle.flush()
        os.fsync(handle.fileno())
    meta = {
        "step": step,
        "data_position": data_position,
        "n_leaves": len(leaves),
        "state_sha256": hashlib.sha256(state_path.read_bytes()).hexdigest(),
        **extra,
    }
    with open(tmp / "meta.json", "w") as handle:
        json.dump(meta, handle)
        handle.flush()
        os.fsync(handle.fileno())
    _fsync_dir(tmp)
    if final.exists():  # a checkpoint of this step from an earlier start: replace it whole
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(directory)
    for old in complete_checkpoints(directory)[:-KEEP_CHECKPOINTS]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def complete_checkpoints(directory: Path) -> list[Path]:
    """Complete checkpoint folders, oldest first."""
    if not directory.exists():
        return []
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX) and (p / "meta.json").exists()
    )


def load_latest_checkpoint(directory: Path, n_leaves: int) -> tuple[dict[str, Any], list[np.ndarray]] | None:
    """The newest checkpoint whose state matches its recorded sha256 (older ones are tried if it does not)."""
    for path in reversed(complete_checkpoints(directory)):
        try:
            meta = json.loads((path / "meta.json").read_text())
            blob = (path / "state.npz").read_bytes()
        except (OSError, json.JSONDecodeError):
            continue
        if hashlib.sha256(blob).hexdigest() != meta.get("state_sha256") or meta.get("n_leaves") != n_leaves:
            sys.stderr.write(f"trainer: skipping damaged checkpoint {path}\n")  # the harness quotes stderr
            continue
        with np.load(path / "state.npz", allow_pickle=False) as npz:
            leaves = [npz[f"leaf_{i:05d}"] for i in range(n_leaves)]
        return meta, leaves
    return None


def remove_partial_checkpoints(directory: Path) -> None:
    """Temporary folders left by a kill mid-write are incomplete by construction: delete them."""
    for p in directory.glob(f".tmp-{CHECKPOINT_PREFIX}*"):
        shutil.rmtree(p, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- training


def make_optimizer(settings: TrainerSettings) -> Any:
    """AdamW (beta2 0.95, weight decay 0.1) after clipping at 1.0, under warm-up and cosine decay to a tenth."""
    import optax

    schedule = optax.warmup_cosine_decay_schedule(
        init_value=settings.learning_rate / max(1, settings.warmup_steps),
        peak_value=settings.learning_rate,
        warmup_steps=min(settings.warmup_steps, settings.steps - 1),
        decay_steps=settings.steps,
        end_value=settings.learning_rate * 0.1,
    )
    return optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(schedule, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1)
    )


def train(
    settings: TrainerSettings, log: Callable[[str], object] = lambda s: sys.stderr.write(s + "\n")
) -> int:
    """Run (or resume) the rehearsal training; returns the last step trained."""
    import jax
    import jax.numpy as jnp
    import optax

    from campaign.rehearsal.transformer import TransformerShape, init_params, loss, parameter_count

    jax.config.update("jax_platforms", "cpu")
    cache_dir = os.environ.get(c.ENV_CACHE_DIR)
    if cache_dir:  # compiled programs persist between starts: a restart skips most of the compile
        jax.config.update("jax_compilation_cache_dir", str(Path(cache_dir) / "jax"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    train_tokens = load_tokens(settings.train, settings.vocab, "training")
    if train_tokens.shape[0] < settings.steps * settings.batch_sequences:
        raise UsageError(
            f"{settings.train}: {train_tokens.shape[0]} rows, fewer than {settings.steps} steps x "
            f"{settings.batch_sequences} sequences (step k trains on rows (k-1) x B .. k x B - 1)"
        )
    heldout_tokens = load_tokens(settings.heldout, settings.vocab, "held-out")
    shape = TransformerShape(vocab=settings.vocab, **settings.model)
    if shape.hidden % shape.heads or shape.heads % shape.kv_heads or shape.head_dim % 2:
        raise UsageError(
            f"model {shape.as_dict()}: hidden must divide by heads into an even head size, and heads "
            "by kv_heads"
        )
    optimizer = make_optimizer(settings)

    params = init_params(shape, jax.random.PRNGKey(settings.seed))
    opt_state = optimizer.init(params)
    state_leaves, treedef = jax.tree_util.tree_flatten((params, opt_state))

    settings.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    remove_partial_checkpoints(settings.checkpoint_dir)
    start = 0
    restored = load_latest_checkpoint(settings.checkpoint_dir, len(state_leaves))
    if restored is not None:
        meta, leaves = restored
        expected = meta["step"] * settings.batch_sequences
        if meta["data_position"] != expected:
            raise UsageError(
                f"checkpoint step {meta['step']} has data position {meta['data_position']}, expected "
                f"{expected} for {settings.batch_sequences} sequences a step; delete "
                f"{settings.checkpoint_dir} to start over"
            )
        params, opt_state = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(x) for x in leaves])
        start = meta["step"]
        append_metric(settings.metrics, {"event": "resumed", "step": start})
        log(f"trainer: resumed from step {start} (data position {meta['data_position']})")
    else:
        log(
            f"trainer: {parameter_count(params):,} parameters, {train_tokens.shape[0]} training and "
            f"{heldout_tokens.shape[0]} held-out sequences of {train_tokens.shape[1] - 1} tokens"
        )

    def step_fn(params: Any, opt_state: Any, batch: jax.Array) -> tuple[Any, Any, jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, batch, shape)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    train_step = jax.jit(step_fn)
    eval_loss = jax.jit(lambda p, b: loss(p, b, shape))
    b = settings.batch_sequences
    n_eval = (
        heldout_tokens.shape[0]
        if heldout_tokens.shape[0] < b
        else min(heldout_tokens.shape[0] // b, MAX_EVAL_BATCHES) * b
    )
    eval_batches = [
        jnp.asarray(heldout_tokens[i : i + min(b, n_eval)].astype(np.int32))
        for i in range(0, n_eval, min(b, n_eval))
    ]

    def evaluate(step: int) -> None:
        values = [float(eval_loss(params, batch)) for batch in eval_batches]
        append_metric(settings.metrics, {"step": step, "heldout_loss": float(np.mean(values))})

    if start == 0:
        evaluate(0)
    tokens_per_step = b * (train_tokens.shape[1] - 1)
    for step in range(start + 1, settings.steps + 1):
        began = time.perf_counter()
        batch = jnp.asarray(train_tokens[batch_rows(step, b)].astype(np.int32))
        params, opt_state, value = train_step(params, opt_state, batch)
        loss_value = float(value)  # waits for the step: JAX dispatches it asynchronously
        record = {"step": step, "loss": loss_value, "tokens": tokens_per_step}
        # The step's own seconds (evaluation and checkpoints excluded), for `campaign plan measure`.
        record["step_time_s"] = time.perf_counter() - began
        append_metric(settings.metrics, record)
        if step % settings.eval_every == 0 or step == settings.steps:
            evaluate(step)
        if step % settings.checkpoint_every == 0 or step == settings.steps:
            leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves((params, opt_state))]
            save_checkpoint(
                settings.checkpoint_dir,
                step,
                step * b,
                leaves,
                {"seed": settings.seed, "model": shape.as_dict()},
            )
            append_metric(settings.metrics, {"event": "checkpoint", "step": step})
    return settings.steps


def main() -> int:
    try:
        settings = settings_from_env(dict(os.environ))
        train(settings)
    except UsageError as exc:
        sys.stderr.write(f"trainer: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A third-party trainer written against the trainer contract (docs/rehearsal.md) only: a NumPy bigram model with
SGD and momentum.

It imports nothing from campaign. `NUMPY_TRAINER_MODE` makes it misbehave the way real trainers do:
good, forget_momentum (resumes without its optimizer state), no_resume (ignores its checkpoints), no_checkpoint,
crash (exits 3 at step 5), malformed (writes a broken metrics line), hang (stops making progress), child (starts a
long-lived child process in its group; its pid goes to NUMPY_TRAINER_CHILD_PID), jitter (reports losses with a
little noise, like a non-deterministic GPU trainer), naive_softmax (overflows to NaN at a large learning rate).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def log(path, record):
    with open(path, "a") as handle:
        handle.write(json.dumps(record) + "\n")


def loss_and_grad(w, batch, naive=False):
    x, y = batch[:, :-1].ravel(), batch[:, 1:].ravel()
    logits = w[x]
    if naive:
        with np.errstate(all="ignore"):
            e = np.exp(logits)
            p = e / e.sum(axis=1, keepdims=True)
            loss = float(-np.mean(np.log(p[np.arange(len(y)), y])))
    else:
        z = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        loss = float(-np.mean(z[np.arange(len(y)), y] - np.log(np.exp(z).sum(axis=1))))
    p[np.arange(len(y)), y] -= 1.0
    grad = np.zeros_like(w)
    np.add.at(grad, x, p / len(y))
    return loss, grad


def main():
    env = os.environ
    mode = env.get("NUMPY_TRAINER_MODE", "good")
    train = np.load(env["CAMPAIGN_REHEARSAL_TRAIN"]).astype(np.int64)
    held = np.load(env["CAMPAIGN_REHEARSAL_HELDOUT"]).astype(np.int64)
    vocab, steps = int(env["CAMPAIGN_REHEARSAL_VOCAB"]), int(env["CAMPAIGN_REHEARSAL_STEPS"])
    seed, every = int(env["CAMPAIGN_REHEARSAL_SEED"]), int(env["CAMPAIGN_REHEARSAL_CHECKPOINT_EVERY"])
    ckpt_dir, metrics = Path(env["CAMPAIGN_REHEARSAL_CHECKPOINT_DIR"]), env["CAMPAIGN_REHEARSAL_METRICS"]
    lr = float(env.get("CAMPAIGN_REHEARSAL_LEARNING_RATE", "1.0"))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    w, v, start = np.zeros((vocab, vocab)), np.zeros((vocab, vocab)), 0
    done = sorted(ckpt_dir.glob("ckpt-*.npz"))
    if done and mode != "no_resume":
        state = np.load(done[-1])
        w, start = state["w"], int(state["step"])
        v = np.zeros_like(w) if mode == "forget_momentum" else state["v"]
        log(metrics, {"event": "resumed", "step": start})
    if mode == "child":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        Path(env["NUMPY_TRAINER_CHILD_PID"]).write_text(str(child.pid))
    if start == 0:
        log(metrics, {"step": 0, "heldout_loss": loss_and_grad(w, held)[0]})
    noise = np.random.default_rng()  # unseeded on purpose in jitter mode
    for step in range(start + 1, steps + 1):
        rows = np.random.default_rng([seed, step]).integers(0, len(train), 4)
        loss, grad = loss_and_grad(w, train[rows], naive=mode == "naive_softmax")
        v = 0.9 * v + grad
        w = w - lr * v
        if mode == "jitter":
            loss *= 1 + noise.normal() * 1e-7
        log(metrics, {"step": step, "loss": loss})
        if mode == "crash" and step == 5:
            print(
                "numpy trainer: CUDA error: an illegal memory access was encountered (pretend)",
                file=sys.stderr,
            )
            sys.exit(3)
        if mode == "malformed" and step == 4:
            with open(metrics, "a") as handle:
                handle.write("{'step': 4, loss: nan\n")
        if mode == "hang" and step == 3:
            time.sleep(600)
        if step % 5 == 0 or step == steps:
            log(metrics, {"step": step, "heldout_loss": loss_and_grad(w, held)[0]})
        if step % every == 0 and mode != "no_checkpoint":
            tmp = ckpt_dir / f".tmp-{step}.npz"
            np.savez(tmp, w=w, v=v, step=step)
            os.replace(tmp, ckpt_dir / f"ckpt-{step:06d}.npz")
            log(metrics, {"event": "checkpoint", "step": step})
        time.sleep(0.01)  # a real step takes time; the harness must be able to kill between steps


if __name__ == "__main__":
    main()

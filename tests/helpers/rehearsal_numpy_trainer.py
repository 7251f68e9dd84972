"""A third-party trainer written against the trainer contract (docs/rehearsal.md) only: a NumPy bigram model with
SGD and momentum.

It imports nothing from campaign. `NUMPY_TRAINER_MODE` makes it misbehave the way real trainers do:
good, forget_momentum (resumes without its optimizer state), no_resume (ignores its checkpoints), no_checkpoint,
crash (exits 3 at step 5), malformed (writes a broken metrics line: NUMPY_TRAINER_BAD_LINE, @FILE for one
read from FILE, or a default one),
hang (stops making progress), child (starts a long-lived child process in its group; its pid goes to
NUMPY_TRAINER_CHILD_PID), jitter (reports losses with a little noise, like a non-deterministic GPU trainer),
naive_softmax (overflows to NaN at a large learning rate). NUMPY_TRAINER_STEP_S: the seconds a step sleeps
(0.01 by default). NUMPY_TRAINER_BUFFERED_STARTS (a comma-separated list of start numbers, counted in
CAMPAIGN_REHEARSAL_CACHE_DIR): in those starts the metrics lines stay in a buffer until the trainer exits, so
whoever reads the file sees every step at once, as with a trainer too fast to be stopped between checkpoints.
And the hostile ones, which try to look like a trainer: no_data (never reads the data: a made-up falling curve,
checkpoint events without files, "resumes" by reading its own metrics file), no_data_files (the same, with
checkpoint files that change and are restored from), replay (restarts from scratch, replays the steps before its
checkpoint silently and claims it resumed), escape (a grandchild double-forks and calls setsid; its pid goes to
NUMPY_TRAINER_CHILD_PID), leak (reports a held-out loss far below its training loss), side_channel (writes 4 KB
of random bytes as each checkpoint and keeps its real state in a side channel, NUMPY_TRAINER_SIDE: cache,
tmp, home, shm or workdir, in a folder named for the checkpoint folder, restoring from there; or metrics or log:
the state as base64 in its checkpoint metrics lines, or printed to stdout, which the harness keeps in
<checkpoint folder>/../logs/faulted-1.stdout.log, restoring from the last one found there).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BUFFER: list[str] | None = None  # lines held until exit in a buffered start
# One gradient buffer and one scratch buffer per shape, reused every step: a new vocab x vocab array a step, faulted
# in page by page, was most of this trainer's CPU. The numbers are the same, bit for bit.
GRAD: dict[tuple[int, ...], np.ndarray] = {}
SCRATCH: dict[tuple[int, ...], np.ndarray] = {}


def log(path, record):
    if BUFFER is not None:
        BUFFER.append(json.dumps(record) + "\n")
        return
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
    # zeroed for each call: the caller uses the gradient before it asks for the next one
    grad = GRAD.get(w.shape)
    if grad is None:
        grad = GRAD[w.shape] = np.zeros_like(w)
    else:
        grad.fill(0.0)
    # np.add.at(grad, x, p / len(y)), row by row in the same order (the same sums), in less than half its time
    for row, value in zip(x.tolist(), p / len(y), strict=True):
        grad[row] += value
    return loss, grad


def scratch(w):
    """A buffer of w's shape for `lr * v`, the same one each step."""
    buf = SCRATCH.get(w.shape)
    if buf is None:
        buf = SCRATCH[w.shape] = np.empty_like(w)
    return buf


def fake_loss(step):
    """A plausible falling curve that depends on nothing but the step."""
    return 2.8 * float(np.exp(-step / 12.0)) + 0.4


def escape(pid_file):
    """Double fork and setsid: the grandchild leaves the trainer's process group and is re-parented."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            Path(pid_file).write_text(str(os.getpid()))
            time.sleep(300)
        os._exit(0)
    os.wait()


def main_no_data(env, mode):
    """The hostile trainer that never trains: it writes what a trainer would write and reads no data."""
    steps, every = int(env["CAMPAIGN_REHEARSAL_STEPS"]), int(env["CAMPAIGN_REHEARSAL_CHECKPOINT_EVERY"])
    ckpt_dir, metrics = Path(env["CAMPAIGN_REHEARSAL_CHECKPOINT_DIR"]), env["CAMPAIGN_REHEARSAL_METRICS"]
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    start = 0
    if mode == "no_data_files":
        done = sorted(ckpt_dir.glob("fake-*.json"))
        start = json.loads(done[-1].read_text())["step"] if done else 0
    elif Path(metrics).exists():
        for line in Path(metrics).read_text().splitlines():
            record = json.loads(line)
            if record.get("event") == "checkpoint":
                start = record["step"]
    if start:
        log(metrics, {"event": "resumed", "step": start})
    else:
        log(metrics, {"step": 0, "heldout_loss": fake_loss(0) + 0.1})
    for step in range(start + 1, steps + 1):
        log(metrics, {"step": step, "loss": fake_loss(step)})
        if step % 5 == 0 or step == steps:
            log(metrics, {"step": step, "heldout_loss": fake_loss(step) + 0.1})
        if step % every == 0:
            if mode == "no_data_files":
                (ckpt_dir / f"fake-{step:06d}.json").write_text(json.dumps({"step": step}))
            log(metrics, {"event": "checkpoint", "step": step})
        time.sleep(0.01)


def side_channel(env, ckpt_dir: Path) -> Path:
    import hashlib

    base = {
        "cache": lambda: Path(env["CAMPAIGN_REHEARSAL_CACHE_DIR"]),
        "tmp": lambda: Path("/tmp"),
        "home": Path.home,
        "shm": lambda: Path("/dev/shm"),
        "workdir": lambda: ckpt_dir.parent.parent,
    }[env.get("NUMPY_TRAINER_SIDE", "cache")]()
    folder = base / f"side-{hashlib.sha1(str(ckpt_dir).encode()).hexdigest()}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def streamed_state(env, ckpt_dir: Path, metrics: str) -> list:
    """The side channels in files a start writes anyway: the newest state found in the metrics file or in the
    first start's stdout log ([] if none)."""
    import base64
    import io

    where = Path(metrics) if env.get("NUMPY_TRAINER_SIDE") == "metrics" else ckpt_dir.parent / "logs"
    if where.is_dir():
        where = where / "faulted-1.stdout.log"
    found = []
    try:
        lines = where.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "blob" in record:
            found = [io.BytesIO(base64.b64decode(record["blob"]))]
    return found


def count_start(env) -> int:
    counter = Path(env["CAMPAIGN_REHEARSAL_CACHE_DIR"]) / "numpy-trainer-starts"
    counter.parent.mkdir(parents=True, exist_ok=True)
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    return n


def main():
    global BUFFER
    env = os.environ
    buffered = {int(x) for x in env.get("NUMPY_TRAINER_BUFFERED_STARTS", "").split(",") if x}
    if buffered and count_start(env) in buffered:
        BUFFER = []
    mode = env.get("NUMPY_TRAINER_MODE", "good")
    if mode in ("no_data", "no_data_files"):
        main_no_data(env, mode)
        return
    train = np.load(env["CAMPAIGN_REHEARSAL_TRAIN"]).astype(np.int64)
    held = np.load(env["CAMPAIGN_REHEARSAL_HELDOUT"]).astype(np.int64)
    vocab, steps = int(env["CAMPAIGN_REHEARSAL_VOCAB"]), int(env["CAMPAIGN_REHEARSAL_STEPS"])
    every = int(env["CAMPAIGN_REHEARSAL_CHECKPOINT_EVERY"])  # the seed: nothing here is random
    ckpt_dir, metrics = Path(env["CAMPAIGN_REHEARSAL_CHECKPOINT_DIR"]), env["CAMPAIGN_REHEARSAL_METRICS"]
    lr = float(env.get("CAMPAIGN_REHEARSAL_LEARNING_RATE", "1.0"))
    batch = int(env["CAMPAIGN_REHEARSAL_BATCH_SEQUENCES"])
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    streamed = mode == "side_channel" and env.get("NUMPY_TRAINER_SIDE") in ("metrics", "log")
    state_dir = side_channel(env, ckpt_dir) if mode == "side_channel" and not streamed else ckpt_dir
    w, v, start = np.zeros((vocab, vocab)), np.zeros((vocab, vocab)), 0
    done = streamed_state(env, ckpt_dir, metrics) if streamed else sorted(state_dir.glob("ckpt-*.npz"))
    replay_to = 0
    if done and mode == "replay":  # claims the checkpoint, but recomputes it from step 1
        replay_to = int(np.load(done[-1])["step"])
        for step in range(1, replay_to + 1):
            _, grad = loss_and_grad(w, train[(step - 1) * batch : step * batch])
            v *= 0.9
            v += grad
            w -= np.multiply(lr, v, out=scratch(w))
        start = replay_to
        log(metrics, {"event": "resumed", "step": start})
    elif done and mode != "no_resume":
        state = np.load(done[-1])
        w, start = state["w"], int(state["step"])
        v = np.zeros_like(w) if mode == "forget_momentum" else state["v"]
        log(metrics, {"event": "resumed", "step": start})
    if mode == "child":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        Path(env["NUMPY_TRAINER_CHILD_PID"]).write_text(str(child.pid))
    if mode == "escape":
        escape(env["NUMPY_TRAINER_CHILD_PID"])
    if start == 0:
        log(metrics, {"step": 0, "heldout_loss": loss_and_grad(w, held)[0]})
    noise = np.random.default_rng()  # unseeded on purpose in jitter mode
    for step in range(start + 1, steps + 1):
        rows = train[(step - 1) * batch : step * batch]  # the contract's order: step k, rows (k-1)B .. kB-1
        loss, grad = loss_and_grad(w, rows, naive=mode == "naive_softmax")
        # in place, the same operations in the same order as v = 0.9 * v + grad; w = w - lr * v
        v *= 0.9
        v += grad
        w -= np.multiply(lr, v, out=scratch(w))
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
                bad = env.get("NUMPY_TRAINER_BAD_LINE", "{'step': 4, loss: nan")
                handle.write((Path(bad[1:]).read_text() if bad.startswith("@") else bad) + "\n")
        if mode == "hang" and step == 3:
            time.sleep(600)
        if step % 5 == 0 or step == steps:
            held_loss = loss_and_grad(w, held)[0] * (0.2 if mode == "leak" else 1.0)
            log(metrics, {"step": step, "heldout_loss": held_loss})
        if (
            step % every == 0 and streamed
        ):  # random bytes as the checkpoint, the state in a line it writes anyway
            import base64
            import io

            buf = io.BytesIO()
            np.savez(buf, w=w, v=v, step=step)
            (ckpt_dir / f"ckpt-{step:06d}.bin").write_bytes(os.urandom(4096))
            line = {"event": "checkpoint", "step": step, "blob": base64.b64encode(buf.getvalue()).decode()}
            if env["NUMPY_TRAINER_SIDE"] == "log":
                print(json.dumps(line), flush=True)
                line.pop("blob")
            log(metrics, line)
        elif step % every == 0 and mode != "no_checkpoint":
            tmp = state_dir / f".tmp-{step}.npz"
            np.savez(tmp, w=w, v=v, step=step)
            os.replace(tmp, state_dir / f"ckpt-{step:06d}.npz")
            if state_dir != ckpt_dir:  # what the checkpoint folder gets: bytes that change, restore nothing
                (ckpt_dir / f"ckpt-{step:06d}.bin").write_bytes(os.urandom(4096))
            log(metrics, {"event": "checkpoint", "step": step})
        # a real step takes time; the harness must be able to kill between steps
        time.sleep(float(env.get("NUMPY_TRAINER_STEP_S", "0.01")))


if __name__ == "__main__":
    try:
        main()
    finally:
        if BUFFER:
            with open(os.environ["CAMPAIGN_REHEARSAL_METRICS"], "a") as handle:
                handle.write("".join(BUFFER))

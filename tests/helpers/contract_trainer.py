"""A trainer written from the documented trainer contract alone (docs/rehearsal.md), as a team would write one:
a NumPy bigram model with SGD and momentum, sha256-checked checkpoints it can fall back from, a graceful SIGTERM
and its own wall-clock log, so that campaign's accounting can be checked against the trainer's own.

It imports nothing from campaign. Its own log (`CONTRACT_TRAINER_LOG`, JSON lines with a Unix time `t`) records
each start, the checkpoint it loaded (and each one it refused), every step, checkpoint and end. Its start is its process's creation time
(from /proc), its end the last moment it sees (`atexit`). `own_accounting`
reads that log back: the seconds of steps whose state survived to the end, over the run's wall time.

Faults, each on the first start only unless said (starts are counted in `CAMPAIGN_REHEARSAL_CACHE_DIR`):
- `CONTRACT_TRAINER_TORN=150,...`: the checkpoint at these steps is torn (half its bytes on disk; its digest is of
  the whole), on every start;
- `CONTRACT_TRAINER_VERIFY=0`: load the newest checkpoint without checking its digest (a torn one then raises
  `zipfile.BadZipFile` at every start, the way `np.load` does);
- `CONTRACT_TRAINER_CRASH_ON_START=1`: every start exits 2 before its first step, naming its error on stderr;
- `CONTRACT_TRAINER_HANG_AT=k`: at step k the trainer sleeps (writes nothing) until it is stopped;
- `CONTRACT_TRAINER_STALL_AT=k`: from step k it writes `{"step": k, ...}` every 0.05 s forever;
- `CONTRACT_TRAINER_EVAL_S=x` with `CONTRACT_TRAINER_EVAL_EVERY=n`: an evaluation of x seconds every n steps;
- `CONTRACT_TRAINER_STEP_S`: seconds per step (0.05).
"""

import os
import time


def process_started_at():
    """When this process was created (Unix seconds), from /proc, as `psutil.Process().create_time()` reads it."""
    with open("/proc/uptime") as handle:
        boot = time.time() - float(handle.read().split()[0])
    with open(f"/proc/{os.getpid()}/stat") as handle:
        ticks = float(handle.read().rsplit(")", 1)[1].split()[19])
    return boot + ticks / os.sysconf("SC_CLK_TCK")


T_IMPORT = process_started_at()  # the start as the trainer itself knows it

import atexit  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402


class Log:
    def __init__(self, path):
        self.path = path

    def __call__(self, event, **fields):
        if not self.path:
            return
        with open(self.path, "a") as handle:
            handle.write(json.dumps({"t": time.time(), "event": event, **fields}) + "\n")


def metric(path, record):
    with open(path, "a") as handle:  # one write per line, as the contract asks
        handle.write(json.dumps(record) + "\n")


def loss_and_grad(w, rows):
    x, y = rows[:, :-1].ravel(), rows[:, 1:].ravel()
    z = w[x] - w[x].max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    loss = float(-np.mean(np.log(p[np.arange(len(y)), y])))
    p[np.arange(len(y)), y] -= 1.0
    grad = np.zeros_like(w)
    np.add.at(grad, x, p / len(y))
    return loss, grad


def save(folder, step, w, v, torn):
    buffer = io.BytesIO()
    np.savez(buffer, w=w, v=v, step=step)
    data = buffer.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    tmp = folder / f".tmp-{step}"
    tmp.write_bytes(data[: len(data) // 2] if torn else data)
    (folder / f".tmp-{step}.sha256").write_text(digest)
    os.replace(tmp, folder / f"ckpt-{step:06d}.npz")
    os.replace(folder / f".tmp-{step}.sha256", folder / f"ckpt-{step:06d}.sha256")
    return digest


def load(folder, verify, log):
    """The newest checkpoint that loads: (step, w, v), or None. A checkpoint whose bytes do not match its digest
    is refused and the one before it tried (with `verify`); without, a torn one raises."""
    for path in sorted(folder.glob("ckpt-*.npz"), reverse=True):
        data = path.read_bytes()
        if verify:
            digest_file = path.with_suffix(".sha256")
            if not digest_file.exists() or hashlib.sha256(data).hexdigest() != digest_file.read_text():
                log("refused", file=path.name, reason="sha256 mismatch")
                print(
                    f"contract trainer: {path.name} fails its sha256 check; trying an older one",
                    file=sys.stderr,
                )
                continue
        state = np.load(io.BytesIO(data))  # a torn file: zipfile.BadZipFile
        return int(state["step"]), state["w"], state["v"]
    return None


def count_start(env):
    counter = Path(env["CAMPAIGN_REHEARSAL_CACHE_DIR"]) / "contract-trainer-starts"
    counter.parent.mkdir(parents=True, exist_ok=True)
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    return n


def main():
    env = os.environ
    log = Log(env.get("CONTRACT_TRAINER_LOG", ""))
    log("start", pid=os.getpid(), t_import=T_IMPORT)
    atexit.register(lambda: log("gone"))  # the last moment the trainer can see, however it ends

    def on_term(signum, _frame):
        log("stop_signal", signal=signal.Signals(signum).name)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    first = count_start(env) == 1
    if env.get("CONTRACT_TRAINER_CRASH_ON_START") == "1":
        print("contract trainer: error: config key 'optimizer.lr' is missing", file=sys.stderr)
        log("exit", code=2)
        sys.exit(2)
    train = np.load(env["CAMPAIGN_REHEARSAL_TRAIN"]).astype(np.int64)
    held = np.load(env["CAMPAIGN_REHEARSAL_HELDOUT"]).astype(np.int64)
    vocab, steps = int(env["CAMPAIGN_REHEARSAL_VOCAB"]), int(env["CAMPAIGN_REHEARSAL_STEPS"])
    every, batch = (
        int(env["CAMPAIGN_REHEARSAL_CHECKPOINT_EVERY"]),
        int(env["CAMPAIGN_REHEARSAL_BATCH_SEQUENCES"]),
    )
    folder, metrics = Path(env["CAMPAIGN_REHEARSAL_CHECKPOINT_DIR"]), env["CAMPAIGN_REHEARSAL_METRICS"]
    folder.mkdir(parents=True, exist_ok=True)
    torn = {int(s) for s in env.get("CONTRACT_TRAINER_TORN", "").split(",") if s}
    step_s = float(env.get("CONTRACT_TRAINER_STEP_S", "0.05"))
    hang_at = int(env.get("CONTRACT_TRAINER_HANG_AT", "0")) if first else 0
    stall_at = int(env.get("CONTRACT_TRAINER_STALL_AT", "0")) if first else 0
    eval_s, eval_every = (
        float(env.get("CONTRACT_TRAINER_EVAL_S", "0")),
        int(env.get("CONTRACT_TRAINER_EVAL_EVERY", "0")),
    )
    w, v, start = np.zeros((vocab, vocab)), np.zeros((vocab, vocab)), 0
    loaded = load(folder, env.get("CONTRACT_TRAINER_VERIFY", "1") != "0", log)
    if loaded is not None:
        start, w, v = loaded
        metric(metrics, {"event": "resumed", "step": start})
    else:
        metric(metrics, {"step": 0, "heldout_loss": loss_and_grad(w, held)[0]})
    log("loaded", step=start)
    for step in range(start + 1, steps + 1):
        time.sleep(step_s)  # the step's compute
        loss, grad = loss_and_grad(w, train[(step - 1) * batch : step * batch])
        v = 0.9 * v + grad
        w = w - 0.5 * v
        if step == hang_at:
            while True:
                time.sleep(1)
        if step == stall_at:
            while True:
                metric(metrics, {"step": step, "loss": loss})
                time.sleep(0.05)
        metric(metrics, {"step": step, "loss": loss})
        log("step", step=step)
        if eval_every and step % eval_every == 0:
            time.sleep(eval_s)
            metric(metrics, {"step": step, "heldout_loss": loss_and_grad(w, held)[0]})
            log("eval", step=step)
        if step % every == 0 or step == steps:
            digest = save(folder, step, w, v, step in torn)
            metric(metrics, {"event": "checkpoint", "step": step})
            log("checkpoint", step=step, sha256=digest, torn=step in torn)
    log("exit", code=0)


def own_accounting(log_path, target_step):
    """The run by the trainer's own log: {"ettr", "productive_s", "wall_s", "final_step", "trained_again"}.

    A step is productive when its state survived: the next start loaded a checkpoint at or after it, or it is
    part of the start that reached the target; its seconds run from the record before it (the load, a step, an
    evaluation or a checkpoint of the same start) to its own record. The wall time runs from the first start's
    import to the last record."""
    records = [json.loads(line) for line in Path(log_path).read_text().splitlines() if line.strip()]
    starts, current = [], None
    for r in records:
        if r["event"] == "start":
            current = []
            starts.append((r["t_import"], current))
        elif current is not None:
            current.append(r)
    loaded = [next((r["step"] for r in rs if r["event"] == "loaded"), None) for _, rs in starts]
    last_reached = any(r["event"] == "exit" and r.get("code") == 0 for r in starts[-1][1])
    sound = [r["step"] for _, rs in starts for r in rs if r["event"] == "checkpoint" and not r["torn"]]
    final = target_step if last_reached else max(sound, default=0)  # what a next start would load
    productive, trained = 0.0, {}
    for i, (_, rs) in enumerate(starts):
        later = [s for s in loaded[i + 1 :] if s is not None]
        kept = later[0] if later else final
        previous = None
        for r in rs:
            if r["event"] == "step":
                trained[r["step"]] = trained.get(r["step"], 0) + 1
                if r["step"] <= kept and previous is not None:
                    productive += r["t"] - previous
            if r["event"] in ("loaded", "step", "eval", "checkpoint"):
                previous = r["t"]
    wall = records[-1]["t"] - starts[0][0]
    return {
        "ettr": productive / wall,
        "productive_s": productive,
        "wall_s": wall,
        "final_step": final,
        "trained_again": sum(n - 1 for n in trained.values()),
    }


if __name__ == "__main__":
    main()

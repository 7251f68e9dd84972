"""Lean worker processes for the data work of a local prepare (the threads runner with `max_workers` > 1).

Prefect maps the shard tasks on threads in the command's process; each task hands its shard to an idle worker
process and waits for the summary; the global dedup pass and each source's finalise step run in a worker the same
way, so the command's process (Prefect's flow engine) never holds data. A worker is `python -m
campaign.data.workers`: it imports only what the data work needs (NumPy, pyarrow, rensa, the tokenizer backend,
Numba for the word kernels), never Prefect, Dask or the store, so a local run pays neither a Prefect import per
core nor Dask's scheduler. Outputs are those of running the same functions in this process. Why this design, and
the alternatives that were tried: docs/design.md, "Prepare at scale".

Protocol: pickled `(function, args)` requests on the worker's stdin (a module-level function, pickled by
reference), one pickled `("ok", result)` or `("error", exception)` reply per request on its stdout, each framed by
an 8-byte length. A worker exits at end of input, or as soon as the process that started it is gone (it checks
its parent every half second), so a killed prepare leaves no worker writing into a shard folder that a resumed
run will redo.

Not `concurrent.futures.ProcessPoolExecutor`: its spawned children re-run the parent's main script, which for the
`campaign` console script imports the CLI and Prefect into every worker.
"""

from __future__ import annotations

import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, TypeVar

from campaign.errors import ConfigError

T = TypeVar("T")

_HEADER = struct.Struct("<Q")


def _send(stream: IO[bytes], obj: Any) -> None:
    blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(blob)) + blob)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    blob = stream.read(size)
    if len(blob) < size:
        raise EOFError
    return pickle.loads(blob)


class WorkerDied(RuntimeError):
    """A worker process ended without answering (killed, out of memory)."""


class _Worker:
    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[2])
        # Arrow's system allocator: memory freed after a batch goes back with `shards.release_memory`
        # (mimalloc, pyarrow's default, keeps its segments: ~50 MB more per worker, measured).
        env = {
            "ARROW_DEFAULT_MEMORY_POOL": "system",
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "campaign.data.workers", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            # its own process group: a Ctrl-C in the terminal is the command's to handle (it ends its workers and
            # says what was interrupted), not a traceback from every worker's imports
            process_group=0,
        )

    def call(self, request: tuple) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes (Popen above)
        try:
            _send(self.proc.stdin, request)
            kind, value = _receive(self.proc.stdout)
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.wait()
            raise WorkerDied(
                f"a prepare worker process ended with exit code {code} while cleaning a shard "
                "(killed, or out of memory?)"
            ) from None
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        if self.proc.stdin is not None:
            with suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class WorkerPool:
    """`size` lean worker processes, started at once (their imports overlap the flow's start-up)."""

    def __init__(self, size: int) -> None:
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all = [_Worker() for _ in range(size)]
        for worker in self._all:
            self._idle.put(worker)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        worker = self._idle.get()
        try:
            return worker.call((fn, args))
        except WorkerDied:
            worker.close()
            self._all.remove(worker)
            worker = _Worker()  # replace it, so the other shards still have a worker
            self._all.append(worker)
            raise
        finally:
            self._idle.put(worker)

    def shrink(self, size: int) -> None:
        """End idle worker processes until at most `size` (at least one) remain."""
        while len(self._all) > max(size, 1):
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                return
            self._all.remove(worker)
            worker.close()

    def close(self) -> None:
        for worker in self._all:
            worker.close()

    def kill(self) -> None:
        """End every worker now, mid-shard (an interrupted prepare: its unfinished shards are redone on a rerun)."""
        for worker in self._all:
            with suppress(OSError):
                worker.proc.kill()
        for worker in self._all:
            worker.proc.wait()


_active: WorkerPool | None = None
_lock = threading.Lock()

# A worker's start costs about 1.2 CPU-s (its imports: NumPy, Arrow, Numba and the cached word kernels). Two workers
# took as long as the command's own process up to 64 MB of input, with more CPU and memory, and 0.84x its time at
# 128 MB (benchmarks/results/2026-12-06-prepare-workers.md): a worker is started for each WORKER_MIN_MB of input.
WORKER_MIN_MB = 32.0
ENV_WORKER_MIN_MB = "CAMPAIGN_PREPARE_WORKER_MIN_MB"


def pool_size(input_bytes: int, max_workers: int) -> int:
    """The worker processes worth starting for `input_bytes` of input: one per WORKER_MIN_MB (or the
    CAMPAIGN_PREPARE_WORKER_MIN_MB environment variable), at most `max_workers`. Under two, `shard_workers`
    starts none."""
    raw = os.environ.get(ENV_WORKER_MIN_MB, "").strip()
    try:
        min_mb = float(raw) if raw else WORKER_MIN_MB
    except ValueError:
        min_mb = -1.0
    if not min_mb >= 0:  # not a number, negative or NaN
        raise ConfigError(
            f"{raw!r} is not a number of MB (0 or more)",
            where=ENV_WORKER_MIN_MB,
            fix=f"unset it (a worker per {WORKER_MIN_MB:g} MB of input) or give MB; 0 starts "
            "runtime.max_workers workers whatever the input",
        )
    if min_mb <= 0:
        return max_workers
    return max(1, min(max_workers, int(input_bytes // (min_mb * 2**20))))


@contextmanager
def shard_workers(size: int) -> Iterator[WorkerPool | None]:
    """While open, `in_worker` sends its calls to `size` worker processes (none when size < 2: the work then
    runs in this process, as before)."""
    global _active
    if size < 2:
        yield None
        return
    pool = WorkerPool(size)
    with _lock:
        _active = pool
    try:
        yield pool
    except BaseException:
        pool.kill()  # a Ctrl-C or a failed task: no worker finishes a shard nobody waits for
        raise
    finally:
        with _lock:
            _active = None
        pool.close()


def keep_workers(size: int) -> None:
    """End the open pool's idle worker processes beyond `size` (no pool open: nothing to do). After the
    shards, the dedup pass and the finalise steps need one worker per source at most; a worker that only
    waits would keep the heap of its last shard (~200 MB PSS, measured) through them."""
    pool = _active
    if pool is not None:
        pool.shrink(size)


def in_worker(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a worker process of the open `shard_workers` pool, else in this process (a Dask worker,
    one worker, the pure path). `fn` must be importable by name (a module-level function)."""
    pool = _active
    if pool is not None:
        return pool.call(fn, *args)
    return fn(*args)


def _watch_parent(parent: int) -> None:
    import time

    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)


def _serve(parent: int) -> None:
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything printed goes to stderr, never into the reply stream
    while True:
        try:
            fn, args = _receive(stdin)
        except EOFError:
            return
        try:
            reply: tuple[str, Any] = ("ok", fn(*args))
        except Exception as err:  # sent back and raised in the task that asked
            reply = ("error", err)
        try:
            _send(stdout, reply)
        except (pickle.PicklingError, TypeError, AttributeError):
            _send(stdout, ("error", RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}")))


if __name__ == "__main__":
    # Numba looks for SciPy's BLAS the first time it sets up its CPU target (numba/np/arraymath.py), which
    # imports SciPy's linear algebra: ~16 MB PSS per worker for nothing, as the word kernels do no linear
    # algebra. Marking SciPy absent makes Numba skip it (it treats SciPy as optional).
    # (None in sys.modules is Python's documented import block; typeshed types its values as modules only.)
    sys.modules.setdefault("scipy", None)  # type: ignore[arg-type]
    _serve(int(sys.argv[1]))

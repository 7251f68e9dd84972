"""Every start of the rehearsal's trainer in a mount namespace where it can keep nothing but its checkpoint.

The restart must restore from `CAMPAIGN_REHEARSAL_CHECKPOINT_DIR` alone. Each start (reference, control, the
faulted run and its restart) runs under bubblewrap (`bwrap`, Debian's `bubblewrap`) with the whole file system
read-only, a private empty `/tmp` and `/dev/shm`, and `HOME` in that private `/tmp`; the only folders it can write
that outlive it are its own checkpoint folder, its metrics file and its cache folder. The restart gets a fresh,
empty cache folder. So no start can leave state anywhere the restart can read, except in the checkpoint folder the
restart is given: a side channel (the cache, /tmp, /dev/shm, the home folder, the workspace, anywhere on disk)
fails the gate instead of faking a restore. Paths under `/tmp` the trainer needs (its data files, its scripts,
the working folder, the interpreter) are bound back read-only.

Without a working bwrap (not installed, or no namespaces for this user) the starts run as before and the
rehearsal says the restart's isolation was not checked, and why.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

PRIVATE_HOME = "/tmp/home"  # HOME inside the sandbox: in its private /tmp
HIDDEN = (Path("/tmp"),)  # replaced by a private tmpfs (with /dev/shm); what the trainer needs is bound back


SANDBOX_ENV = "CAMPAIGN_SANDBOX"  # "0": starts run without the sandbox (said in the checks), for tests that
# exchange files with the trainer through /tmp


def sandbox_problem() -> str:
    """'' when bwrap can build the sandbox here; else why not (said in the rehearsal's checks)."""
    if os.environ.get(SANDBOX_ENV) == "0":
        return f"turned off by {SANDBOX_ENV}=0"
    return _bwrap_problem()


@functools.lru_cache(maxsize=1)
def _bwrap_problem() -> str:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: install it (Debian: apt-get install bubblewrap)"
    try:
        done = subprocess.run(
            [bwrap, *_base_args(), "--", "/bin/true"],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap cannot run ({exc})"
    if done.returncode != 0:
        return f"bwrap cannot build a mount namespace here ({done.stderr.decode(errors='replace').strip()[:200]})"
    return ""


def _base_args() -> list[str]:
    return [
        "--ro-bind",
        "/",
        "/",
        "--dev-bind",
        "/dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/dev/shm",
        *[arg for hidden in HIDDEN for arg in ("--tmpfs", str(hidden))],
        "--die-with-parent",
    ]


def _hidden(path: Path, hide: tuple[Path, ...] = ()) -> bool:
    return any(path == h or path.is_relative_to(h) for h in (*HIDDEN, *hide))


def sandbox_prefix(
    writable: Iterable[Path],
    readable: Iterable[Path],
    cwd: Path,
    hide: Iterable[Path] = (),
) -> list[str]:
    """The bwrap arguments that start a command in the sandbox (end with `--`): `writable` folders and files
    (created if missing) bound read-write, `readable` paths under the hidden folders bound back read-only, and the
    working folder kept. `hide`: more folders replaced by an empty one (the rehearsal's own folder, for the
    restart: what earlier starts wrote there, their metrics and logs, is out of its sight)."""
    bwrap = shutil.which("bwrap") or "bwrap"
    hidden = tuple(path.resolve() for path in hide)
    args = [bwrap, *_base_args(), *[arg for path in hidden for arg in ("--tmpfs", str(path))]]
    needed = {Path(sys.executable).resolve().parent.parent, Path(sys.prefix), Path(sys.base_prefix), cwd}
    needed.update(Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    needed.update(Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p)
    needed.update(readable)
    for path in sorted({p.resolve() for p in needed if p.exists()}):
        if _hidden(path, hidden):
            args += ["--ro-bind", str(path), str(path)]
    for path in writable:
        path = path.resolve()
        args += ["--bind", str(path), str(path)]
    args += ["--dir", PRIVATE_HOME, "--setenv", "HOME", PRIVATE_HOME, "--setenv", "TMPDIR", "/tmp"]
    args += ["--chdir", str(cwd), "--"]
    return args

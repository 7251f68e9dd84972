"""Start the data-parallel reference trainer as N ranks on this machine: `python -m campaign.rehearsal.launch
--ranks 2`, a trainer command for the rehearsal gate (`rehearsal.command`), as `torchrun --standalone` is for torch.

The ranks meet over loopback at a free port, each with the trainer contract's variables and its rank; they stay
in the launcher's process group (the harness stops them with it). When one rank ends with a failure (a kill, an
error), the launcher ends the others and exits with that rank's code (128 + N for a signal N), so the harness sees
the job fail and restarts it, and every rank restores from the last complete sharded checkpoint.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import closing

from campaign.rehearsal.distributed import ENV_COORDINATOR, ENV_RANK, ENV_SHARDS, ENV_WORLD

POLL_S = 0.1


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def launch(ranks: int, shards: int | None = None) -> int:
    """Run `ranks` ranks to their end; the first failing rank's exit code (0 when every rank succeeds)."""
    env = {
        **os.environ,
        ENV_WORLD: str(ranks),
        ENV_COORDINATOR: f"127.0.0.1:{free_port()}",
        ENV_SHARDS: str(shards or os.environ.get(ENV_SHARDS) or ranks),
    }
    command = [sys.executable, "-m", "campaign.rehearsal.distributed"]
    procs = [subprocess.Popen(command, env={**env, ENV_RANK: str(r)}) for r in range(ranks)]
    code = 0
    try:
        while any(p.poll() is None for p in procs):
            failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
            if failed:
                code = failed[0]
                break
            time.sleep(POLL_S)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    code = code or next((p.returncode for p in procs if p.returncode), 0)
    return 128 - code if code < 0 else code  # a rank killed by signal N: 128 + N, as a shell says


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m campaign.rehearsal.launch", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--ranks", type=int, default=2, help="ranks on this machine (default 2)")
    parser.add_argument(
        "--shards", type=int, default=None, help="gradient shards a step (default: the ranks)"
    )
    args = parser.parse_args()
    if not 1 <= args.ranks <= 64:
        sys.stderr.write(f"launch: --ranks {args.ranks}: use 1 to 64\n")
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return launch(args.ranks, args.shards)


if __name__ == "__main__":
    sys.exit(main())

"""Wall time and CPU-seconds of one command that drives the local Slurm cluster, and the machine's load meanwhile.

    SLURM_CONF=... PYTHONPATH=. .venv/bin/python benchmarks/execution/command_cpu.py OUT.json COMMAND [ARGS...]

Prints (and writes to OUT.json) the command's wall time; the CPU-seconds of its process tree (`RUSAGE_CHILDREN`);
those of the cluster's own processes outside that tree, whose work the tree does not count: the daemons and every
job step with what runs below it (the trainer's ranks), found by `SLURM_CONF` in their environment and sampled every
0.2 s (a process's last fraction of a second can be missed); the machine's busy CPU-seconds (every user's, from
/proc/stat); and /proc/loadavg before and after. On a shared machine the difference between the busy seconds and
the other two is other people's work.
"""

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
DAEMONS = {"slurmctld", "slurmd", "munged", "slurmstepd"}
SAMPLE_S = 0.2


def busy_cpu_s() -> float:
    """The machine's CPU-seconds not idle since boot, every core."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICK


def cluster_cpu(conf: str, outside: int, seen: dict[int, float]) -> None:
    """Each of the cluster's processes (a daemon, or below one: a job step's) not below `outside`: its CPU-seconds
    so far, the largest seen kept in `seen`."""
    marker = f"SLURM_CONF={conf}".encode()
    parent, comm, cpu = {}, {}, {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            pid = int(proc.name)
            parent[pid], comm[pid] = int(fields[1]), (proc / "comm").read_text().strip()
            if marker in (proc / "environ").read_bytes().split(b"\0"):
                cpu[pid] = (int(fields[11]) + int(fields[12])) / TICK
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    for pid, seconds in cpu.items():
        up, ours = pid, False
        while up > 1 and up != outside:
            ours = ours or comm.get(up) in DAEMONS
            up = parent.get(up, 1)
        if ours and up != outside:
            seen[pid] = max(seen.get(pid, 0.0), seconds)


def main() -> int:
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__ or "")
        return 2
    out, command = Path(sys.argv[1]), sys.argv[2:]
    conf = os.environ.get("SLURM_CONF", "")
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    before: dict[int, float] = {}
    if conf:
        cluster_cpu(conf, -1, before)  # what the cluster had used already: not the command's
    busy0, t0 = busy_cpu_s(), time.monotonic()
    child = subprocess.Popen(command)
    seen: dict[int, float] = {}
    done = threading.Event()

    def sample() -> None:
        while conf and not done.is_set():
            cluster_cpu(conf, child.pid, seen)
            time.sleep(SAMPLE_S)

    sampler = threading.Thread(target=sample)
    sampler.start()
    code = child.wait()
    done.set()
    sampler.join()
    wall_s = time.monotonic() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "rc": code,
        "wall_s": round(wall_s, 1),
        "command_tree_cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "slurm_cluster_cpu_s": round(sum(s - before.get(p, 0.0) for p, s in seen.items()), 1)
        if conf
        else None,
        "machine_busy_cpu_s": round(busy_cpu_s() - busy0, 1),
        "load_before": [float(x) for x in load_before],
        "load_after": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]],
    }
    out.write_text(json.dumps(result) + "\n")
    print(json.dumps(result))
    return code


if __name__ == "__main__":
    sys.exit(main())

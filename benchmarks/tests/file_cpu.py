"""CPU-seconds and wall time of test files, each run alone, counting every process the tests start.

    PYTHONPATH=. .venv/bin/python benchmarks/tests/file_cpu.py [--repeat N] [--out OUT.json] FILE [FILE ...] [-- PYTEST-ARGS]

Each FILE runs as `python -m pytest -q -p no:cacheprovider FILE` below this process, which makes itself the child
subreaper (prctl PR_SET_CHILD_SUBREAPER): a process the tests detach (a kept Prefect server, the kept worker, Slurm's
daemons, Chromium) is re-parented here when its parent exits, not to init, so its CPU-seconds are counted when it is
reaped (`RUSAGE_CHILDREN`, exact). What is still running when pytest ends (kept servers wait CAMPAIGN_SERVER_IDLE_S
for another command) is stopped then (SIGTERM, SIGKILL after 10 s) and counted up to that moment: the suite pays
for it too, with its idle polling. Processes outside that tree that carry the file's tag (CAMPAIGN_TEST_TAG in their
environment, inherited from the run) are sampled every 0.2 s and added.

Every 0.2 s the tree is also sampled to say where the CPU went: each process is classed by its command line
(Prefect server, kept worker, JAX trainer, Chromium, Slurm, a `campaign` command, pytest itself, other), counted
once, and its own CPU-seconds at its last sample summed per class ("unsampled" is what ended between samples: short
processes and last fractions of a second). The machine's busy CPU-seconds (/proc/stat, every user's) are given
beside: on a shared machine, what exceeds the tree's is other people's work. `--repeat N` runs each file N times and
reports the run with the fewest CPU-seconds.
"""

import argparse
import contextlib
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.2
TAG = "CAMPAIGN_TEST_TAG"
PR_SET_CHILD_SUBREAPER = 36
KINDS = (  # (class, any of these in the command line), first match wins
    ("campaign-cli", ("bin/campaign ", "-m campaign_cli", "-m flows.")),
    ("prefect-server", ("private_api_app", "prefect.server", "uvicorn", "prefect server")),
    ("kept-worker", ("kept_worker",)),
    ("jax-trainer", ("campaign.rehearsal.trainer", "campaign.rehearsal.distributed")),
    ("other-trainer", ("rehearsal_numpy_trainer", "contract_trainer")),
    ("chromium", ("chrom", "headless_shell")),
    ("slurm", ("slurmctld", "slurmd", "slurmstepd", "munged", "srun", "sbatch")),
    ("postgres", ("postgres",)),
    ("prefect-worker", ("prefect worker", "worker start")),
    ("pytest", ("-m pytest",)),
    ("dask", ("dask", "distributed")),
)


def busy_cpu_s() -> float:
    """The machine's CPU-seconds not idle since boot, every core."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICK


def kind_of(cmdline: str) -> str:
    for kind, needles in KINDS:
        if any(needle in cmdline for needle in needles):
            return kind
    return "python-other" if "python" in cmdline else "other"


def snapshot() -> dict[int, tuple[int, float, bytes]]:
    """pid -> (parent pid, own CPU-seconds, environ) of every process readable now."""
    procs = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            environ = (proc / "environ").read_bytes()
            procs[int(proc.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, environ)
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return procs


class Sampler:
    """Samples the processes below `root` (and those carrying `tag` elsewhere) every SAMPLE_S seconds."""

    def __init__(self, root: int, tag: str) -> None:
        self.root, self.marker = root, f"{TAG}={tag}".encode()
        self.cpu: dict[int, float] = {}  # (pid) -> largest own CPU-seconds seen
        self.kind: dict[int, str] = {}
        self.cmd: dict[int, str] = {}
        self.outside: set[int] = set()  # tagged processes not below root
        self.stop = threading.Event()

    def sample(self) -> None:
        procs = snapshot()
        for pid, (_, cpu, environ) in procs.items():
            up = pid
            while up > 1 and up != self.root and up in procs:
                up = procs[up][0]
            below = up == self.root and pid != self.root
            tagged = self.marker in environ.split(b"\0")
            if not (below or tagged):
                continue
            if pid not in self.kind:
                try:
                    cmd = (
                        Path(f"/proc/{pid}/cmdline")
                        .read_bytes()
                        .replace(b"\0", b" ")
                        .decode(errors="replace")
                    )
                except OSError:
                    continue
                self.kind[pid] = kind_of(cmd)
                self.cmd[pid] = cmd
            if not below:
                self.outside.add(pid)
            self.cpu[pid] = max(self.cpu.get(pid, 0.0), cpu)

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            self.sample()


def reap_all(deadline_s: float) -> None:
    """Wait for every child (re-parented ones too); after `deadline_s`, SIGTERM them, then SIGKILL."""
    me = os.getpid()

    def children() -> list[int]:
        return [pid for pid, (parent, _, _) in snapshot().items() if parent == me]

    def reap() -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    for sig, wait_s in ((None, deadline_s), (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        for pid in children() if sig else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            reap()
            if not children():
                return
            time.sleep(0.1)
    reap()


def run_file(path: str, pytest_args: list[str], linger_s: float, top: int = 0) -> dict:
    tag = f"{path}:{time.time_ns()}"
    env = {**os.environ, TAG: tag}
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0, wall0 = busy_cpu_s(), time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args, path],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    sampler = Sampler(os.getpid(), tag)
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    output = proc.communicate()[0].decode(errors="replace")
    pytest_wall = time.monotonic() - wall0
    reap_all(linger_s)
    sampler.stop.set()
    thread.join()
    wall, busy = time.monotonic() - wall0, busy_cpu_s() - busy0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    tree = (after.ru_utime - before_children.ru_utime) + (after.ru_stime - before_children.ru_stime)
    outside = sum(sampler.cpu[pid] for pid in sampler.outside)
    by_kind: dict[str, dict[str, float]] = {}
    for pid, kind in sampler.kind.items():
        entry = by_kind.setdefault(kind, {"n": 0, "cpu_s": 0.0})
        entry["n"] += 1
        entry["cpu_s"] += sampler.cpu.get(pid, 0.0)
    sampled = sum(entry["cpu_s"] for entry in by_kind.values())
    total = tree + outside
    by_kind["unsampled"] = {"n": 0, "cpu_s": max(0.0, total - sampled)}
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    return {
        "file": path,
        "result": summary,
        "rc": proc.returncode,
        "pytest_wall_s": round(pytest_wall, 1),
        "wall_s": round(wall, 1),
        "cpu_s": round(total, 1),
        "machine_busy_cpu_s": round(busy, 1),
        "by_kind": {k: {"n": v["n"], "cpu_s": round(v["cpu_s"], 1)} for k, v in sorted(by_kind.items())},
        "output_tail": output.strip().splitlines()[-15:] if proc.returncode else [],
        "top": [
            (round(sampler.cpu[pid], 1), sampler.kind[pid], sampler.cmd[pid][:160])
            for pid in sorted(sampler.cpu, key=lambda p: -sampler.cpu[p])[:top]
            if pid in sampler.cmd
        ],
    }


def main() -> int:
    argv = sys.argv[1:]
    pytest_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--top", type=int, default=0, help="also list the N processes that used the most CPU")
    parser.add_argument(
        "--linger-s", type=float, default=0.0, help="seconds to let detached processes end by themselves"
    )
    args = parser.parse_args(argv)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    results = []
    for path in args.files:
        runs = [run_file(path, pytest_args, args.linger_s, args.top) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r["cpu_s"])
        best["runs_cpu_s"] = [r["cpu_s"] for r in runs]
        results.append(best)
        kinds = ", ".join(
            f"{k} {v['n']}x {v['cpu_s']}" for k, v in best["by_kind"].items() if v["cpu_s"] >= 0.5
        )
        sys.stdout.write(
            f"{path}: {best['cpu_s']} CPU-s, {best['pytest_wall_s']} s wall (pytest), machine busy "
            f"{best['machine_busy_cpu_s']} CPU-s; {best['result']}\n    {kinds}\n"
        )
        for cpu, kind, cmd in best["top"]:
            sys.stdout.write(f"    {cpu:7.1f} {kind:14} {cmd}\n")
        for line in best["output_tail"]:
            sys.stdout.write(f"    | {line}\n")
        sys.stdout.flush()
        if args.out:
            args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

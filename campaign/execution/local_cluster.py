"""A Slurm cluster on this one machine, for trying the Slurm backend and its spares without a real cluster.

munged, slurmctld and one slurmd per node from Debian's packages (`slurmctld slurmd munge`), each with its files in
one folder and ports of its own. Its nodes are node names on this host (`slurmd -N NAME`, each with its own port:
Debian's 22.05 slurmd runs several side by side), so a job can span several nodes, lose one and go on on another.
Job completions go to a text log (`JobCompType=jobcomp/filetxt`), which `sacct --completion` reads with no
accounting database; a node set DOWN stays down until it is RESUMEd (`ReturnToService=1`).

Two ways to hold it: `start_cluster` keeps the daemons as children (a test stops exactly what it started), and
`start_detached` leaves them running after the command that started them exits, their process ids in
`cluster.json` of the folder, for `scripts/slurm-local-cluster start|stop|status`. Either stop cancels the
cluster's jobs first and kills what they left (a job's `slurmstepd` outlives its slurmd: see `end_jobs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
DEFAULT_NODES = 4
RECORD = "cluster.json"


@dataclass
class Cluster:
    folder: Path
    conf: Path
    host: str
    nodes: list[str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def stop(self) -> None:
        """End the cluster's jobs, then stop its daemons, then any job step left behind (see `end_jobs`)."""
        if any(proc.poll() is None for proc in self.processes):
            end_jobs({**os.environ, **self.env()})
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        kill_steps(self.conf)


def end_jobs(env: dict[str, str], limit_s: float = 20.0) -> list[str]:
    """Cancel every job of the cluster `env` names and wait (up to `limit_s`) until Slurm has ended them; the jobs
    cancelled. A job's steps outlive the daemons (each `slurmstepd` is a process of its own): stopped under a
    running job, they wait for good to report its end to a slurmd that is gone, the job's processes with them."""

    def queued() -> list[str]:
        done = subprocess.run(
            ["squeue", "-h", "-o", "%A"], env=env, capture_output=True, text=True, check=False, timeout=30
        )
        return done.stdout.split() if done.returncode == 0 else []

    jobs = queued()
    if jobs:
        subprocess.run(["scancel", *jobs], env=env, capture_output=True, check=False, timeout=30)
    until = time.monotonic() + limit_s
    while queued() and time.monotonic() < until:  # a cancelled job is listed until it has completed (CG)
        time.sleep(0.2)
    return jobs


def step_processes(conf: Path) -> list[int]:
    """The `slurmstepd` processes of the cluster of `conf` (their environment names it, as its slurmd's did) and
    every process below them: what a job leaves running."""
    parent: dict[int, int] = {}
    steps = []
    marker = f"SLURM_CONF={conf}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if (entry / "comm").read_text().strip() == "slurmstepd" and marker in (
                entry / "environ"
            ).read_bytes().split(b"\0"):
                steps.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    below = set(steps)
    grew = True
    while grew:
        more = {pid for pid, ppid in parent.items() if ppid in below} - below
        below |= more
        grew = bool(more)
    return sorted(below)


def kill_steps(conf: Path) -> list[int]:
    """SIGKILL what the cluster's jobs left running once its daemons stopped (`step_processes`); the pids."""
    pids = step_processes(conf)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def why_not() -> str | None:
    """Why a local cluster cannot run here, or None."""
    missing = [
        d for d in (*DAEMONS, "sbatch", "srun", "scontrol", "scancel", "sinfo") if shutil.which(d) is None
    ]
    if missing:
        return (
            f"Slurm is not installed here ({', '.join(missing)} missing; "
            "`apt-get install slurmctld slurmd slurm-client munge` installs it)"
        )
    if os.geteuid() != 0:
        return "slurmd needs root to run jobs as their user: run this as root"
    return None


def _free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def write_config(folder: Path, nodes: int) -> tuple[Path, str, list[str], Path, Path]:
    """slurm.conf, the munge key and the folders of a `nodes`-node cluster in `folder`:
    (conf, host, node names, munge key, munge socket)."""
    host = socket.gethostname().split(".")[0]
    for sub in ("state", "spool"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    sock = folder / "munge.sock"
    conf = folder / "slurm.conf"
    names = [f"n{i}" for i in range(nodes)]
    ports = [_free_port() for _ in names]
    node_lines = [
        f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs={os.cpu_count() or 1} "
        "State=UNKNOWN"
        for name, port in zip(names, ports, strict=True)
    ]
    conf.write_text(
        "\n".join(
            [
                "ClusterName=campaign-local",
                f"SlurmctldHost={host}",
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={ports[0]}",
                "AuthType=auth/munge",
                f"AuthInfo=socket={sock}",
                "CredType=cred/munge",
                f"StateSaveLocation={folder / 'state'}",
                f"SlurmdSpoolDir={folder / 'spool'}/%n",
                f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
                f"SlurmdPidFile={folder / 'slurmd.%n.pid'}",
                f"SlurmctldLogFile={folder / 'slurmctld.log'}",
                f"SlurmdLogFile={folder / 'slurmd.%n.log'}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "JobCompType=jobcomp/filetxt",
                f"JobCompLoc={folder / 'jobcomp.txt'}",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "ReturnToService=1",
                "JobRequeue=1",
                "MpiDefault=none",
                "MinJobAge=3600",
                *node_lines,
                f"PartitionName=local Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    return conf, host, names, key, sock


def daemon_commands(folder: Path, conf: Path, names: list[str], key: Path, sock: Path) -> list[list[str]]:
    """munged, slurmctld and one slurmd per node, each in the foreground (its parent holds it)."""
    return [
        [
            "munged",
            "-F",
            f"--key-file={key}",
            f"--socket={sock}",
            f"--pid-file={folder / 'munged.pid'}",
            f"--log-file={folder / 'munged.log'}",
            f"--seed-file={folder / 'munge.seed'}",
            "-f",
        ],
        ["slurmctld", "-D", "-i", "-f", str(conf)],
        *[["slurmd", "-D", "-N", name, "-f", str(conf)] for name in names],
    ]


def _launch(
    folder: Path, commands: list[list[str]], sock: Path, env: dict[str, str], detached: bool
) -> list[subprocess.Popen[bytes]]:
    processes = []
    with open(folder / "daemons.log", "ab") as logs:
        for command in commands:
            processes.append(
                subprocess.Popen(command, env=env, stdout=logs, stderr=logs, start_new_session=detached)
            )
            if command[0] == "munged":
                for _ in range(100):
                    if sock.exists():
                        break
                    time.sleep(0.05)
    return processes


def wait_up(env: dict[str, str], nodes: int, limit_s: float = 20.0) -> bool:
    """Whether every node is up (idle, mixed or allocated) within `limit_s`."""
    until = time.monotonic() + limit_s
    while time.monotonic() < until:
        done = subprocess.run(
            ["sinfo", "-N", "-h", "-o", "%T"], env=env, capture_output=True, text=True, check=False
        )
        states = done.stdout.split()
        if done.returncode == 0 and len(states) == nodes and set(states) <= {"idle", "mixed", "allocated"}:
            return True
        time.sleep(0.1)
    return False


def start_cluster(folder: Path, nodes: int = 2) -> tuple[Cluster | None, str]:
    """A running cluster of `nodes` nodes on this host in `folder`, its daemons children of this process, or
    (None, why not)."""
    reason = why_not()
    if reason:
        return None, reason
    conf, host, names, key, sock = write_config(folder, nodes)
    cluster = Cluster(folder, conf, host, names)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster.processes = _launch(folder, daemon_commands(folder, conf, names, key, sock), sock, env, False)
    if wait_up(env, nodes):
        return cluster, ""
    cluster.stop()
    return None, f"the {nodes}-node Slurm cluster did not come up (logs in {folder})"


# ------------------------------------------------------------------------------ held by a record on disk


def _alive(pid: int, command: str) -> bool:
    """Whether `pid` is still the daemon `command` that was started (a reused pid is not)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return False
    return Path(cmdline).name == command


def read_record(folder: Path) -> dict[str, object] | None:
    path = folder / RECORD
    if not path.exists():
        return None
    loaded = json.loads(path.read_text())
    return loaded if isinstance(loaded, dict) else None


def running_daemons(folder: Path) -> list[tuple[int, str]]:
    """(pid, daemon) of the record's daemons that still run."""
    record = read_record(folder) or {}
    daemons = record.get("daemons", [])
    out = []
    for item in daemons if isinstance(daemons, list) else []:
        pid, command = int(item["pid"]), str(item["command"])
        if _alive(pid, command):
            out.append((pid, command))
    return out


def start_detached(folder: Path, nodes: int = DEFAULT_NODES) -> tuple[Path | None, str]:
    """Start a cluster that outlives this process; (its slurm.conf, "") or (None, why not). A cluster already
    running in `folder` is kept (its conf is returned)."""
    reason = why_not()
    if reason:
        return None, reason
    folder.mkdir(parents=True, exist_ok=True)
    if running_daemons(folder):
        return folder / "slurm.conf", "already running"
    conf, _, names, key, sock = write_config(folder, nodes)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    commands = daemon_commands(folder, conf, names, key, sock)
    processes = _launch(folder, commands, sock, env, True)
    record = {
        "conf": str(conf),
        "nodes": names,
        "daemons": [{"pid": p.pid, "command": c[0]} for p, c in zip(processes, commands, strict=True)],
    }
    (folder / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    if wait_up(env, nodes):
        return conf, ""
    stop_detached(folder)
    return None, f"the {nodes}-node Slurm cluster did not come up (logs in {folder})"


def stop_detached(folder: Path, limit_s: float = 15.0) -> list[tuple[int, str]]:
    """End the cluster's jobs, stop the daemons the record names (SIGTERM, then SIGKILL after `limit_s`), slurmd
    first, then what the jobs left running (`end_jobs`); the daemons stopped."""
    daemons = running_daemons(folder)
    conf = Path(str((read_record(folder) or {}).get("conf") or folder / "slurm.conf"))
    if daemons:
        end_jobs({**os.environ, "SLURM_CONF": str(conf)})
    for pid, _ in reversed(daemons):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    until = time.monotonic() + limit_s
    while any(_alive(p, c) for p, c in daemons) and time.monotonic() < until:
        time.sleep(0.1)
    for pid, command in daemons:
        if _alive(pid, command):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    kill_steps(conf)
    with contextlib.suppress(FileNotFoundError):
        (folder / RECORD).unlink()
    return daemons


def status(folder: Path) -> tuple[bool, str]:
    """(running, what sinfo says or why not)."""
    record = read_record(folder)
    if record is None or not running_daemons(folder):
        return False, f"no local Slurm cluster runs from {folder}"
    env = {**os.environ, "SLURM_CONF": str(record["conf"])}
    done = subprocess.run(
        ["sinfo", "-N", "-o", "%N %T %E"], env=env, capture_output=True, text=True, check=False
    )
    return done.returncode == 0, (done.stdout or done.stderr).strip()

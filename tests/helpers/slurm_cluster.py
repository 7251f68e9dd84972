"""A Slurm cluster on this machine for a test: munged, slurmctld and one slurmd per node from Debian's packages,
each with its files in a temporary folder and ports of its own, stopped (exactly the processes it started) at the
end. Its nodes are node names on this one host (`slurmd -N NAME`, each with its own port: Debian's 22.05 slurmd
runs several side by side), so a job can be requeued onto another node after one is excluded or set DOWN.
Job completions go to a text log (`JobCompType=jobcomp/filetxt`), which `sacct --completion` reads with no
accounting database; a node set DOWN stays down until it is RESUMEd (`ReturnToService=1`).

`start_cluster` returns None with the reason where it cannot run (the packages are missing, or not root: slurmd
runs jobs as their user and needs root to do so).
"""

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


@dataclass
class Cluster:
    folder: Path
    conf: Path
    host: str
    nodes: list[str]
    processes: list[subprocess.Popen] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def stop(self) -> None:
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def why_not() -> str | None:
    missing = [d for d in (*DAEMONS, "sbatch", "scontrol", "scancel", "sinfo") if shutil.which(d) is None]
    if missing:
        return f"Slurm is not installed here ({', '.join(missing)} missing; .ci/run installs slurmctld slurmd munge)"
    if os.geteuid() != 0:
        return "slurmd needs root to run jobs, and the tests do not run as root"
    return None


def _free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_cluster(folder: Path, nodes: int = 2) -> tuple[Cluster | None, str]:
    """A running cluster of `nodes` nodes on this host in `folder`, or (None, why not)."""
    reason = why_not()
    if reason:
        return None, reason
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
                "ClusterName=campaign-test",
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
                f"PartitionName=test Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    cluster = Cluster(folder, conf, host, names)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    logs = open(folder / "daemons.log", "ab")  # noqa: SIM115 - kept open while the daemons run
    commands = [
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
    for command in commands:
        cluster.processes.append(subprocess.Popen(command, env=env, stdout=logs, stderr=logs))
        if command[0] == "munged":
            for _ in range(100):
                if sock.exists():
                    break
                time.sleep(0.05)
    for _ in range(200):
        done = subprocess.run(
            ["sinfo", "-N", "-h", "-o", "%T"], env=env, capture_output=True, text=True, check=False
        )
        states = done.stdout.split()
        if done.returncode == 0 and len(states) == nodes and set(states) <= {"idle", "mixed", "allocated"}:
            return cluster, ""
        time.sleep(0.1)
    cluster.stop()
    return None, f"the one-node Slurm cluster did not come up (logs in {folder})"

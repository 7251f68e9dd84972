"""A one-node Slurm cluster on this machine for a test: munged, slurmctld and slurmd from Debian's packages, each
with its files in a temporary folder and ports of its own, stopped (exactly the processes it started) at the end.

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


def start_cluster(folder: Path) -> tuple[Cluster | None, str]:
    """A running one-node cluster in `folder`, or (None, why not)."""
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
    conf.write_text(
        "\n".join(
            [
                "ClusterName=campaign-test",
                f"SlurmctldHost={host}",
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                "AuthType=auth/munge",
                f"AuthInfo=socket={sock}",
                "CredType=cred/munge",
                f"StateSaveLocation={folder / 'state'}",
                f"SlurmdSpoolDir={folder / 'spool'}",
                f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
                f"SlurmdPidFile={folder / 'slurmd.pid'}",
                f"SlurmctldLogFile={folder / 'slurmctld.log'}",
                f"SlurmdLogFile={folder / 'slurmd.log'}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "ReturnToService=2",
                "JobRequeue=1",
                "MpiDefault=none",
                "MinJobAge=3600",
                f"NodeName={host} CPUs={os.cpu_count() or 1} State=UNKNOWN",
                f"PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    cluster = Cluster(folder, conf, host)
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
        ["slurmd", "-D", "-f", str(conf)],
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
            ["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, check=False
        )
        if done.returncode == 0 and done.stdout.strip() in ("idle", "mixed", "allocated"):
            return cluster, ""
        time.sleep(0.1)
    cluster.stop()
    return None, f"the one-node Slurm cluster did not come up (logs in {folder})"

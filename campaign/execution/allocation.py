"""A multi-node run's Slurm allocation: job nodes plus spares in one batch job, each start of the trainer one
`srun` step inside it, one task per node.

The allocation is `sbatch --nodes=(job nodes + spares) --no-kill`: a node that fails does not end the job, only
the step that ran on it (Slurm ends a step on every rank when one of its nodes goes DOWN, and `--kill-on-bad-exit`
ends it when one rank exits non-zero). The batch script runs on the allocation's first node and waits for the
supervisor's word: a file `start-N.env` in the run's `control/` folder names start N's nodes, world size and
rendezvous; the script runs that step, writes its exit code to `exit-N` when it ends, and waits for the next. So
there is never more than one step, never two copies of a rank, and a supervisor started again reads where the job
is from these files. The script ends the job when campaign stops touching its heartbeat file (as the one-node
backend's does) or writes `release`. Its own node (the batch host) is never a spare: losing it ends the job.

Source: Slurm 22.05 `sbatch(1)` (--no-kill), `srun(1)` (--kill-on-bad-exit, --nodelist), `scancel(1)`, `squeue(1)`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from campaign.execution.slurm import ENDED, HEARTBEAT, is_node_lost, job_state, node_state

RECORD = "allocation.json"
CONTROL = "control"
# Starts inside the allocation, one srun step at a time, on the nodes the supervisor names.
BATCH_SCRIPT = """#!/bin/sh
# campaign: a multi-node allocation; each start of the trainer is one srun step the supervisor asks for
ctl="$CAMPAIGN_CONTROL_DIR"
stale() {
  seen=$(stat -c %Y "$CAMPAIGN_SUPERVISOR_HEARTBEAT" 2>/dev/null || echo 0)
  [ $(( $(date +%s) - seen )) -gt "${CAMPAIGN_SUPERVISOR_TIMEOUT_S:-60}" ]
}
n=$(cat "$ctl/next" 2>/dev/null || echo 0)
while :; do
  while [ ! -e "$ctl/start-$n.env" ]; do
    [ -e "$ctl/release" ] && exit 0
    if stale; then echo "campaign: the supervisor's heartbeat stopped; the allocation ends" >&2; exit 75; fi
    sleep 0.2
  done
  . "$ctl/start-$n.env"
  srun --kill-on-bad-exit=1 --nodes="$CAMPAIGN_DIST_WORLD" --ntasks="$CAMPAIGN_DIST_WORLD" --ntasks-per-node=1 \\
    --nodelist="$CAMPAIGN_RANK_NODES" --job-name="start-$n" "$@" >>"$ctl/start-$n.out" 2>>"$ctl/start-$n.err" &
  step=$!
  while kill -0 "$step" 2>/dev/null; do
    if stale; then echo "campaign: the supervisor's heartbeat stopped; the allocation ends" >&2; exit 75; fi
    [ -e "$ctl/release" ] && exit 0
    sleep 0.5
  done
  wait "$step"
  echo $? > "$ctl/exit-$n.partial" && mv "$ctl/exit-$n.partial" "$ctl/exit-$n"
  n=$((n + 1))
  echo "$n" > "$ctl/next"
done
"""


@dataclass(frozen=True)
class Allocation:
    """The run's batch job and the nodes Slurm gave it, in its order (the first is the batch host)."""

    job_id: str
    nodes: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"job_id": self.job_id, "nodes": list(self.nodes)}


def _run(args: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed ({done.returncode}): {done.stderr.strip()[:300]}")
    return done.stdout


def control_dir(folder: Path) -> Path:
    return folder / CONTROL


def recorded(folder: Path) -> Allocation | None:
    path = folder / RECORD
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return Allocation(str(data["job_id"]), tuple(data.get("nodes", ())))


def _save(folder: Path, allocation: Allocation) -> None:
    path = folder / RECORD
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(allocation.to_json()) + "\n")
    partial.replace(path)


def expand(nodelist: str) -> list[str]:
    """Slurm's compressed node list (n[0-3]) as names, in Slurm's order."""
    if not nodelist or nodelist.startswith("("):
        return []
    return _run(["scontrol", "show", "hostnames", nodelist]).split()


def node_address(node: str) -> str:
    """Where a node is reached (its NodeAddr; the name itself when Slurm gives none)."""
    with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
        text = _run(["scontrol", "show", "node", "-o", node])
        fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
        return fields.get("NodeAddr") or node
    return node


def submit(
    folder: Path,
    command: list[str],
    env: dict[str, str],
    nodes: int,
    exclude: list[str],
    partition: str | None = None,
    nodelist: list[str] | None = None,
) -> str:
    """Submit the allocation of `nodes` nodes (job nodes and spares), with `nodelist` among them; its job id,
    recorded."""
    ctl = control_dir(folder)
    ctl.mkdir(parents=True, exist_ok=True)
    for old in ctl.iterdir():  # a new allocation numbers its starts from the supervisor's next attempt
        if old.name != "next":
            old.unlink()
    script = folder / "allocation.sh"
    script.write_text(BATCH_SCRIPT)
    script.chmod(0o755)
    heartbeat = folder / HEARTBEAT
    heartbeat.touch()
    env = {
        **env,
        "CAMPAIGN_CONTROL_DIR": str(ctl),
        "CAMPAIGN_SUPERVISOR_HEARTBEAT": str(heartbeat),
    }
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    args = [
        "sbatch",
        "--parsable",
        "--no-kill",
        f"--nodes={nodes}",
        "--ntasks-per-node=1",
        f"--job-name=campaign-{folder.name}",
        f"--output={folder / 'logs' / 'allocation-%j.out'}",
        f"--error={folder / 'logs' / 'allocation-%j.err'}",
        f"--chdir={os.getcwd()}",
        "--export=ALL",
        *([f"--partition={partition}"] if partition else []),
        *([f"--exclude={','.join(exclude)}"] if exclude else []),
        *([f"--nodelist={','.join(nodelist)}"] if nodelist else []),
        str(script),
        *command,
    ]
    job_id = _run(args, env=env).strip().split(";")[0]
    _save(folder, Allocation(job_id, ()))
    return job_id


def running_nodes(folder: Path) -> Allocation | None:
    """The allocation once Slurm runs it (its nodes recorded), or None while it is pending."""
    known = recorded(folder)
    if known is None:
        return None
    state = job_state(known.job_id)
    if state is None or state.state != "RUNNING":
        return None
    text = _run(["scontrol", "show", "job", "-o", known.job_id])
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    nodes = expand(fields.get("NodeList", ""))
    batch = fields.get("BatchHost", "")
    ordered = ([batch] if batch in nodes else []) + [n for n in nodes if n != batch]
    allocation = Allocation(known.job_id, tuple(ordered))
    _save(folder, allocation)
    return allocation


def alive(folder: Path) -> bool:
    """Whether the run's allocation is still queued or running."""
    known = recorded(folder)
    state = job_state(known.job_id) if known else None
    return state is not None and state.state not in ENDED


def set_next(folder: Path, attempt: int) -> None:
    """The start number the batch script waits for next (a new allocation continues the run's numbering)."""
    ctl = control_dir(folder)
    ctl.mkdir(parents=True, exist_ok=True)
    (ctl / "next").write_text(f"{attempt}\n")


def request_start(folder: Path, attempt: int, variables: dict[str, str]) -> None:
    """Ask the batch script for start `attempt` with these variables (written whole, then renamed)."""
    ctl = control_dir(folder)
    lines = [f"export {key}='{value}'" for key, value in variables.items()]
    partial = ctl / f"start-{attempt}.env.partial"
    partial.write_text("\n".join(lines) + "\n")
    partial.replace(ctl / f"start-{attempt}.env")


def requested(folder: Path, attempt: int) -> bool:
    return (control_dir(folder) / f"start-{attempt}.env").exists()


def exit_code(folder: Path, attempt: int) -> int | None:
    """Start `attempt`'s srun exit code once it ended, else None."""
    path = control_dir(folder) / f"exit-{attempt}"
    if not path.exists():
        return None
    text = path.read_text().strip()
    return int(text) if text.lstrip("-").isdigit() else -1


def step_ids(job_id: str) -> list[str]:
    """The job's running steps other than its batch script (`JOB.N`)."""
    try:
        text = _run(["squeue", "-h", "-s", "-j", job_id, "-o", "%i"])
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        return []
    return [s for s in text.split() if s.split(".")[-1].isdigit()]


def signal_steps(job_id: str, name: str) -> None:
    """Signal every rank of the running start (e.g. KILL, STOP)."""
    for step in step_ids(job_id):
        with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
            _run(["scancel", f"--signal={name}", step])


def lost_nodes(nodes: list[str]) -> list[str]:
    """Those of `nodes` Slurm has as failed (DOWN, DRAIN, ...)."""
    return [n for n in nodes if is_node_lost(node_state(n))]


def release(folder: Path) -> None:
    """End the allocation: the batch script exits at its next look; a job still queued is cancelled."""
    ctl = control_dir(folder)
    if ctl.exists():
        (ctl / "release").touch()
    known = recorded(folder)
    state = job_state(known.job_id) if known else None
    if known and state is not None and state.state == "PENDING":
        with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
            _run(["scancel", known.job_id])

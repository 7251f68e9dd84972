"""Recovery times of a multi-node run on the local Slurm cluster, beside the simulator's assumptions for them.

    SLURM_CONF=... .venv/bin/python benchmarks/execution/multinode_recovery.py [--runs 1] [--steps 16]

Needs a 4-node local cluster (`eval "$(scripts/slurm-local-cluster start)"`). Each run trains the data-parallel
reference trainer (a 1-layer, width-32 model) on 3 job nodes with 1 spare, sets the last rank's node DOWN at step 8,
and prints, per recovery, detection (failure to `detected`), restart (detection to the next start's first step)
and rework (steps trained again since the last complete checkpoint, at the median step), with the run's wall and
CPU seconds; then the demo's node-scope failure assumptions (configs/campaigns/demo.yaml) for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from campaign.config import load_config
from campaign.execution.injection import Injection
from campaign.execution.multinode import MultiNodeSettings, supervise_multinode
from campaign.execution.multinode_summary import multinode_summary
from campaign.execution.supervisor import RealRunSettings
from campaign.rehearsal.harness import HarnessSettings, contract_env

REPO = Path(__file__).resolve().parents[2]
VOCAB, EVERY, BATCH = 32, 5, 6
SLOW = "n0=0.2,n1=0.2,n2=0.2,n3=0.2"  # 0.2 s a step on every node: the fault lands mid-run


def one_run(folder: Path, steps: int) -> dict[str, object]:
    rows = np.random.default_rng(0).integers(0, VOCAB, size=(steps * BATCH, 17)).astype(np.uint32)
    np.save(folder / "train.npy", rows)
    np.save(folder / "heldout.npy", rows[:12])
    harness = HarnessSettings([], steps, 3, EVERY, 600, 0, 0, BATCH * 16, batch_sequences=BATCH)
    env = contract_env(
        folder / "train.npy",
        folder / "heldout.npy",
        VOCAB,
        harness,
        folder / "run" / "checkpoints",
        folder / "run" / "metrics.jsonl",
        folder / "cache",
    )
    env["CAMPAIGN_REHEARSAL_MODEL"] = json.dumps(
        {"layers": 1, "hidden": 32, "heads": 2, "kv_heads": 1, "ffn_hidden": 64}
    )
    run = RealRunSettings(
        command=[sys.executable, "-m", "campaign.rehearsal.distributed"],
        env={**os.environ, **env, "PYTHONPATH": str(REPO), "CAMPAIGN_DIST_SLOW": SLOW},
        steps=steps,
        tokens_per_step=BATCH * 16,
        max_wall_s=600,
        hang_min_s=20,
        startup_s=300,
        backoff_s=0.1,
        injections=(Injection(8, "node_loss"),),
        backend="slurm",
    )
    began, cpu0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    journal = supervise_multinode(MultiNodeSettings(run, 3, 1), folder / "run")
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = multinode_summary(journal, steps, BATCH * 16, EVERY, 3, 2.0, 3, 1)["measured"]
    return {
        "end": journal.end_detail(),
        "wall_s": round(time.monotonic() - began, 1),
        "cpu_s_children": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1),
        "startup_s": m["startup_s"],
        "median_step_s": m["median_step_s"],
        "recoveries": m["recoveries"],
        "spares_used": m["spares_used"],
        "nodes_excluded": m["nodes_excluded"],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=16)
    args = parser.parse_args()
    if not os.environ.get("SLURM_CONF"):
        print('start the local cluster first: eval "$(scripts/slurm-local-cluster start)"', file=sys.stderr)
        return 2
    load = os.getloadavg()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
    ).stdout
    print(json.dumps({"commit": commit.strip(), "loadavg": [round(x, 1) for x in load]}))
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(one_run(Path(tmp), args.steps)))
    demo = load_config(REPO / "configs" / "campaigns" / "demo.yaml").config
    for category in demo.cluster.failures:
        if category.scope == "node":
            print(
                json.dumps(
                    {
                        "simulator": category.name,
                        "detect_s": category.detect_s,
                        "restart_s": category.restart_s,
                    }
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Side by side with Calculon on every published row: both models' errors in each publication's metric, both speeds.

Each row of tests/oracles/published_runs.py is given to both models with the same layout, batch and recompute
mode. Calculon runs in its own venv from a local copy beside the project, with its own shipped system files,
unedited: systems/a100_80g.json for the A100 rows, systems/h100_80g_nvl8.json for the H100 rows; for the
Korthikanti Table 5 rows it uses its own validation execution files (validation/seqsel/tab5/*.json) and model
files, exactly as its `llm-validation` command does. Other rows get execution files built the same way from the
publication's settings (below). Calculon models no embedding or output layer; its step time is converted into the
publication's metric exactly as ours is.

Setup, once, in a folder of your choice outside the repository (PEER_VENV):
    git clone https://github.com/calculon-ai/calculon $PEER_VENV/calculon-src
    python3 -m venv $PEER_VENV/calculon
    $PEER_VENV/calculon/bin/pip install -e $PEER_VENV/calculon-src pandas psutil
Run (or pass --calculon and --python instead of the two variables):
    CALCULON_DIR=$PEER_VENV/calculon-src CALCULON_PY=$PEER_VENV/calculon/bin/python \
        .venv/bin/python benchmarks/plan/compare_calculon.py [--repeats 5]
Speed: each model's median seconds per estimate (median over rows of each row's median over `repeats` rounds;
the rounds alternate Calculon and campaign, so machine load falls on both alike).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from campaign.plan import evaluate_layout
from tests.oracles.published_runs import PublishedRun, all_runs

HERE = Path(__file__).resolve().parent
TAB5_FILES = {"22B": "megatron-22B", "175B": "gpt3-175B", "530B": "turing-530B", "1T": "megatron-1T"}


def calculon_case(run: PublishedRun, root: Path) -> dict:
    cfg = run.config
    lay, plan, model = cfg.plan.layout, cfg.plan, cfg.model
    system = root / "systems" / ("a100_80g.json" if run.family == "A100" else "h100_80g_nvl8.json")
    if run.table == "korthikanti2022":
        size, mode = run.name.split()
        stem = TAB5_FILES[size]
        exe = json.loads(
            (
                root
                / "validation"
                / "seqsel"
                / "tab5"
                / f"{stem}_{'full' if mode == 'full' else 'seqsel'}.json"
            ).read_text()
        )
        app = json.loads((root / "models" / f"{stem}.json").read_text())
        return {"app": app, "exe": exe, "system": str(system)}
    app = {
        "hidden": model.hidden,
        "feedforward": model.ffn_hidden,
        "seq_size": model.seq_len,
        "attn_heads": model.heads,
        "attn_size": model.hidden // model.heads,
        "num_blocks": model.layers,
    }
    recompute = {"full": "full", "selective": "attn_only", "none": "none"}[plan.recompute]
    exe = {
        "num_procs": lay.world,
        "tensor_par": lay.tp,
        "pipeline_par": lay.pp,
        "data_par": lay.dp,
        "tensor_par_net": 0,
        "pipeline_par_net": 1,
        "data_par_net": 1,
        "batch_size": plan.global_batch_tokens // model.seq_len,
        "microbatch_size": plan.micro_batch,
        "datatype": "float16",
        "fused_activation": run.table == "mcore2024",
        "attention_type": "multihead",
        "activation_recompute": recompute,
        "pipeline_interleaving": lay.vpp,
        "optimizer_sharding": plan.zero_stage >= 1,
        "tensor_par_comm_type": "rs_ag" if plan.sequence_parallel else "ar",
        "tensor_par_overlap": "ring" if plan.overlap.tp and lay.tp > 1 else "none",
        "seq_par_ag_redo": plan.sequence_parallel,
        "data_par_overlap": plan.overlap.dp_grad_reduce,
        "weight_offload": False,
        "activations_offload": False,
        "optimizer_offload": False,
        "training": True,
    }
    return {"app": app, "exe": exe, "system": str(system)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--calculon", default=os.environ.get("CALCULON_DIR", ""), help="Calculon's source (CALCULON_DIR)"
    )
    parser.add_argument(
        "--python",
        default=os.environ.get("CALCULON_PY", ""),
        help="the Python of Calculon's venv (CALCULON_PY)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if not args.calculon or not args.python:
        parser.error(
            "set CALCULON_DIR and CALCULON_PY (or --calculon and --python): see benchmarks/README.md"
        )
    args.calculon, args.python = Path(args.calculon), Path(args.python)
    runs = all_runs()
    cases = [calculon_case(r, args.calculon) for r in runs]
    # Rounds alternate: every row through Calculon (its driver times each estimate inside its own process), then
    # every row through campaign; the per-row medians over rounds are compared.
    calc_times: list[list[float]] = [[] for _ in runs]
    our_times: list[list[float]] = [[] for _ in runs]
    theirs: list[dict] = []
    for _ in range(args.repeats):
        proc = subprocess.run(
            [str(args.python), str(HERE / "calculon_driver.py"), "1"],
            input=json.dumps(cases),
            capture_output=True,
            text=True,
            check=False,
            cwd="/",
        )
        if proc.returncode:
            raise SystemExit(f"Calculon driver failed:\n{proc.stderr[-3000:]}")
        theirs = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()][:-1]
        for i, res in enumerate(theirs):
            calc_times[i].append(res["seconds_per_estimate"])
        for i, run in enumerate(runs):
            t0 = time.perf_counter()
            evaluate_layout(run.config, run.config.plan.layout)
            our_times[i].append(time.perf_counter() - t0)
    calc_speed = statistics.median(statistics.median(t) for t in calc_times)
    our_speeds = []
    print(
        f"{'table':16s} {'row':15s} {'published':>9s} {'campaign':>9s} {'err':>6s} {'Calculon':>9s} {'err':>6s}"
    )
    by_table: dict[str, dict[str, list[float]]] = {}
    for i, (run, res) in enumerate(zip(runs, theirs, strict=False)):
        step = evaluate_layout(run.config, run.config.plan.layout).step_time_s
        our_speeds.append(statistics.median(our_times[i]))
        mine = 100 * run.metric(step)
        errs = by_table.setdefault(run.table, {"campaign": [], "calculon": []})
        errs["campaign"].append(abs(mine - 100 * run.published))
        if res["step_s"]:
            calc = 100 * run.metric(res["step_s"])
            errs["calculon"].append(abs(calc - 100 * run.published))
            calc_txt = f"{calc:8.1f}% {calc - 100 * run.published:+6.1f}"
        else:
            calc_txt = f"  rejected: {res['error'][:50]}"
        print(
            f"{run.table:16s} {run.name:15s} {100 * run.published:8.1f}% {mine:8.1f}% "
            f"{mine - 100 * run.published:+6.1f} {calc_txt}"
        )
    print("\nmean / max |error|, points of each publication's metric")
    allc: list[float] = []
    allk: list[float] = []
    for table, errs in by_table.items():
        c, k = errs["campaign"], errs["calculon"]
        allc += c
        allk += k
        print(
            f"{table:16s} campaign {statistics.mean(c):4.1f} / {max(c):4.1f} ({len(c)} rows)   "
            f"Calculon {statistics.mean(k):4.1f} / {max(k):4.1f} ({len(k)} rows)"
        )
    print(
        f"{'all rows':16s} campaign {statistics.mean(allc):4.1f} / {max(allc):4.1f} ({len(allc)} rows)   "
        f"Calculon {statistics.mean(allk):4.1f} / {max(allk):4.1f} ({len(allk)} rows)"
    )
    ours_s = statistics.median(our_speeds)
    print(
        f"\nspeed, median seconds per estimate: campaign evaluate_layout {ours_s * 1e6:.0f} us, "
        f"Calculon {calc_speed * 1e6:.0f} us ({calc_speed / ours_s:.1f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

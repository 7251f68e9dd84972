"""Campaign's accounting of a real run against the trainer's own wall-clock log, per case.

Runs the trainer written from the contract alone (tests/helpers/contract_trainer.py) under the local backend's
supervisor, once per case, and prints one Markdown table row each: campaign's ETTR, the trainer's own, their
relative difference, the final step each counts, steps trained again (campaign's, expected, the trainer's), and
how the run ended.

    PYTHONPATH=. .venv/bin/python benchmarks/execution/accounting.py [--steps 100] [--step-s 0.1] [--repeats 1]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from campaign.execution.injection import Injection
from campaign.execution.measured import measured_summary
from campaign.execution.policy import outcome
from campaign.execution.supervisor import RealRunSettings, supervise
from campaign.rehearsal.harness import HarnessSettings, contract_env

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.helpers.contract_trainer import own_accounting

TRAINER = REPO / "tests" / "helpers" / "contract_trainer.py"
VOCAB, EVERY, TOKENS = 16, 10, 128


def cases(steps: int) -> list[tuple[str, list[Injection], dict[str, str], dict[str, object]]]:
    torn = str(steps // 2)
    kill_after_torn = steps // 2 + 5
    return [
        ("sound checkpoints, 3 injected kills", [Injection(s, "kill") for s in (25, 52, 78)], {}, {}),
        (
            "torn checkpoint, falls back (sha256)",
            [Injection(kill_after_torn, "kill")],
            {"CONTRACT_TRAINER_TORN": torn},
            {},
        ),
        (
            "torn checkpoint, nothing can load it",
            [Injection(kill_after_torn, "kill")],
            {"CONTRACT_TRAINER_TORN": torn, "CONTRACT_TRAINER_VERIFY": "0"},
            {},
        ),
        ("crash on every start", [], {"CONTRACT_TRAINER_CRASH_ON_START": "1"}, {}),
        ("organic hang (SIGTERM, grace)", [], {"CONTRACT_TRAINER_HANG_AT": str(steps // 3)}, {}),
        ("step number stalls", [], {"CONTRACT_TRAINER_STALL_AT": str(steps // 3)}, {}),
        ("window ends first", [], {}, {"max_wall_s": steps * 0.09}),
    ]


def run_case(root: Path, steps: int, step_s: float, injections, trainer, extra) -> dict[str, object]:
    rows = np.random.default_rng(0).integers(0, VOCAB, size=(steps * 4, 33)).astype(np.uint32)
    np.save(root / "train.npy", rows)
    np.save(root / "heldout.npy", rows[:20])
    folder = root / "run"
    harness = HarnessSettings(
        [],
        steps,
        3,
        EVERY,
        600,
        0,
        0,
        TOKENS,
        batch_sequences=4,
        extra_env={
            "CONTRACT_TRAINER_LOG": str(root / "log.jsonl"),
            "CONTRACT_TRAINER_STEP_S": str(step_s),
            **trainer,
        },
    )
    env = contract_env(
        root / "train.npy",
        root / "heldout.npy",
        VOCAB,
        harness,
        folder / "checkpoints",
        folder / "metrics.jsonl",
        root / "cache",
    )
    options = {
        "max_wall_s": 600.0,
        "hang_min_s": 1.0,
        "backoff_s": 0.1,
        "stop_grace_s": 3.0,
        "nodes": ("n0", "n1", "n2"),
        **extra,
    }
    settings = RealRunSettings(
        command=[sys.executable, str(TRAINER)],
        env={**os.environ, **env},
        steps=steps,
        tokens_per_step=TOKENS,
        injections=tuple(injections),
        **options,  # type: ignore[arg-type]
    )
    began = time.process_time()
    journal = supervise(settings, folder)
    summary = measured_summary(journal, steps, TOKENS, EVERY, 3, 2.0)
    own = own_accounting(root / "log.jsonl", steps)
    m = summary.measured_run()
    return {
        "ettr": summary.ettr,
        "own_ettr": own["ettr"],
        "final": m.final_step,
        "own_final": own["final_step"],
        "again": m.steps_trained_again,
        "expected": m.rework_steps_expected,
        "own_again": own["trained_again"],
        "wall": summary.window_s,
        "own_wall": own["wall_s"],
        "outcome": outcome(journal),
        "excluded": len(journal.kinds("node_excluded")),
        "cpu": time.process_time() - began,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--step-s", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(
        "| case | campaign ETTR | trainer's ETTR | difference | final step (campaign / trainer) | trained again "
        "(campaign / expected / trainer) | wall s (campaign / trainer) | outcome | nodes excluded |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, injections, trainer, extra in cases(args.steps):
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                r = run_case(Path(tmp), args.steps, args.step_s, injections, trainer, extra)
            diff = (r["ettr"] - r["own_ettr"]) / r["own_ettr"] if r["own_ettr"] else 0.0
            print(
                f"| {name} | {r['ettr']:.3f} | {r['own_ettr']:.3f} | {100 * diff:+.1f}% | {r['final']} / {r['own_final']} "
                f"| {r['again']} / {r['expected']} / {r['own_again']} | {r['wall']:.1f} / {r['own_wall']:.1f} "
                f"| {r['outcome']} | {r['excluded']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()

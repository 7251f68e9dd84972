"""The plan against published production runs: uncalibrated (with its band) and calibrated on one run of each family.

For each run of tests/oracles/production_runs.py: the published step time, the uncalibrated model's, their ratio and
whether the band holds it; then, for every pair of runs of the same model, stack and sequence length, the error of
the plan calibrated on one (`plan.measured`) at the other's scale, against the uncalibrated error there.

    .venv/bin/python benchmarks/plan/production_runs.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from campaign.plan import make_plan
from tests.oracles.production_runs import FITTED, all_production_runs, with_measured


def main() -> int:
    runs = all_production_runs()
    print(f"{'run':38s} {'split':8s} {'published':>9s} {'model':>8s} {'ratio':>6s} {'band (s)':>17s} in")
    for r in runs:
        p = make_plan(r.config)
        low, high = p.step_time_range_s
        split = "fitted" if r.family in FITTED else "held-out"
        inside = "yes" if low <= r.step_s <= high else "NO"
        print(
            f"{r.name:38s} {split:8s} {r.step_s:9.2f} {p.step_time_s:8.2f} {r.step_s / p.step_time_s:6.3f} "
            f"{low:8.2f}-{high:8.2f} {inside}"
        )
    print()
    print(f"{'calibrated on':38s} {'predicts':38s} {'calibrated':>10s} {'uncalibrated':>12s}")
    worst: dict[str, float] = {}
    for measured in runs:
        for target in runs:
            same = (
                target.family == measured.family
                and target.config.model.seq_len == measured.config.model.seq_len
            )
            if target is measured or not same:
                continue
            calibrated = make_plan(with_measured(target, measured)).step_time_s / target.step_s - 1.0
            raw = make_plan(target.config).step_time_s / target.step_s - 1.0
            worst[target.family] = max(worst.get(target.family, 0.0), abs(calibrated))
            print(f"{measured.name:38s} {target.name:38s} {calibrated:+10.1%} {raw:+12.1%}")
    print()
    for family, error in worst.items():
        print(f"{family}: worst calibrated error at another scale {error:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Fit the kernel calibration of each accelerator family on its in-sample published table; print fit and residuals.

A100: Megatron-LM 2021 weak scaling (10 rows). H100: Megatron-Core 2024 README table (9 rows). Korthikanti et
al. 2022 Table 5 (A100) is out of sample: printed with the A100 fit, never fitted. The parameters fitted are
`accelerator.kernels` (gemm_peak_fraction, gemm_half_k, kernel_gap_us and, for H100, memory_bw_fraction; A100's
memory_bw_fraction and both attention_peak_fractions are not identifiable from these tables and stay at the
values the accelerator files state with their sources); residuals are in points of each publication's own metric. Least squares
(scipy.optimize.least_squares, trust-region reflective within physical bounds) from several starting points.

    .venv/bin/python benchmarks/plan/calibrate.py           # fit, print, compare with the shipped files
    .venv/bin/python benchmarks/plan/calibrate.py --check   # evaluate the shipped calibration only (no fit)

Copy the printed kernels block into configs/accelerators/<family>.yaml; the reference tests then hold the rows to
their tolerances with exactly those values.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from campaign.plan import evaluate_layout
from tests.oracles.published_runs import (
    accelerator,
    korthikanti_2022,
    mcore_2024,
    megatron_2021,
)

# name: (lower, upper) physical bounds. Attention: FlashAttention-2 on H100 reaches ~35 % of peak fwd+bwd and
# FlashAttention-3 up to ~75 % (Shah et al. 2024, arXiv 2407.08608). gemm_half_k and kernel_gap_us: 0 is the
# physical floor (no short-K penalty, no idle gap), so a fit there means the table shows no such effect.
# memory_bw_fraction is an effective rate: the bytes the model itemizes per memory-bound kernel (norms, residuals,
# activation, RoPE, cross entropy, optimizer) over the time those kernels take. A single large copy reaches 80-90 %
# of HBM peak; the floor of 0.2 leaves room for what the itemized bytes leave out (fp32 up-casts and statistics
# inside norms and softmax, layout copies, the SMs that overlapped TP/DP communication kernels take from the
# kernels beside them). The previous floor of 0.5 was binding on H100 (the fit stopped on it); free, it lands
# inside the range at ~0.29 with kernel_gap_us at its 0 floor.
BOUNDS = {
    "gemm_peak_fraction": (0.4, 0.95),
    "gemm_half_k": (0.0, 4096.0),
    "attention_peak_fraction": (0.3, 0.8),
    "memory_bw_fraction": (0.2, 0.95),
    "kernel_gap_us": (0.0, 50.0),
}
FAMILIES = {
    # A100: memory_bw_fraction is not identifiable from the table (a flat direction against gemm_half_k: free, it
    # runs to either bound with the same residuals); it stays at the accelerator file's stated value.
    "A100": {
        "fit": ("gemm_peak_fraction", "gemm_half_k", "kernel_gap_us"),
        "rows": megatron_2021,
        "out_of_sample": korthikanti_2022,
    },
    "H100": {
        "fit": ("gemm_peak_fraction", "gemm_half_k", "memory_bw_fraction", "kernel_gap_us"),
        "rows": mcore_2024,
        "out_of_sample": None,
    },
}


def residual_points(rows) -> np.ndarray:
    return np.array(
        [
            100.0 * (r.metric(evaluate_layout(r.config, r.config.plan.layout).step_time_s) - r.published)
            for r in rows
        ]
    )


def fit(family: str) -> dict:
    spec = FAMILIES[family]
    names = spec["fit"]
    lo = np.array([BOUNDS[n][0] for n in names])
    hi = np.array([BOUNDS[n][1] for n in names])

    def resid(x: np.ndarray) -> np.ndarray:
        return residual_points(spec["rows"](dict(zip(names, map(float, x), strict=False))))

    best = None
    for start in (0.3, 0.5, 0.7):
        x0 = lo + start * (hi - lo)
        sol = least_squares(resid, x0, bounds=(lo, hi), diff_step=1e-3, x_scale=hi - lo)
        if best is None or sol.cost < best.cost:
            best = sol
    return {n: round(float(v), 4 if n != "gemm_half_k" else 1) for n, v in zip(names, best.x, strict=False)}


def report(title: str, rows, kernels: dict | None = None) -> list[float]:
    res = residual_points(rows)
    print(f"\n{title}")
    print(f"{'row':16s} {'published':>9s} {'model':>7s} {'error':>7s}")
    for r, e in zip(rows, res, strict=False):
        print(f"{r.name:16s} {100 * r.published:8.1f}% {100 * r.published + e:6.1f}% {e:+6.1f}")
    print(f"mean |error| {np.mean(np.abs(res)):.2f} points, max {np.max(np.abs(res)):.2f} ({len(res)} rows)")
    return list(res)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="evaluate the shipped calibration, do not fit")
    parser.add_argument(
        "--family", choices=sorted(FAMILIES), action="append", help="only this family (repeatable)"
    )
    args = parser.parse_args(argv)
    everything: list[float] = []
    for family, spec in FAMILIES.items():
        if args.family and family not in args.family:
            continue
        shipped = accelerator(family)["kernels"]
        if args.check:
            kernels = None
        else:
            kernels = fit(family)
            print(f"\n== {family}: fitted kernels (shipped in configs/accelerators):")
            for name, value in kernels.items():
                print(f"  {name}: {value}    (shipped {shipped[name]})")
        everything += report(f"{family} in-sample: {spec['rows'].__name__}", spec["rows"](kernels))
        if spec["out_of_sample"]:
            everything += report(
                f"{family} out-of-sample: {spec['out_of_sample'].__name__}", spec["out_of_sample"](kernels)
            )
    allres = np.abs(np.array(everything))
    print(f"\nall rows: mean |error| {allres.mean():.2f} points, max {allres.max():.2f} ({len(allres)} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

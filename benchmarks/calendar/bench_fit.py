"""Where a booking fits on a busy calendar: the sweep (`campaign.calendar.timeline`, O(n log n)) against the first,
quadratic implementation (tests/oracles/calendar_quadratic_fit.py), side by side on the same random calendars.

    .venv/bin/python benchmarks/calendar/bench_fit.py [--sizes 100,1000,5000] [--runs 3] [--skip-quadratic-above N]

Each size: a seeded calendar of n bookings (1-32 of 64 nodes, 6 h to 5 days, starts spread so the cluster runs
at about 70% busy, a fifth executed early and a tenth cancelled), a 48-node 3-day request; the medians of
alternating runs of each implementation, and a check that both give the same answer.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from campaign import calendar as cal
from tests.oracles.calendar_quadratic_fit import earliest_fit_quadratic, least_idle_fit_quadratic

T0 = datetime(2027, 1, 4, tzinfo=UTC)
CAPACITY, NODES, DURATION = 64, 48, timedelta(days=3)


def calendar(n: int, seed: int = 1) -> list[cal.Booking]:
    rng = random.Random(seed)
    span_h = max(24, int(n * 1.3 * 16 * 63 / CAPACITY / 0.7))  # mean 16 nodes x 63 h per booking, ~70% busy
    out = []
    for i in range(n):
        nodes = rng.randint(1, 32)
        start = T0 + timedelta(hours=rng.randrange(span_h))
        end = start + timedelta(hours=rng.randint(6, 120))
        status = rng.choices(["booked", "executed", "cancelled"], [7, 2, 1])[0]
        actual = end - timedelta(hours=rng.randint(0, 5)) if status == "executed" else None
        out.append(
            cal.Booking(
                f"b{i}", f"c{i}", cal.CAMPAIGN, f"c{i}", nodes, start, end, status=status, actual_end=actual
            )
        )
    return out


def timed(fn, *args) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-quadratic-above", type=int, default=10_000)
    args = ap.parse_args()
    print("| bookings | function | sweep (s) | quadratic (s) | x faster | same answer |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in (int(x) for x in args.sizes.split(",")):
        bookings = calendar(n)
        for name, fast, slow in (
            ("least_idle_fit", cal.least_idle_fit, least_idle_fit_quadratic),
            ("earliest_fit", cal.earliest_fit, earliest_fit_quadratic),
        ):
            call = (bookings, NODES, DURATION, CAPACITY, T0)
            f_times, s_times, same = [], [], True
            for _ in range(args.runs):  # alternating
                t, a = timed(fast, *call)
                f_times.append(t)
                if n <= args.skip_quadratic_above:
                    t, b = timed(slow, *call)
                    s_times.append(t)
                    same = same and a == b
            f = statistics.median(f_times)
            s = statistics.median(s_times) if s_times else None
            print(
                f"| {n:,} | {name} | {f:.4f} | {'-' if s is None else f'{s:.3f}'} | "
                f"{'-' if s is None else f'{s / f:,.1f}'} | {same if s_times else '-'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""How long `campaign failures fit` takes on a large log: reading and checking both files, and the fit.

Writes a seeded synthetic log of `--jobs` jobs (about 2.3 incidents a job with the demo profile), then times
read_incident_log and fit_failures separately, `--repeats` times each, and prints the medians.
Usage: .venv/bin/python benchmarks/failures/bench_fit.py --jobs 43000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from campaign.failures import fit_failures, read_incident_log, synthetic_log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=43_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        log = synthetic_log(seed=0, jobs=args.jobs, cluster_nodes=512)
        jobs, incidents = log.write(folder)
        read_s, fit_s, read_cpu, fit_cpu = [], [], [], []
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            read = read_incident_log(jobs, incidents)
            t1, c1 = time.perf_counter(), time.process_time()
            fit = fit_failures(read, nodes=512)
            t2, c2 = time.perf_counter(), time.process_time()
            read_s.append(t1 - t0)
            fit_s.append(t2 - t1)
            read_cpu.append(c1 - c0)
            fit_cpu.append(c2 - c1)
    print(f"jobs {args.jobs:,}  incidents {fit.incidents:,}  categories {len(fit.categories)}")
    for what, wall, cpu in (("read and check", read_s, read_cpu), ("fit", fit_s, fit_cpu)):
        print(f"{what:<15} median wall {statistics.median(wall):.2f} s, CPU {statistics.median(cpu):.2f} s")


if __name__ == "__main__":
    main()

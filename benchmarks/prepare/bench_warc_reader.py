"""The WARC reader's cost of finding records by their own headers: read_warc (every record split from the
decompressed stream and checked against the next header, then parsed by FastWARC) against FastWARC trusting each
record's Content-Length (the reader before), on one generated archive, runs alternating, CPU seconds and wall time.

    .venv/bin/python benchmarks/prepare/bench_warc_reader.py --records 20000 --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastwarc.warc import ArchiveIterator, WarcRecordType

from campaign.config import SourceConfig
from campaign.data.warc import PAGE_TYPES, _document, read_warc
from campaign.errors import DataError
from tests.helpers.warc_files import http_response, write_warc


def trusting(path: Path, source: SourceConfig) -> int:
    """The records as FastWARC finds them from each Content-Length (no check against the next header)."""
    n = 0
    with open(path, "rb") as handle:
        for number, record in enumerate(
            ArchiveIterator(handle, record_types=WarcRecordType.any_type, parse_http=False), 1
        ):
            if record.record_type & PAGE_TYPES:
                _document(record, number, path.name, source, 2**26)
                n += 1
    return n


def splitting(path: Path, source: SourceConfig) -> int:
    return sum(1 for _ in read_warc(path, path.name, source, 2**26, {}, lambda e: DataError(str(e))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    body = b"<html><body><p>" + b"words of prose " * 200 + b"</p></body></html>"
    with tempfile.TemporaryDirectory() as tmp:
        for gz in (True, False):
            path = Path(tmp) / ("a.warc.gz" if gz else "a.warc")
            write_warc(
                path, [http_response(f"https://r.example/{i}", body) for i in range(args.records)], gzip=gz
            )
            source = SourceConfig(name="c", path=str(path), format="warc", weight=1)
            times: dict[str, list[tuple[float, float]]] = {
                "FastWARC trusting lengths": [],
                "read_warc (split, checked)": [],
            }
            for _ in range(args.runs):
                for name, fn in (
                    ("FastWARC trusting lengths", trusting),
                    ("read_warc (split, checked)", splitting),
                ):
                    c0, w0 = time.process_time(), time.perf_counter()
                    n = fn(path, source)
                    times[name].append((time.process_time() - c0, time.perf_counter() - w0))
                    assert n == args.records, (name, n)
            size = path.stat().st_size / 2**20
            print(f"{path.name}: {args.records:,} records, {size:,.1f} MiB")
            for name, t in times.items():
                cpu, wall = statistics.median(c for c, _ in t), statistics.median(w for _, w in t)
                print(
                    f"  {name:28s} median CPU {cpu:.2f} s, wall {wall:.2f} s ({args.records / cpu:,.0f} records per CPU-s)"
                )


if __name__ == "__main__":
    main()

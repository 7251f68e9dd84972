"""`campaign prepare` through the CLI side by side with datatrove 0.10.1: throughput per core, peak RSS,
keep/drop agreement per rule. Run by hand (never in the test suite):

    .venv/bin/python benchmarks/prepare/make_corpus.py /tmp/corpus --mb 1024 --file-mb 64
    DATATROVE_PY=... .venv/bin/python benchmarks/prepare/bench_prepare.py /tmp/corpus --runs 3 --workers 2
    .venv/bin/python benchmarks/prepare/bench_prepare.py /tmp/corpus --runs 3 --shards-ab  # shards on vs off

DATATROVE_PY is the Python of a venv with datatrove 0.10.1 beside the project (benchmarks/README.md); without it,
pass --skip-datatrove. Results: benchmarks/results/.

Both sides run the same rules (Gopher quality, Gopher repetition, C4 with filter_no_terminal_punct=False,
FineWeb with char_duplicates_ratio 0.1) and exact dedup; campaign also runs MinHash near-dedup (14 x 8,
word 5-grams) and counts tokens with cl100k_base (bpe-openai) unless --tokenizer says otherwise.
Runs alternate (campaign, datatrove, campaign, ...); the table gives medians. `--bracket` makes each run
campaign, datatrove, campaign, so datatrove's long run (about 20 minutes on 1 GB against campaign's 1.5) is set
against campaign runs on both sides of it, not one phase of a machine whose speed drifts. CPU seconds are the
user+system time of the whole process tree (Prefect's server, campaign's worker processes or Dask's,
datatrove's pool workers included), from getrusage(RUSAGE_CHILDREN) or per-process samples, whichever is
larger.

Peak memory is the largest sum over the tree of each process's PSS (proportional set size: a page shared by
k processes counts 1/k in each), sampled every 0.1 s from /proc/<pid>/smaps_rollup with psutil: the physical
memory the tree holds at that moment, each page counted once. The largest sum of RSS is printed too; it
counts every shared page (the Python runtime, NumPy's and Arrow's libraries mapped by several processes)
once per process, so it overstates the tree's memory. Each process's own peak RSS and PSS are printed as well.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import psutil
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
DATATROVE_PY = os.environ.get("DATATROVE_PY", "")  # the Python of datatrove's own venv


def _measure(cmd: list[str], env: dict | None = None, retry: bool = True) -> dict:
    """Wall time, CPU seconds and peak RSS of a command's whole process tree.

    CPU: the last user+system time seen for every process of the tree (sampled every 0.1 s, so a process
    that lives less than a sample is missed), or getrusage(RUSAGE_CHILDREN) when that is larger (it only
    covers descendants that were waited for, e.g. not pool workers that are terminated)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO, text=True
    )
    peak = [0]  # largest sum of PSS
    peak_rss = [0]  # largest sum of RSS (counts shared pages once per process)
    cpu_by_pid: dict[int, float] = {}
    rss_by_pid: dict[int, tuple[float, str]] = {}  # peak RSS (MB) and what the process is
    pss_by_pid: dict[int, float] = {}  # peak PSS (MB)
    at_peak: list = [[]]  # (what, PSS MB) of every process at the moment of the tree's peak

    def sample() -> None:
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            rss = pss = 0
            now = []
            for p in tree:
                try:
                    info = p.memory_full_info()
                    rss += info.rss
                    pss += info.pss
                    t = p.cpu_times()
                    cpu_by_pid[p.pid] = t.user + t.system
                    # recorded at first sight too: a process seen first while exiting shows 0 RSS
                    if p.pid not in rss_by_pid or info.rss / 2**20 > rss_by_pid[p.pid][0]:
                        rss_by_pid[p.pid] = (info.rss / 2**20, _label(p))
                    pss_by_pid[p.pid] = max(pss_by_pid.get(p.pid, 0.0), info.pss / 2**20)
                    now.append((rss_by_pid[p.pid][1], round(info.pss / 2**20)))
                except psutil.Error:
                    pass
            if pss > peak[0]:
                peak[0], at_peak[0] = pss, now
            peak_rss[0] = max(peak_rss[0], rss)
            time.sleep(0.1)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out, _ = proc.communicate()
    thread.join()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rusage_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cpu = max(sum(cpu_by_pid.values()), rusage_cpu)
    if (
        proc.returncode != 0 and "did not start" in out and retry
    ):  # a busy machine: the API's 90 s start-up passed
        print("  the CLI's temporary Prefect API did not start in time; retrying once", flush=True)
        return _measure(cmd, env, retry=False)
    if proc.returncode != 0:
        print(out[-4000:])
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}")
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_pss_mb": peak[0] / 2**20,
        "peak_rss_sum_mb": peak_rss[0] / 2**20,
        "cores_busy": cpu / wall,
        "processes": len(cpu_by_pid),
        "log": out,
        "at_peak": at_peak[0],
        "per_process": sorted(
            (
                (round(mb), round(pss_by_pid.get(pid, 0.0)), label, round(cpu_by_pid.get(pid, 0.0), 1))
                for pid, (mb, label) in rss_by_pid.items()
            ),
            reverse=True,
        ),
    }


def _label(p: psutil.Process) -> str:
    """A short name for a process of the tree: its command line's telling part."""
    try:
        cmd = " ".join(p.cmdline())
    except psutil.Error:
        return "?"
    for key in (
        "prefect server",
        "uvicorn",
        "multiprocessing.spawn",
        "multiprocessing.forkserver",
        "datatrove_pipeline",
        "campaign prepare",
        "campaign.data.workers",
        "dask",
    ):
        if key in cmd:
            return key
    return cmd[:60]


def campaign_cmd(
    corpus: Path,
    ws: Path,
    workers: int,
    tokenizer: str,
    runner: str,
    eval_file: Path | None = None,
    shards: bool = False,  # the training shards (on in the demo config): off unless --shards-ab
    extra_sets: tuple[str, ...] = (),  # --set overrides given to this script, applied last
) -> list[str]:
    source = json.dumps(
        [{"name": "web", "path": f"{corpus}/*.jsonl", "format": "jsonl", "id_field": "id", "weight": 1}]
    )
    sets = [
        f"data.sources={source}",
        "data.demo_corpus_dir=null",
        f"data.tokenizer={tokenizer}",
        "data.cleaning.c4.enabled=true",
        "data.cleaning.fineweb.enabled=true",
        f"runtime.task_runner={runner}",
        f"runtime.max_workers={workers}",
        f"data.training_shards={'true' if shards else 'false'}",
    ]
    if eval_file is not None:  # --steps: language ID, PII redaction and decontamination on
        bench = [{"name": "eval", "path": str(eval_file), "text_fields": ["question"]}]
        sets += [
            'data.cleaning.languages={"enabled": true, "keep": ["en"], "min_score": 0.65}',
            'data.cleaning.pii={"enabled": true}',
            f"data.decontaminate={json.dumps({'benchmarks': bench})}",
        ]
    sets += extra_sets
    return demo_prepare_cmd(ws, sets)


def demo_prepare_cmd(ws: Path, sets: list[str]) -> list[str]:
    """`campaign prepare` of the demo config into `ws` with these `--set` overrides."""
    return [
        str(REPO / ".venv" / "bin" / "campaign"),
        "prepare",
        str(REPO / "configs/campaigns/demo.yaml"),
        "--workspace",
        str(ws),
        *[a for s in sets for a in ("--set", s)],
    ]


def datatrove_cmd(corpus: Path, out: Path, workers: int, eval_file: Path | None = None) -> list[str]:
    steps = ["--language", "--pii", "--decont", str(eval_file)] if eval_file is not None else []
    return [
        DATATROVE_PY,
        str(REPO / "benchmarks/prepare/datatrove_pipeline.py"),
        str(corpus),
        str(out),
        "--workers",
        str(workers),
        *steps,
    ]


def make_eval_file(corpus: Path, path: Path, n: int = 500, words: int = 40, seed: int = 7) -> Path:
    """An evaluation set for the decontamination step: `n` passages of `words` words, each cut from a random
    document of the corpus (so every passage's source and its copies should be removed)."""
    import random

    rng = random.Random(seed)
    files = sorted(corpus.glob("*.jsonl"))
    lines = [line for f in files[:1] for line in f.read_text(encoding="utf-8").splitlines()]
    with open(path, "w", encoding="utf-8") as out:
        for line in rng.sample(lines, min(n, len(lines))):
            tokens = json.loads(line)["text"].split()
            start = rng.randrange(max(len(tokens) - words, 1))
            out.write(json.dumps({"question": " ".join(tokens[start : start + words])}) + "\n")
    return path


def _languages_ours(ws: Path) -> dict[str, tuple[str, float]]:
    out = {}
    for kind in ("clean", "rejected"):
        table = pq.read_table(
            ws / "data" / kind / "web.parquet", columns=["doc_id", "language", "language_score"]
        )
        for d, lang, score in zip(*(table[c].to_pylist() for c in table.column_names), strict=True):
            if lang is not None:
                out[d] = (lang, score)
    return out


def _languages_theirs(out: Path) -> dict[str, tuple[str, float]]:
    found = {}
    for f in [*out.glob("removed/*/*.jsonl*"), *out.glob("filtered/*.jsonl*")]:
        with gzip.open(f, "rt") if f.suffix == ".gz" else open(f) as handle:
            for line in handle:
                record = json.loads(line)
                meta = record.get("metadata", {})
                if "language" in meta:
                    found[record["id"]] = (meta["language"], meta["language_score"])
    return found


def language_agreement(ws: Path, out: Path) -> dict:
    """py3langid (campaign) against fastText lid.176 (datatrove) on the documents both identified: the same top
    language, and the same keep/drop decision of the English >= 0.65 rule."""
    ours, theirs = _languages_ours(ws), _languages_theirs(out)
    common = sorted(set(ours) & set(theirs))
    same_lang = sum(ours[d][0] == theirs[d][0] for d in common)
    keep_ours = {d for d in common if ours[d][0] == "en" and ours[d][1] >= 0.65}
    keep_theirs = {d for d in common if theirs[d][0] == "en" and theirs[d][1] > 0.65}
    pairs: dict[str, int] = defaultdict(int)
    for d in common:
        if ours[d][0] != theirs[d][0]:
            pairs[f"{ours[d][0]}/{theirs[d][0]}"] += 1
    return {
        "documents_both_identified": len(common),
        "same_top_language": same_lang / len(common) if common else None,
        "same_keep_decision": (len(common) - len(keep_ours ^ keep_theirs)) / len(common) if common else None,
        "kept_campaign": len(keep_ours),
        "kept_datatrove": len(keep_theirs),
        "dropped_by_campaign_only": len(keep_theirs - keep_ours),
        "dropped_by_datatrove_only": len(keep_ours - keep_theirs),
        "top_disagreements_campaign/datatrove": dict(sorted(pairs.items(), key=lambda kv: -kv[1])[:8]),
    }


STEP_OF_DT = {
    "gopher_quality": "gopher_quality",
    "gopher_repetition": "gopher_repetition",
    "c4": "c4",
    "fineweb": "fineweb",
    "exact_dedup": "exact_dedup",
    "language": "language",
    "decont": "decontaminate",
}


def _ours(ws: Path) -> dict[str, str]:
    from campaign.data.pipeline import step_of

    table = pq.read_table(ws / "data" / "rejected" / "web.parquet", columns=["doc_id", "reason"])
    return {
        d: step_of(r) for d, r in zip(table["doc_id"].to_pylist(), table["reason"].to_pylist(), strict=True)
    }


def _theirs(out: Path) -> dict[str, str]:
    dropped = {}
    for step_dir in sorted((out / "removed").iterdir()):
        for f in step_dir.glob("*.jsonl*"):
            with gzip.open(f, "rt") if f.suffix == ".gz" else open(f) as handle:
                for line in handle:
                    dropped[json.loads(line)["id"]] = STEP_OF_DT[step_dir.name]
    return dropped


def agreement(ws: Path, out: Path, n_docs: int) -> list[dict]:
    ours, theirs = _ours(ws), _theirs(out)
    rows = []
    steps = ("read", "language", "gopher_quality", "gopher_repetition", "c4", "fineweb", "decontaminate")
    for step in (*steps, "exact_dedup", "near_dedup"):
        a = {d for d, s in ours.items() if s == step}
        b = {d for d, s in theirs.items() if s == step}
        rows.append(
            {
                "step": step,
                "campaign_dropped": len(a),
                "datatrove_dropped": len(b),
                "both_this_step": len(a & b),
                "datatrove_only_kept_by_campaign": len(b - set(ours)),
                "campaign_only_kept_by_datatrove": len(a - set(theirs)),
            }
        )
    both_drop = len(set(ours) & set(theirs))
    both_keep = n_docs - len(set(ours) | set(theirs))
    rows.append(
        {
            "step": "overall keep/drop",
            "campaign_dropped": len(ours),
            "datatrove_dropped": len(theirs),
            "both_this_step": both_drop,
            "agreement": (both_drop + both_keep) / n_docs,
        }
    )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tokenizer", default="cl100k_base")
    ap.add_argument(
        "--runner",
        default="threads",
        choices=["dask", "threads"],
        help="threads: the local default (shard work in campaign's lean worker processes); "
        "dask: a prefect-dask LocalCluster",
    )
    ap.add_argument("--skip-datatrove", action="store_true")
    ap.add_argument(
        "--bracket",
        action="store_true",
        help="each run is campaign, datatrove, campaign: datatrove's long run is set against campaign "
        "runs on both sides of it, not in one phase of the machine only",
    )
    ap.add_argument(
        "--shards-ab",
        action="store_true",
        help="campaign with the training shards on and off in alternating runs (no datatrove): what writing "
        "Megatron shards costs",
    )
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/bench-prepare"))
    ap.add_argument(
        "--steps",
        action="store_true",
        help="also language ID (en >= 0.65), PII redaction and 13-gram decontamination against passages cut "
        "from the corpus, on both sides",
    )
    ap.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override for campaign's runs, after the benchmark's own (e.g. "
        "data.cleaning.languages.prefix_chars=0)",
    )
    args = ap.parse_args()
    if args.shards_ab:
        args.skip_datatrove = True
    if not args.skip_datatrove and not DATATROVE_PY:
        ap.error(
            "set DATATROVE_PY to the Python of datatrove's venv (benchmarks/README.md), or pass --skip-datatrove"
        )
    corpus = args.corpus.resolve()
    mb = sum(p.stat().st_size for p in corpus.glob("*.jsonl")) / 1e6
    n_docs = 0
    for path in corpus.glob("*.jsonl"):
        with open(path, "rb") as handle:
            n_docs += sum(1 for _ in handle)
    env = {
        **os.environ,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        # each run's API server (one per workspace, and every run has a new one) stops with its command instead of
        # idling on beside the next runs: its whole life is in the measured tree
        "CAMPAIGN_SERVER_IDLE_S": "0",
    }  # the machine is shared and busy
    results: dict[str, list[dict]] = defaultdict(list)
    eval_file = None
    if args.steps:
        eval_file = make_eval_file(corpus, args.scratch.with_name(args.scratch.name + "-eval.jsonl"))
    for run in range(args.runs):
        shutil.rmtree(args.scratch, ignore_errors=True)
        args.scratch.mkdir(parents=True)
        ws, out = args.scratch / "ws", args.scratch / "dt"
        order = ["campaign", "datatrove"] if run % 2 == 0 else ["datatrove", "campaign"]
        if args.bracket:
            order = ["campaign", "datatrove", "campaign"]
        if args.shards_ab:
            order = ["campaign", "campaign_no_shards"][:: 1 if run % 2 == 0 else -1]
        for side in order:
            if side == "datatrove" and args.skip_datatrove:
                continue
            if side.startswith("campaign"):
                shutil.rmtree(
                    ws, ignore_errors=True
                )  # every campaign run starts from nothing (no shard reused)
            cmd = (
                campaign_cmd(
                    corpus,
                    ws,
                    args.workers,
                    args.tokenizer,
                    args.runner,
                    eval_file,
                    args.shards_ab and side == "campaign",
                    tuple(args.sets),
                )
                if side.startswith("campaign")
                else datatrove_cmd(corpus, out, args.workers, eval_file)
            )
            r = _measure(cmd, env)
            r["mb_per_cpu_s"] = mb / r["cpu_s"]
            results[side].append(r)
            print(
                f"run {run} {side}: wall {r['wall_s']:.1f} s, cpu {r['cpu_s']:.1f} s, {r['mb_per_cpu_s']:.2f} MB/cpu-s, "
                f"peak {r['peak_pss_mb']:.0f} MB (sum of PSS; sum of RSS {r['peak_rss_sum_mb']:.0f} MB), "
                f"{r['cores_busy']:.2f} cores busy",
                flush=True,
            )
            print(f"  per process (peak RSS MB, peak PSS MB, what, CPU s): {r['per_process']}", flush=True)
            print(f"  at the tree's peak (what, PSS MB): {r['at_peak']}", flush=True)
        if run == args.runs - 1 and not args.skip_datatrove and not args.shards_ab:
            rows = agreement(ws, out, n_docs)
            languages = language_agreement(ws, out) if args.steps else None
    summary = {
        side: {
            k: statistics.median(r[k] for r in rs)
            for k in ("wall_s", "cpu_s", "mb_per_cpu_s", "peak_pss_mb", "peak_rss_sum_mb", "cores_busy")
        }
        for side, rs in results.items()
    }
    manifest = json.loads((args.scratch / "ws" / "data" / "manifest.json").read_text())
    print(
        json.dumps(
            {
                "corpus_mb": mb,
                "documents": n_docs,
                "runs": args.runs,
                "medians": summary,
                "campaign_totals": manifest["totals"],
                "near_dedup": manifest["near_dedup"],
                "removals": manifest["removals"],
            },
            indent=1,
        )
    )
    if "campaign_no_shards" in summary:
        on, off = summary["campaign"], summary["campaign_no_shards"]
        print(
            f"\ntraining shards on / off: CPU {on['cpu_s'] / off['cpu_s']:.2f}x, "
            f"peak PSS {on['peak_pss_mb']:.0f} / {off['peak_pss_mb']:.0f} MB"
        )
    if "datatrove" in summary:
        ratio = summary["campaign"]["mb_per_cpu_s"] / summary["datatrove"]["mb_per_cpu_s"]
        print(f"\nthroughput per core: campaign / datatrove = {ratio:.1f}x")
        print("\nkeep/drop agreement (last run):")
        for row in rows:
            print("  " + json.dumps(row))
        if languages is not None:
            print("\nlanguage identification, campaign (py3langid) against datatrove (fastText lid.176):")
            print("  " + json.dumps(languages))
    if args.steps:
        print(f"\nPII replaced by campaign: {manifest['sources'][0].get('pii_by_kind')}")


if __name__ == "__main__":
    sys.exit(main())

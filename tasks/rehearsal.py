"""Rehearsal: read the clean data, train on a sample twice (one real SIGKILL), write the verdict and its plot."""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from campaign import store
from campaign.config import CampaignConfig
from campaign.data.tokenizer import load_tokenizer
from campaign.errors import CampaignError
from campaign.evidence import DataEvidence
from campaign.files import atomic_write_bytes, atomic_write_json
from campaign.gates import GateResult
from campaign.rehearsal.gate import run_rehearsal
from campaign.rehearsal.harness import RehearsalResult
from campaign.rehearsal.progress import ProgressFollower
from campaign.rehearsal.sample import clean_tables_with_shards, documents_from_tables
from tasks.artifacts import artifact_key

REHEARSAL_DIR = "rehearsal"
QUIET_S = 30.0  # a progress line at least this often while the rehearsal trains


@contextlib.contextmanager
def reporting_progress(workdir: Path, steps: int, every_s: float = 2.0) -> Iterator[None]:
    """While the trainer runs: its step and loss logged every tenth of the steps (campaign.rehearsal.progress), from
    a thread that reads the metrics files, so the terminal and the UI's log say how training goes."""
    follower, log, done = ProgressFollower(workdir, steps), get_run_logger(), threading.Event()
    started = said = time.monotonic()

    def follow() -> None:
        nonlocal said
        while not done.wait(every_s):
            lines = follower.poll()
            for line in lines:
                log.info("%s", line)
            if lines:
                said = time.monotonic()
            elif time.monotonic() - said >= QUIET_S:  # a trainer starting, compiling or being restored
                log.info(
                    "rehearsal: the trainer is working, no new step for %.0f s (%.0f s since the rehearsal began)",
                    time.monotonic() - said,
                    time.monotonic() - started,
                )
                said = time.monotonic()

    thread = threading.Thread(target=follow, name="rehearsal-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)


@task(name="rehearsal", cache_policy=None)
def rehearsal_gate(config: CampaignConfig, ws: store.Workspace, evidence: DataEvidence) -> GateResult:
    """Train on the clean tables the other gates judged (`evidence`), so the verdict is about the same bytes."""
    workdir = ws.root / REHEARSAL_DIR
    try:
        tokenizer = load_tokenizer(config.data.tokenizer)
    except CampaignError as err:
        docs = documents_from_tables(evidence.tables("clean"), config.rehearsal.sample_tokens)
        result = RehearsalResult(passed=False).fail(f"data.tokenizer: {err.message}", err.fix or "")
    else:
        tables, shards = clean_tables_with_shards(evidence, ws.data_dir)
        if evidence.manifest.get("tokenizer_spec") != config.data.tokenizer:  # ids of another vocabulary
            shards = [None] * len(tables)
        docs = documents_from_tables(tables, config.rehearsal.sample_tokens, shards, tokenizer.eot_id)
        with reporting_progress(workdir, config.rehearsal.steps):
            result, _ = run_rehearsal(docs, tokenizer, config.rehearsal, config.model, config.seed, workdir)
    details = {
        **result.details,
        "passed": result.passed,
        "problems": result.problems,
        "fixes": result.fixes,
        "stderr_tail": result.stderr_tail,
        "result_file": f"{REHEARSAL_DIR}/result.json",
        "plot": f"{REHEARSAL_DIR}/loss_curve.png",
    }
    if "stderr_log" in details:
        details["stderr_log"] = f"{REHEARSAL_DIR}/{details['stderr_log']}"
    timings = {k: round(v, 3) for k, v in result.timings.items()}
    atomic_write_json(
        workdir / "result.json", {"details": details, "timings": timings, "curves": result.curves.to_json()}
    )
    from campaign.rehearsal.plot import plot_loss_curve  # matplotlib: only when a rehearsal ran

    png = atomic_write_bytes(
        workdir / "loss_curve.png", plot_loss_curve(result.curves.to_json(), details)
    ).read_bytes()
    summary = result.summary()
    rows_table = [
        {"check": k, "value": details[k]}
        for k in (
            "loss_first_tenth",
            "loss_last_tenth",
            "loss_drop",
            "min_loss_drop",
            "heldout_first",
            "heldout_last",
            "kill_after_checkpoint",
            "killed_at_step",
            "resumed_step",
            "blanked_rows",
            "control_differs_at_step",
            "restore_check",
        )
        if k in details
    ]
    rows_table += [{"check": k, "value": v} for k, v in timings.items()]
    create_table_artifact(
        key=artifact_key(config.name, "rehearsal"), table=rows_table, description=summary[:500]
    )
    stderr = "\n".join(result.stderr_tail)
    create_markdown_artifact(
        key=artifact_key(config.name, "rehearsal-loss-curve"),
        description="rehearsal loss curve",
        markdown=(
            f"**rehearsal {'passed' if result.passed else 'FAILED'}**: {summary}\n\n"
            f"![loss curve](data:image/png;base64,{base64.b64encode(png).decode()})\n"
            + (f"\ntrainer stderr (last lines):\n```\n{stderr}\n```\n" if stderr else "")
        ),
    )
    log = get_run_logger()
    log.info("rehearsal: %s; %s", summary, ", ".join(f"{k} {v:,.1f}" for k, v in timings.items()))
    if result.stderr_tail and not result.passed:
        log.warning("rehearsal trainer stderr (last lines):\n%s", stderr)
    small = {k: v for k, v in details.items() if k != "sample"}
    return GateResult("rehearsal", result.passed, summary, small)

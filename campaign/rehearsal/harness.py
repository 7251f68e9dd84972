"""The rehearsal harness: run the trainer uninterrupted, on a shifted sample, and with a real SIGKILL; judge.

The harness lays the training rows out in the order they are trained (`training_order`: step k trains on rows
(k-1) x B .. k x B - 1 of the file, B = CAMPAIGN_REHEARSAL_BATCH_SEQUENCES), so it knows which rows a step read.
1. The reference run: the trainer from scratch to its last step; its curve is the yardstick. At each checkpoint
   event the harness looks at the checkpoint folder: it must hold files, and they must have changed since the
   previous event.
2. The control run: the same variables, but the rows shifted by half the run (step k gets the rows of step
   k + steps/2), stopped after `CONTROL_STEPS` steps. Its curve must differ from the reference's: a trainer whose
   curve does not depend on the data it is given is not training on it.
3. The faulted run, in a fresh checkpoint folder: at a step chosen by the seed a little after one of the
   checkpoints, the harness kills the trainer's whole process group with SIGKILL, blanks the rows of every step up
   to the last complete checkpoint in that run's training file (token 0), then starts the same command with the
   same variables. The trainer must report `resumed` at that checkpoint and reproduce the reference curve: exactly
   at `restore_tolerance` 0, else within it. A trainer that restarts from scratch and replays the steps before the
   checkpoint reads blank rows and diverges. Steps before the kill are compared too (determinism for a seed).
4. The verdict (`campaign.rehearsal.verdict`): loss falls by `min_loss_drop`, held-out loss falls and is not far
   below the training loss (a possible leak), nothing is NaN or infinite, the restore matches; `details["checks"]`
   says what was checked. Every way a trainer can misbehave (no such command, non-zero exit, malformed metrics, no
   checkpoint, no resume, a hang, a process that leaves its group) is a failed result with the reason, the
   trainer's last stderr lines and what to do.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from campaign.command_files import trainer_files
from campaign.files import atomic_write_bytes
from campaign.records import JsonRecord
from campaign.rehearsal import contract as c
from campaign.rehearsal.processes import Start, drop_partial_line, resolve_command, run_start
from campaign.rehearsal.sandbox import sandbox_prefix, sandbox_problem
from campaign.rehearsal.verdict import (
    LEAK_MARGIN_NATS,
    compare_curves,
    curves_differ,
    first_divergence,
    first_non_finite,
    folder_fingerprint,
    stale_checkpoint_folder,
    tenth_means,
)

REGISTRY = "trainers.json"  # process groups this rehearsal started (campaign.rehearsal.processes)


KILL_STREAM = (
    0x4B494C4C  # "KILL": the seed's stream for the kill step, apart from every other use of the seed
)
ORDER_STREAM = 0x4F524452  # "ORDR": the seed's stream for the order rows are trained in
KILL_ATTEMPTS = 3  # starts of the faulted run before a trainer too fast to kill between checkpoints fails
CONTROL_STEPS = 3  # steps of the control run: enough for a curve that starts from a data-free loss to move
BLANK_TOKEN = 0  # what the restarted process finds in the rows of the steps before its checkpoint
MAX_TRAIN_FILE_BYTES = 4 * 2**30  # steps x batch rows, laid out in training order


@dataclass(frozen=True)
class HarnessSettings:
    command: list[str]
    steps: int
    seed: int
    checkpoint_every: int
    timeout_s: float
    min_loss_drop: float
    restore_tolerance: float
    tokens_per_step: int  # batch_sequences x seq_len, if the trainer reports none
    batch_sequences: int = 8  # rows per step: step k trains on rows (k-1) x B .. k x B - 1
    extra_env: dict[str, str] = field(default_factory=dict)  # learning rate, model shape, ...
    python: str = sys.executable
    kill_one: bool = False  # the fault kills one process of the trainer (a rank), not its whole group


@dataclass(frozen=True, slots=True)
class ReferenceCurve(JsonRecord):
    """The uninterrupted run: its training and held-out losses (step, loss) and its complete checkpoints."""

    loss: list[tuple[int, float]]
    heldout: list[tuple[int, float]]
    checkpoints: list[int]


@dataclass(frozen=True, slots=True)
class ControlCurve(JsonRecord):
    """The control run's training losses (step, loss), to show a different run would differ."""

    loss: list[tuple[int, float]]


@dataclass(frozen=True, slots=True)
class FaultedCurve(JsonRecord):
    """The killed and restarted run: both starts' losses, the step it was killed at and the one it resumed from."""

    loss: list[tuple[int, float]]
    heldout: list[tuple[int, float]]
    killed_at_step: int
    resumed_step: int | None  # None: the restart did not say it resumed


@dataclass(frozen=True, slots=True)
class LossCurves(JsonRecord):
    """The runs' losses as far as the rehearsal got (result.json's `curves`, which the loss-curve plot draws)."""

    reference: ReferenceCurve | None = None
    control: ControlCurve | None = None
    faulted: FaultedCurve | None = None

    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"reference", "control", "faulted"})


@dataclass
class RehearsalResult:
    passed: bool
    problems: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # evidence that repeats exactly for the same inputs
    timings: dict[str, float] = field(default_factory=dict)  # wall times and tokens/s: vary from run to run
    curves: LossCurves = field(default_factory=LossCurves)

    def fail(self, problem: str, fix: str, start: Start | None = None) -> RehearsalResult:
        self.passed = False
        self.problems.append(problem)
        if fix not in self.fixes:
            self.fixes.append(fix)
        if start is not None and not self.stderr_tail:
            self.stderr_tail = start.stderr_tail()
            self.details["stderr_log"] = start.stderr_path.relative_to(
                start.stderr_path.parents[2]
            ).as_posix()
        return self

    def summary(self) -> str:
        d = self.details
        if not self.passed:
            text = "; ".join(self.problems) + (f"; fix: {'; '.join(self.fixes)}" if self.fixes else "")
            if self.stderr_tail:
                text += " | trainer stderr: " + " / ".join(self.stderr_tail[-3:])
            return text
        return (
            f"loss {d['loss_first_tenth']:.3f} -> {d['loss_last_tenth']:.3f} (drop {d['loss_drop']:.2f} >= "
            f"{d['min_loss_drop']:.2f}), held-out {d['heldout_first']:.3f} -> {d['heldout_last']:.3f}; "
            f"killed at step {d['killed_at_step']} (after the checkpoint at {d['kill_after_checkpoint']}), "
            f"resumed at {d['resumed_step']}: {d['restore_check']}; a control run on shifted rows differs at step "
            f"{d['control_differs_at_step']}; checkpoint files changed at every checkpoint; no process escaped"
        )


def contract_env(
    train: Path,
    heldout: Path,
    vocab: int,
    settings: HarnessSettings,
    checkpoint_dir: Path,
    metrics: Path,
    cache_dir: Path,
) -> dict[str, str]:
    """The variables of the trainer contract (docs/rehearsal.md) for one run."""
    return {
        c.ENV_TRAIN: str(train),
        c.ENV_HELDOUT: str(heldout),
        c.ENV_VOCAB: str(vocab),
        c.ENV_STEPS: str(settings.steps),
        c.ENV_SEED: str(settings.seed),
        c.ENV_CHECKPOINT_EVERY: str(settings.checkpoint_every),
        c.ENV_BATCH_SEQUENCES: str(settings.batch_sequences),
        c.ENV_CHECKPOINT_DIR: str(checkpoint_dir),
        c.ENV_METRICS: str(metrics),
        c.ENV_CACHE_DIR: str(cache_dir),
        **{k: v for k, v in settings.extra_env.items() if k != c.ENV_BATCH_SEQUENCES},
    }


def _isolated(
    command: list[str],
    readable: list[Path],
    checkpoint_dir: Path,
    metrics: Path,
    cache: Path,
    hide: tuple[Path, ...] = (),
) -> list[str]:
    """The sandbox prefix of one start (`campaign.rehearsal.sandbox`), its writable paths created; [] when no
    sandbox can be built here (`sandbox_problem` says why). `hide`: folders the start must not see (bound back:
    only its own paths)."""
    if sandbox_problem():
        return []
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    metrics.parent.mkdir(parents=True, exist_ok=True)
    metrics.touch()
    cwd = Path.cwd()
    files = [path for _, path in trainer_files(command, cwd)]
    return sandbox_prefix([checkpoint_dir, metrics, cache], [*readable, *files], cwd, hide)


def choose_kill_step(checkpoints: list[int], steps: int, seed: int) -> tuple[int, int] | None:
    """(checkpoint step, kill step): a seeded choice among the reference's checkpoints before its last step,
    killed 1 to half a checkpoint interval after it, so work is lost and must be redone."""
    candidates = sorted({s for s in checkpoints if 0 < s < steps - 1})
    if not candidates:
        return None
    rng = np.random.default_rng([seed, KILL_STREAM])
    at = candidates[int(rng.integers(len(candidates)))]
    later = [s for s in sorted(set(checkpoints)) if s > at]
    gap = (later[0] if later else steps) - at
    kill = at + 1 + int(rng.integers(max(1, gap // 2)))
    return at, min(kill, steps - 1)


def training_order(n_rows: int, steps: int, batch: int, seed: int) -> np.ndarray:
    """Which packed row each training position holds: position (k-1) x batch + j is the j-th row of step k.

    Rows are drawn epoch by epoch, each epoch a permutation seeded by (seed, epoch), so every row is trained
    once before any is trained twice."""
    n = steps * batch
    out = np.empty(n, dtype=np.int64)
    for epoch in range(-(-n // n_rows)):
        lo = epoch * n_rows
        order = np.random.default_rng([seed, ORDER_STREAM, epoch]).permutation(n_rows)
        out[lo : min(n, lo + n_rows)] = order[: min(n, lo + n_rows) - lo]
    return out


def control_order(order: np.ndarray, steps: int, batch: int) -> np.ndarray:
    """The control run's rows: step k gets the rows of step k + steps/2 (wrapping round)."""
    return np.roll(order, -(steps // 2) * batch)


def _write_rows(path: Path, rows: np.ndarray, order: np.ndarray, blank_before: int = 0) -> None:
    """Write rows[order] as the contract's .npy file; rows of positions below `blank_before` hold BLANK_TOKEN."""
    import io

    laid_out = np.ascontiguousarray(rows[order], dtype=np.uint32)
    laid_out[:blank_before] = BLANK_TOKEN
    buffer = io.BytesIO()
    np.save(buffer, laid_out, allow_pickle=False)
    atomic_write_bytes(path, buffer.getvalue())


def _tokens_per_s(start: Start, default_tokens: int) -> float:
    """Tokens trained per second between the first and the last step's line (so compilation is excluded)."""
    times = start.line_times
    if len(times) < 2:
        return math.nan
    first, last = min(times), max(times)
    elapsed = times[last] - times[first]
    tokens = sum(start.metrics.tokens.get(s, default_tokens) for s in times if s != first)
    return tokens / elapsed if elapsed > 0 else math.nan


def _check_start(
    result: RehearsalResult, start: Start, settings: HarnessSettings, what: str, expect_exit: bool = True
) -> bool:
    """Fail the result if this start could not launch, hung, wrote bad metrics, left processes or exited badly."""
    cmd = " ".join(settings.command)
    if start.launch_error:
        result.fail(
            f"cannot start the trainer `{cmd}`: {start.launch_error}",
            "set rehearsal.command to an executable trainer (the default is `python -m "
            "campaign.rehearsal.trainer`); test it by hand with the variables in rehearsal/env.json",
        )
        return False
    if start.escaped:
        named = "; ".join(f"pid {e.get('pid')} `{e.get('command')}`" for e in start.escaped[:5])
        result.fail(
            f"{what}: {len(start.escaped)} process(es) started by the trainer left its process group "
            f"(a double fork or setsid) and were still running: {named}; the harness killed them",
            "keep every process the trainer starts in its process group (no setsid, no daemonising), and "
            "let them end with the trainer",
            start,
        )
    if start.survivors:
        result.fail(
            f"{len(start.survivors)} process(es) of the trainer's group survived SIGKILL: "
            f"{start.survivors[:5]}",
            "a trainer process must not leave its process group",
            start,
        )
    if start.metrics.problems:
        result.fail(
            f"{what}: malformed metrics in {start.label}: {start.metrics.problems[0]}",
            'append one JSON object per line: {"step": k, "loss": x}, {"step": k, "heldout_loss": '
            'x}, {"event": "checkpoint", "step": k} or {"event": "resumed", "step": k}',
            start,
        )
        return False
    if start.timed_out:
        result.fail(
            f"{what}: the trainer hung past rehearsal.timeout_s = {settings.timeout_s:g} s (last step "
            f"reported: {start.metrics.last_step}); its process group was killed",
            "raise rehearsal.timeout_s if the trainer is only slow, or lower rehearsal.steps",
            start,
        )
        return False
    if expect_exit and start.returncode != 0:
        result.fail(
            f"{what}: the trainer exited with code {start.returncode} after step {start.metrics.last_step}",
            "read the trainer's stderr (below and in the log named in "
            "the details) and run the command by hand with the variables in rehearsal/env.json",
            start,
        )
        return False
    return not start.survivors and not start.escaped


def rehearse(
    train: Path, heldout: Path, vocab: int, settings: HarnessSettings, workdir: Path
) -> RehearsalResult:
    """Run the reference, control and faulted runs of the trainer under `workdir` and judge them.

    `train` holds the packed training rows in any order; the harness lays them out in training order."""
    result = RehearsalResult(passed=True)
    d = result.details
    d.update(
        min_loss_drop=settings.min_loss_drop,
        restore_tolerance=settings.restore_tolerance,
        steps=settings.steps,
        command=settings.command,
    )
    checks: list[str] = []
    d["checks"] = checks
    command = resolve_command(settings.command, settings.python)
    deadline = time.monotonic() + settings.timeout_s
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("CAMPAIGN_REHEARSAL_")}
    cache = workdir / "cache"
    workdir.mkdir(parents=True, exist_ok=True)

    # 0. The training rows in the order they are trained, and the control run's shifted copy.
    rows = np.load(train, mmap_mode="r", allow_pickle=False)
    batch = settings.batch_sequences
    size = settings.steps * batch * rows.shape[1] * 4
    if size > MAX_TRAIN_FILE_BYTES:
        return result.fail(
            f"the training rows in training order would take {size / 2**30:.1f} GiB ({settings.steps} steps x "
            f"{batch} sequences of {rows.shape[1]} tokens); at most {MAX_TRAIN_FILE_BYTES / 2**30:.0f} GiB",
            "lower rehearsal.steps, rehearsal.batch_sequences or rehearsal.seq_len",
        )
    order = training_order(rows.shape[0], settings.steps, batch, settings.seed)
    ordered = workdir / "data" / "train.npy"
    control_train = workdir / "data" / "control.npy"
    _write_rows(ordered, rows, order)
    _write_rows(control_train, rows, control_order(order, settings.steps, batch))

    # 1. The reference run.
    ref_dir = workdir / "reference"
    ref_env = contract_env(
        ordered, heldout, vocab, settings, ref_dir / "checkpoints", ref_dir / "metrics.jsonl", cache
    )
    (workdir / "env.json").write_text(json.dumps({"command": command, "env": ref_env}, indent=1) + "\n")
    snapshots: list[tuple[int, frozenset[tuple[str, str]]]] = []
    ref = run_start(
        "reference",
        command,
        {**base_env, **ref_env},
        ref_dir / "metrics.jsonl",
        ref_dir / "logs",
        deadline,
        registry=workdir / REGISTRY,
        wrap=_isolated(
            command, [ordered, heldout], ref_dir / "checkpoints", ref_dir / "metrics.jsonl", cache
        ),
        on_checkpoint=lambda m: snapshots.append(
            (m.checkpoints[-1], folder_fingerprint(ref_dir / "checkpoints"))
        ),
    )
    result.timings["reference_wall_s"] = ref.wall_s
    result.timings["reference_cpu_s"] = ref.cpu_s
    result.curves = replace(
        result.curves,
        reference=ReferenceCurve(ref.metrics.losses, ref.metrics.heldout, ref.metrics.checkpoints),
    )
    if not _check_start(result, ref, settings, "reference run"):
        return result
    if ref.metrics.last_step != settings.steps:
        return result.fail(
            f"reference run: the trainer exited after step {ref.metrics.last_step} of {settings.steps}",
            "the trainer must run CAMPAIGN_REHEARSAL_STEPS steps",
            ref,
        )
    if not _judge_training(result, ref, settings):
        d["restore_check"] = "not run (the uninterrupted run failed)"
        return result
    checks.append("loss and held-out loss fall, finite, held-out not far below training")

    # 2. The checkpoint folder: files written between the checkpoint events, changing from one to the next.
    choice = choose_kill_step(ref.metrics.checkpoints, settings.steps, settings.seed)
    if choice is None:
        return result.fail(
            f"the trainer never reported a complete checkpoint before its last step (events: "
            f"{ref.metrics.checkpoints or 'none'})",
            "write a checkpoint every CAMPAIGN_REHEARSAL_CHECKPOINT_EVERY steps and append "
            '{"event": "checkpoint", "step": k} once it is complete on disk',
            ref,
        )
    stale = stale_checkpoint_folder(snapshots)
    if stale is not None:
        d["restore_check"] = "not run (the checkpoint folder failed)"
        return result.fail(
            f"reference run: {stale} (CAMPAIGN_REHEARSAL_CHECKPOINT_DIR = {ref_dir / 'checkpoints'})",
            "write each checkpoint's state into CAMPAIGN_REHEARSAL_CHECKPOINT_DIR before appending its "
            '{"event": "checkpoint"} line, and restore from those files',
            ref,
        )
    checks.append("the checkpoint folder held new files at every checkpoint event")

    # 3. The control run: the same trainer on shifted rows must give a different curve.
    control_dir = workdir / "control"
    control = run_start(
        "control",
        command,
        {
            **base_env,
            **contract_env(
                control_train,
                heldout,
                vocab,
                settings,
                control_dir / "checkpoints",
                control_dir / "metrics.jsonl",
                cache,
            ),
        },
        control_dir / "metrics.jsonl",
        control_dir / "logs",
        deadline,
        kill_when=lambda m: m.last_step >= CONTROL_STEPS,
        registry=workdir / REGISTRY,
        wrap=_isolated(
            command,
            [control_train, heldout],
            control_dir / "checkpoints",
            control_dir / "metrics.jsonl",
            cache,
        ),
    )
    result.timings["control_wall_s"] = control.wall_s
    result.timings["control_cpu_s"] = control.cpu_s
    result.curves = replace(result.curves, control=ControlCurve(control.metrics.losses))
    if not _check_start(result, control, settings, "control run", expect_exit=not control.killed_by_harness):
        return result
    differs = curves_differ(
        ref.metrics.losses, control.metrics.losses, CONTROL_STEPS, settings.restore_tolerance
    )
    if differs is None:
        return result.fail(
            f"control run: the trainer did not report steps 1 to {CONTROL_STEPS} (its steps: "
            f"{[s for s, _ in control.metrics.losses][:10]})",
            "the trainer must behave the same in every run with the same variables",
            control,
        )
    if not differs:
        d["restore_check"] = "not run (the curve does not depend on the data)"
        return result.fail(
            f"the training curve does not depend on the data: a control run on shifted rows (step k given "
            f"the rows of step k + {settings.steps // 2}) reported the same losses as the reference run for "
            f"steps 1 to {CONTROL_STEPS}",
            "train step k on rows (k-1) x B .. k x B - 1 of CAMPAIGN_REHEARSAL_TRAIN "
            "(B = CAMPAIGN_REHEARSAL_BATCH_SEQUENCES) and report the loss computed on them",
            control,
        )
    d["control_differs_at_step"] = differs
    checks.append(f"the curve depends on the data (a control run on shifted rows differs at step {differs})")

    # 4. The faulted run: kill after a checkpoint, blank the rows already trained, restart, compare.
    after_checkpoint, kill_step = choice
    d["kill_step"], d["kill_after_checkpoint"] = kill_step, after_checkpoint
    fault_dir = workdir / "faulted"
    fault_metrics = fault_dir / "metrics.jsonl"
    fault_train = fault_dir / "train.npy"
    fault_env = {
        **base_env,
        **contract_env(
            fault_train, heldout, vocab, settings, fault_dir / "checkpoints", fault_metrics, cache
        ),
    }
    # The kill is asynchronous: a fast trainer on a busy machine may write its last checkpoint before the signal
    # lands, which would leave no step after the restore to compare. Such a start proves nothing either way, so it
    # is thrown away and tried again in a fresh folder; a trainer that is always too fast fails, saying so.
    for attempt in range(1, KILL_ATTEMPTS + 1):
        shutil.rmtree(fault_dir / "checkpoints", ignore_errors=True)
        fault_metrics.unlink(missing_ok=True)
        _write_rows(fault_train, rows, order)
        first = run_start(
            f"faulted-1-attempt-{attempt}" if attempt > 1 else "faulted-1",
            command,
            fault_env,
            fault_metrics,
            fault_dir / "logs",
            deadline,
            kill_when=lambda m: bool(m.checkpoints) and m.last_step >= kill_step,
            registry=workdir / REGISTRY,
            wrap=_isolated(command, [fault_train, heldout], fault_dir / "checkpoints", fault_metrics, cache),
            kill_one=settings.kill_one,
        )
        ran_past = (
            not first.metrics.problems
            and not first.timed_out
            and first.metrics.last_step >= kill_step
            and max(first.metrics.checkpoints, default=0) >= settings.steps
        )
        if not ran_past:
            break
    result.timings["faulted_1_starts"] = attempt  # timing, not a verdict: how often the kill landed too late
    result.timings["faulted_1_wall_s"] = first.wall_s
    result.timings["faulted_1_cpu_s"] = first.cpu_s
    if ran_past:
        return result.fail(
            f"faulted run: in {KILL_ATTEMPTS} starts the trainer wrote its last checkpoint (step "
            f"{settings.steps}) before the kill chosen at step {kill_step} landed, so no step was left to "
            "compare after a restore",
            "raise rehearsal.steps so that the trainer runs long enough to be killed between two checkpoints",
            first,
        )
    if not first.killed_by_harness:
        if _check_start(result, first, settings, "faulted run before the kill"):
            result.fail(
                f"faulted run: the trainer finished at step {first.metrics.last_step} without reaching "
                f"the kill step {kill_step} after a checkpoint (checkpoints reported: "
                f"{first.metrics.checkpoints or 'none'})",
                "the trainer must behave the same in every run with the same variables",
                first,
            )
        return result
    if not _check_start(result, first, settings, "faulted run before the kill", expect_exit=False):
        return result
    d["killed_at_step"] = first.metrics.last_step
    if settings.kill_one:  # said only when asked: the details of a whole-group kill stay as they were
        d["killed_process"] = first.killed_process
    d["partial_bytes_dropped"] = drop_partial_line(fault_metrics)
    last_checkpoint = max(first.metrics.checkpoints)
    # The restarted process cannot replay what came before its checkpoint: those rows are blank now.
    _write_rows(fault_train, rows, order, blank_before=last_checkpoint * batch)
    d["blanked_rows"] = last_checkpoint * batch

    # The restart reaches nothing an earlier start left outside its checkpoint folder: a fresh cache folder, and (in
    # the sandbox) a private /tmp, /dev/shm and home, every other file read-only to every start.
    # It writes a metrics file of its own, empty: the first start's lines are no channel to it (a trainer could
    # keep its state in them), and in the sandbox the rehearsal's folder is hidden from it but for its checkpoint
    # folder, its metrics file, its cache and its training file (the earlier starts' logs, metrics and folders).
    restart_cache = workdir / "cache-restart"
    shutil.rmtree(restart_cache, ignore_errors=True)
    restart_cache.mkdir(parents=True)
    restart_metrics = fault_dir / "metrics-restart.jsonl"
    restart_metrics.unlink(missing_ok=True)
    second = run_start(
        "faulted-2",
        command,
        {**fault_env, c.ENV_CACHE_DIR: str(restart_cache), c.ENV_METRICS: str(restart_metrics)},
        restart_metrics,
        fault_dir / "logs",
        deadline,
        registry=workdir / REGISTRY,
        wrap=_isolated(
            command,
            [fault_train, heldout],
            fault_dir / "checkpoints",
            restart_metrics,
            restart_cache,
            hide=(workdir,),
        ),
    )
    with fault_metrics.open("ab") as whole:  # the faulted run's metrics file holds both starts, as before
        whole.write(restart_metrics.read_bytes() if restart_metrics.exists() else b"")
    problem = sandbox_problem()
    isolation = (
        "the restart ran with a fresh cache folder, an empty metrics file of its own, a private /tmp, /dev/shm and "
        "home, the rehearsal's folder hidden but for its own paths, and every other file read-only to every start, "
        "so state kept anywhere but CAMPAIGN_REHEARSAL_CHECKPOINT_DIR was out of its reach"
        if not problem
        else f"the restart ran with a fresh cache folder and an empty metrics file of its own only (isolation not "
        f"checked: {problem})"
    )
    d["restart_isolation"] = isolation
    result.timings["faulted_2_wall_s"] = second.wall_s
    result.timings["faulted_2_cpu_s"] = second.cpu_s
    result.curves = replace(
        result.curves,
        faulted=FaultedCurve(
            first.metrics.losses + second.metrics.losses,
            first.metrics.heldout + second.metrics.heldout,
            first.metrics.last_step,
            second.metrics.resumed[0] if second.metrics.resumed else None,
        ),
    )
    if not _check_start(result, second, settings, "restarted run"):
        result.problems[-1] += f" ({isolation})"
        return result
    if not second.metrics.resumed:
        started = second.metrics.losses[0][0] if second.metrics.losses else None
        return result.fail(
            f"restarted run never reported resumed (its first step was {started}; the last complete checkpoint "
            f"before the kill was step {last_checkpoint}; {isolation})",
            "on start, load the latest complete checkpoint in CAMPAIGN_REHEARSAL_CHECKPOINT_DIR and append "
            '{"event": "resumed", "step": k}',
            second,
        )
    resumed = second.metrics.resumed[0]
    d["resumed_step"] = resumed
    if resumed != last_checkpoint:
        result.fail(
            f"restarted run resumed at step {resumed}, but the last complete checkpoint before the kill "
            f"was step {last_checkpoint}",
            "resume from the newest complete checkpoint; report a checkpoint only once it is on disk",
            second,
        )
    tol = settings.restore_tolerance
    exact = "bit-identical" if tol == 0 else f"within {tol:g}"
    n_before, diff = compare_curves(ref.metrics.losses, first.metrics.losses, 1, first.metrics.last_step, tol)
    if diff is not None:
        result.fail(
            f"not deterministic for a seed: before any fault, the second run differs at {diff.describe()}",
            "make the trainer deterministic for CAMPAIGN_REHEARSAL_SEED, or set "
            "rehearsal.restore_tolerance for a non-deterministic trainer",
            first,
        )
    n_after, diff = compare_curves(
        ref.metrics.losses, second.metrics.losses, resumed + 1, settings.steps, tol
    )
    if diff is not None:
        result.fail(
            f"resumed run differs from the uninterrupted run at {diff.describe()} (first differing "
            f"step {diff.step}, resumed at {resumed}; the rows of steps 1 to {last_checkpoint} were blank in "
            "the restarted process's training file, so a restart that replays them instead of restoring "
            f"diverges; {isolation})",
            "restore from the checkpoint instead of replaying; the checkpoint must hold everything a step "
            "depends on: parameters, optimizer state, step, data position and random state",
            second,
        )
    _, hdiff = compare_curves(ref.metrics.heldout, second.metrics.heldout, resumed + 1, settings.steps, tol)
    if hdiff is not None and diff is None:
        result.fail(
            f"resumed run's held-out loss differs at {hdiff.describe('held-out loss')}",
            "the checkpoint must hold everything evaluation depends on",
            second,
        )
    d["restore_compared_steps"] = n_after
    d["restore_check"] = (
        f"{exact} over {n_after} steps after the restore ({n_before} before the kill), without the rows of "
        f"steps 1 to {last_checkpoint}"
        if result.passed
        else "failed"
    )
    if result.passed:
        checks.append(f"restored, not replayed: {d['restore_check']}")
        checks.append("no process left the trainer's process group")
        checks.append(
            "restored from the checkpoint folder alone: " + isolation
            if not problem
            else f"restart isolation not checked ({problem}); the restart had a fresh cache folder"
        )
    return result


def _judge_training(result: RehearsalResult, ref: Start, settings: HarnessSettings) -> bool:
    """Loss and held-out loss of the uninterrupted run: finite, not diverging, falling enough."""
    d = result.details
    m = ref.metrics
    first, last = tenth_means(m.losses, settings.steps)
    d.update(loss_first_tenth=first, loss_last_tenth=last, loss_drop=first - last)
    result.timings["tokens_per_s"] = _tokens_per_s(ref, settings.tokens_per_step)
    ok = True
    bad = first_non_finite(m.losses)
    bad_held = first_non_finite(m.heldout)
    divergence = first_divergence(m.losses)
    lower = f"lower rehearsal.learning_rate (now {settings.extra_env.get(c.ENV_LEARNING_RATE)})"
    if bad is not None:
        d["first_non_finite_step"] = bad[0]
    if divergence is not None:
        d["divergence_step"] = divergence[0]
    if divergence is not None and (bad is None or divergence[0] < bad[0]):
        nan_text = f"; the first non-finite loss is at step {bad[0]}" if bad is not None else ""
        result.fail(
            f"training diverged at step {divergence[0]}: loss {divergence[1]:.6g} is above the starting "
            f"loss {divergence[2]:.4f} by more than 1 nat{nan_text}",
            lower,
            ref,
        )
        ok = False
    elif bad is not None:
        result.fail(
            f"training loss is {bad[1]} at step {bad[0]} (the first non-finite value; "
            f"{m.where.get(('loss', bad[0]), 'metrics')})",
            lower,
            ref,
        )
        ok = False
    if bad_held is not None:
        result.fail(
            f"held-out loss is {bad_held[1]} at step {bad_held[0]} (the first non-finite value; "
            f"{m.where.get(('heldout', bad_held[0]), 'metrics')})",
            lower,
            ref,
        )
        ok = False
    if ok and not first - last >= settings.min_loss_drop:
        result.fail(
            f"training loss fell by only {first - last:.3f} nats from the first tenth of the steps "
            f"({first:.3f}) to the last ({last:.3f}); rehearsal.min_loss_drop is {settings.min_loss_drop:g}",
            "check the data and the learning rate, or train longer (rehearsal.steps)",
            ref,
        )
        ok = False
    if len(m.heldout) < 2:
        result.fail(
            f"the trainer reported {len(m.heldout)} held-out evaluation(s); at least two are needed "
            "to see held-out loss fall",
            'append {"step": k, "heldout_loss": x} at the start and at the end of training',
            ref,
        )
        return False
    d["heldout_first"], d["heldout_last"] = m.heldout[0][1], m.heldout[-1][1]
    if ok and not m.heldout[-1][1] < m.heldout[0][1]:
        result.fail(
            f"held-out loss did not fall: {m.heldout[0][1]:.3f} at step {m.heldout[0][0]}, "
            f"{m.heldout[-1][1]:.3f} at step {m.heldout[-1][0]}",
            "the model is not learning anything that generalises: check the data and the learning rate",
            ref,
        )
        ok = False
    if ok and m.heldout[-1][1] < last - LEAK_MARGIN_NATS:
        result.fail(
            f"held-out loss {m.heldout[-1][1]:.3f} at step {m.heldout[-1][0]} is {last - m.heldout[-1][1]:.2f} "
            f"nats below the training loss of the last tenth of the steps ({last:.3f}): a possible leak of "
            "held-out data into training",
            "train only on CAMPAIGN_REHEARSAL_TRAIN and evaluate on CAMPAIGN_REHEARSAL_HELDOUT; check that the "
            "trainer does not read the held-out rows while training",
            ref,
        )
        ok = False
    return ok

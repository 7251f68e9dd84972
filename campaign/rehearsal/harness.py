"""The rehearsal harness: run the trainer uninterrupted, run it again with a real SIGKILL, restart it, judge.

1. The reference run: the trainer from scratch to its last step; its curve is the yardstick.
2. The faulted run, in a fresh checkpoint folder: at a step chosen by the seed a little after one of the
   checkpoints the reference run reported, the harness kills the trainer's whole process group with SIGKILL,
   then starts the same command with the same variables. The trainer must report `resumed` at the last
   checkpoint it completed before the kill and then reproduce the reference curve: exactly at
   `restore_tolerance` 0, else within it. Steps before the kill are compared too (determinism for a seed).
3. The verdict (`campaign.rehearsal.verdict`): loss falls by `min_loss_drop`, held-out loss falls, nothing
   is NaN or infinite, the restore matches; tokens/s of the reference run (compile time excluded).
Every way a trainer can misbehave (no such command, non-zero exit, malformed metrics, no checkpoint, no
resume, a hang) is a failed result with the reason, the trainer's last stderr lines and what to do.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from campaign.rehearsal import contract as c
from campaign.rehearsal.processes import Start, drop_partial_line, resolve_command, run_start
from campaign.rehearsal.verdict import compare_curves, first_divergence, first_non_finite, tenth_means

REGISTRY = "trainers.json"  # process groups this rehearsal started (campaign.rehearsal.processes)


KILL_STREAM = (
    0x4B494C4C  # "KILL": the seed's stream for the kill step, apart from every other use of the seed
)


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
    extra_env: dict[str, str] = field(default_factory=dict)  # learning rate, model shape, ...
    python: str = sys.executable


@dataclass
class RehearsalResult:
    passed: bool
    problems: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # evidence that repeats exactly for the same inputs
    timings: dict[str, float] = field(default_factory=dict)  # wall times and tokens/s: vary from run to run
    curves: dict[str, Any] = field(default_factory=dict)

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
            f"resumed at {d['resumed_step']}: {d['restore_check']}"
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
        c.ENV_CHECKPOINT_DIR: str(checkpoint_dir),
        c.ENV_METRICS: str(metrics),
        c.ENV_CACHE_DIR: str(cache_dir),
        **settings.extra_env,
    }


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
    return not start.survivors


def rehearse(
    train: Path, heldout: Path, vocab: int, settings: HarnessSettings, workdir: Path
) -> RehearsalResult:
    """Run the reference and the faulted runs of the trainer under `workdir` and judge them."""
    result = RehearsalResult(passed=True)
    d = result.details
    d.update(
        min_loss_drop=settings.min_loss_drop,
        restore_tolerance=settings.restore_tolerance,
        steps=settings.steps,
        command=settings.command,
    )
    command = resolve_command(settings.command, settings.python)
    deadline = time.monotonic() + settings.timeout_s
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("CAMPAIGN_REHEARSAL_")}
    cache = workdir / "cache"

    # 1. The reference run.
    ref_dir = workdir / "reference"
    ref_env = contract_env(
        train, heldout, vocab, settings, ref_dir / "checkpoints", ref_dir / "metrics.jsonl", cache
    )
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "env.json").write_text(json.dumps({"command": command, "env": ref_env}, indent=1) + "\n")
    ref = run_start(
        "reference",
        command,
        {**base_env, **ref_env},
        ref_dir / "metrics.jsonl",
        ref_dir / "logs",
        deadline,
        registry=workdir / REGISTRY,
    )
    result.timings["reference_wall_s"] = ref.wall_s
    result.curves["reference"] = {
        "loss": ref.metrics.losses,
        "heldout": ref.metrics.heldout,
        "checkpoints": ref.metrics.checkpoints,
    }
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

    # 2. The faulted run: kill after a checkpoint, restart, compare.
    choice = choose_kill_step(ref.metrics.checkpoints, settings.steps, settings.seed)
    if choice is None:
        return result.fail(
            f"the trainer never reported a complete checkpoint before its last step (events: "
            f"{ref.metrics.checkpoints or 'none'})",
            "write a checkpoint every CAMPAIGN_REHEARSAL_CHECKPOINT_EVERY steps and append "
            '{"event": "checkpoint", "step": k} once it is complete on disk',
            ref,
        )
    after_checkpoint, kill_step = choice
    d["kill_step"], d["kill_after_checkpoint"] = kill_step, after_checkpoint
    fault_dir = workdir / "faulted"
    fault_metrics = fault_dir / "metrics.jsonl"
    fault_env = {
        **base_env,
        **contract_env(train, heldout, vocab, settings, fault_dir / "checkpoints", fault_metrics, cache),
    }
    first = run_start(
        "faulted-1",
        command,
        fault_env,
        fault_metrics,
        fault_dir / "logs",
        deadline,
        kill_when=lambda m: bool(m.checkpoints) and m.last_step >= kill_step,
        registry=workdir / REGISTRY,
    )
    result.timings["faulted_1_wall_s"] = first.wall_s
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
    d["partial_bytes_dropped"] = drop_partial_line(fault_metrics)
    last_checkpoint = max(first.metrics.checkpoints)

    second = run_start(
        "faulted-2",
        command,
        fault_env,
        fault_metrics,
        fault_dir / "logs",
        deadline,
        registry=workdir / REGISTRY,
    )
    result.timings["faulted_2_wall_s"] = second.wall_s
    result.curves["faulted"] = {
        "loss": first.metrics.losses + second.metrics.losses,
        "heldout": first.metrics.heldout + second.metrics.heldout,
        "killed_at_step": first.metrics.last_step,
        "resumed_step": second.metrics.resumed[0] if second.metrics.resumed else None,
    }
    if not _check_start(result, second, settings, "restarted run"):
        return result
    if not second.metrics.resumed:
        started = second.metrics.losses[0][0] if second.metrics.losses else None
        return result.fail(
            f"restarted run never reported resumed (its first step was {started}; the last complete checkpoint "
            f"before the kill was step {last_checkpoint})",
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
            f"step {diff.step}, resumed at {resumed})",
            "the checkpoint must hold everything a step depends on: parameters, optimizer state, step, "
            "data position and random state",
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
        f"{exact} over {n_after} steps after the restore ({n_before} before the kill)"
        if result.passed
        else "failed"
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
        result.fail(f"training loss is {bad[1]} at step {bad[0]} (the first non-finite value)", lower, ref)
        ok = False
    if bad_held is not None:
        result.fail(
            f"held-out loss is {bad_held[1]} at step {bad_held[0]} (the first non-finite value)", lower, ref
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
    return ok

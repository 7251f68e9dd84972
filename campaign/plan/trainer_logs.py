"""Step times from the logs training frameworks already write, each read from the framework's own format strings.

- `megatron`: Megatron-LM's `training_log` (megatron/training/training.py) prints, every `--log-interval`
  iterations, `iteration N/M | consumed samples: ... | elapsed time per iteration (ms): T | ... | global batch
  size: B | lm loss: ... | number of skipped iterations: S | number of nan iterations: K |`; T is the mean over
  the iterations since the previous line, S and K count that interval's skipped (loss-scale overflow) and NaN
  iterations. `_print_args` (megatron/training/arguments.py) prints `  seq_length ........ 4096` and the parallel
  sizes before training.
- `torchtitan`: TorchTitan's `MetricsProcessor.log` (torchtitan/components/metrics.py) prints `step: N  loss: ...
  memory: ...GiB(...%)  tps: X  tflops: ...  mfu: ...%` every `log_freq` steps, colour codes and the
  `[titan] <time> - root - INFO -` prefix around it; X is tokens per second per device since the previous line, so
  a step takes global batch tokens / (X x GPUs).
- `nemo`: Lightning's CSV logger (`metrics.csv`) of a NeMo run, whose `TimingCallback` (nemo/utils/exp_manager.py)
  logs `train_step_timing in s` per step beside `step`/`global_step` and `consumed_samples`.
- `nemo-tensorboard`: the same scalars in Lightning's TensorBoard logger's `events.out.tfevents.*` files (a file or
  the folder holding them, one file per start; campaign.plan.tensorboard_events), each event's step Lightning's step
  and its wall time the writer's; `reduced_train_loss` (the GPT model's or the Megatron strategy's `training_step`)
  names the steps whose loss is NaN.
- `jsonl`: the rehearsal contract's JSON lines (docs/rehearsal.md), the reference trainer's metrics among them:
  `{"step": k, "step_time_s": s}` or a wall-clock `time_s` / `timestamp` / `time` (the external-run metrics of
  `analyse --metrics`), and `tokens` per step.

Every reader returns samples (seconds per step over the steps since the previous sample), split into segments where
the step number goes back (a restart from a checkpoint inside the log); what it leaves out, it names.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from campaign.errors import DataError
from campaign.files import check_regular
from campaign.plan.tensorboard_events import EventFile, Scalar, is_event_path, read_event_files

FORMATS = ("megatron", "torchtitan", "nemo", "nemo-tensorboard", "jsonl")
MAX_LINE_CHARS = 1 << 20  # a log line longer than this is not one a trainer printed
MAX_NOTES = 8

ANSI = re.compile(r"\x1b\[[0-9;]{0,40}m")
MEGATRON_ITERATION = re.compile(r"\biteration\s{1,20}(\d{1,12})\s{0,20}/\s{0,20}(\d{1,12})\s{0,20}\|")
MEGATRON_ARG = re.compile(r"^\s{0,8}([a-z_0-9]{1,80}) \.{2,80} (\S{1,200})\s*$")
TITAN_STEP = re.compile(r"\bstep:\s{0,20}(\d{1,12})\s{1,20}loss:")
TITAN_TPS = re.compile(r"\btps:\s{0,20}([\d,]{1,30})")
NEMO_TIMING = "train_step_timing in s"
# torch's SummaryWriter (Lightning's choice when the tensorboard package is there) keeps the tag as logged;
# tensorboardX's (its fallback) replaces the spaces with '_' (tensorboardX/summary.py _clean_tag)
NEMO_TB_TIMING = (NEMO_TIMING, "train_step_timing_in_s")
NEMO_TB_LOSS = "reduced_train_loss"
NEMO_TB_CONSUMED = "consumed_samples"


@dataclass(frozen=True)
class StepSample:
    """Seconds per step over `steps` steps ending at `step`, from line `line`; `segment` counts restarts."""

    step: int
    seconds: float
    steps: int
    line: int
    segment: int
    excluded: str = ""  # why the sample is left out ("" when it counts)
    where: str = ""  # where it was read, when `path:line` cannot say (an event file and its step)


@dataclass(frozen=True)
class TrainerLog:
    format: str
    samples: tuple[StepSample, ...]
    tokens_per_step: int | None  # tokens per step the records state (the rehearsal contract's `tokens`)
    batch_sequences: int | None  # the one global batch (sequences) the log states
    seq_len: int | None  # the sequence length the log states
    batch_note: str  # what the log says about its batch, in words
    layout: dict[str, int] | None = None  # the parallel layout the log states (Megatron's arguments)
    notes: tuple[str, ...] = field(default_factory=tuple)


def _open_text(path: Path) -> io.TextIOBase:
    try:
        check_regular(path)
        return path.open(encoding="utf-8", errors="replace", newline="")
    except OSError as exc:
        problem = "does not exist" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc})"
        raise DataError(
            f"the training log {problem}",
            where=str(path),
            fix="give the trainer's log or metrics file as a regular file",
        ) from None


class LogLines(list[str]):
    """A file's lines without their ends, and whether the last one was cut short (no newline: a kill mid-write)."""

    cut: bool = False


def _lines(path: Path) -> LogLines:
    with _open_text(path) as handle:
        lines = LogLines()
        for number, line in enumerate(handle, start=1):
            if len(line) > MAX_LINE_CHARS:
                raise DataError(
                    f"line {number} is {len(line):,} characters long: not a training log",
                    where=f"{path}:{number}",
                    fix="give the trainer's own log or metrics file",
                )
            lines.cut = not line.endswith("\n")
            lines.append(line.rstrip("\r\n"))
        return lines


def detect_format(path: Path, lines: list[str]) -> str:
    """Which log this is, from its content: the first line that only one format writes."""
    for line in lines[:5000]:
        text = ANSI.sub("", line)
        if MEGATRON_ITERATION.search(text) and "elapsed time per iteration (ms)" in text:
            return "megatron"
        if TITAN_STEP.search(text) and TITAN_TPS.search(text):
            return "torchtitan"
        if NEMO_TIMING in text and ("step" in text.split(",") or "global_step" in text):
            return "nemo"
        if text.lstrip().startswith("{"):
            return "jsonl"
    raise DataError(
        "not a training log campaign reads: no Megatron-LM iteration line, TorchTitan step line, NeMo metrics.csv "
        "header, TensorBoard event record or JSON-lines step record",
        where=str(path),
        fix="give Megatron-LM's training log, TorchTitan's log, NeMo's metrics.csv or TensorBoard event files, or the "
        "rehearsal contract's metrics (docs/plan-model.md#from-a-short-run-to-a-measurement), or name one with "
        "--format",
    )


def _segmented(
    raw: list[tuple[int, float, int, str]], what: str, path: Path, places: list[str] | None = None
) -> tuple[list[StepSample], list[str]]:
    """(step, seconds per step, line, excluded) in file order -> samples with steps covered and segments; the
    step going back (or repeating) starts a segment, named in the notes (at `places[i]` when given)."""
    samples: list[StepSample] = []
    notes: list[str] = []
    segment, previous = 0, None
    for i, (step, seconds, line, excluded) in enumerate(raw):
        where = places[i] if places else ""
        if previous is not None and step <= previous:
            segment += 1
            notes.append(
                f"{where or f'{path}:{line}'}: the {what} went back from {previous} to {step}, a restart inside the "
                "log; the steps before it are kept, and the restart's first steps are warm-up again"
            )
            previous = None
        steps = 1 if previous is None else step - previous
        samples.append(StepSample(step, seconds, steps, line, segment, excluded, where))
        previous = step
    return samples, notes


def _seconds(value: str, where: str, what: str) -> float:
    try:
        number = float(value.replace(",", ""))
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise DataError(
            f"{what} is {value!r}, not a positive number",
            where=where,
            fix="give the log as the trainer wrote it (a line cut or edited by hand cannot be read)",
        )
    return number


def _count(value: str, where: str, what: str) -> int:
    """A whole number the trainer printed (Lightning writes floats such as 12.0)."""
    try:
        number = float(value.strip() or "0")
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0 or number != int(number) or number > 1e15:
        raise DataError(
            f"{what} is {value!r}, not a whole number",
            where=where,
            fix="give the log as the trainer wrote it (a line cut or edited by hand cannot be read)",
        )
    return int(number)


def read_megatron(path: Path, lines: list[str]) -> TrainerLog:
    raw: list[tuple[int, float, int, str]] = []
    args: dict[str, str] = {}
    batches: set[int] = set()
    for number, line in enumerate(lines, start=1):
        arg = MEGATRON_ARG.match(line)
        if arg and not raw:
            args.setdefault(arg.group(1), arg.group(2))
            continue
        text = ANSI.sub("", line)
        found = MEGATRON_ITERATION.search(text)
        if not found or "elapsed time per iteration (ms)" not in text:
            continue
        where = f"{path}:{number}"
        fields = {}
        for part in text[found.end() :].split("|"):
            key, _, value = part.rpartition(":")
            if key.strip():
                fields[key.strip()] = value.strip()
        ms = _seconds(
            fields.get("elapsed time per iteration (ms)", ""), where, "elapsed time per iteration (ms)"
        )
        skipped = _count(
            fields.get("number of skipped iterations", "0"), where, "number of skipped iterations"
        )
        nans = _count(fields.get("number of nan iterations", "0"), where, "number of nan iterations")
        excluded = ""
        if skipped or nans:
            excluded = ", ".join(
                f"{n} {kind} iteration{'s' if n != 1 else ''}"
                for n, kind in ((skipped, "skipped"), (nans, "NaN"))
                if n
            )
        if "global batch size" in fields:
            batches.add(_count(fields["global batch size"], where, "global batch size"))
        raw.append((int(found.group(1)), ms / 1000.0, number, excluded))
    samples, notes = _segmented(raw, "iteration", path)
    layout = _megatron_layout(args)
    seq_len = int(args["seq_length"]) if args.get("seq_length", "").isdigit() else None
    batch = next(iter(batches)) if len(batches) == 1 else None
    note = (
        f"global batch size {batch} (Megatron-LM's line)"
        if batch
        else f"the global batch size changes in the log ({', '.join(map(str, sorted(batches)))}): a ramp-up"
        if batches
        else "the log gives no global batch size"
    )
    if not samples:
        return _none(path)
    return TrainerLog("megatron", tuple(samples), None, batch, seq_len, note, layout, tuple(notes))


def _megatron_layout(args: dict[str, str]) -> dict[str, int] | None:
    keys = {
        "tp": "tensor_model_parallel_size",
        "pp": "pipeline_model_parallel_size",
        "dp": "data_parallel_size",
        "cp": "context_parallel_size",
        "vpp": "virtual_pipeline_model_parallel_size",
    }
    if not all(args.get(keys[k], "").isdigit() for k in ("tp", "pp", "dp")):
        return None
    return {k: int(args[v]) if args.get(v, "").isdigit() else 1 for k, v in keys.items()}


def read_torchtitan(path: Path, lines: list[str], gpus: int | None, tokens: int | None) -> TrainerLog:
    found_lines = []
    for number, line in enumerate(lines, start=1):
        text = ANSI.sub("", line)
        step, tps = TITAN_STEP.search(text), TITAN_TPS.search(text)
        if step and tps:
            found_lines.append(
                (int(step.group(1)), _seconds(tps.group(1), f"{path}:{number}", "tps"), number)
            )
    if not found_lines:
        return _none(path)
    if gpus is None or tokens is None:
        raise DataError(
            "TorchTitan's step line gives tokens per second per GPU (tps), not seconds: a step takes global batch "
            "tokens / (tps x GPUs), and the log states neither",
            where=str(path),
            fix="pass --layout (the run's GPUs) and --global-batch-tokens (the run's tokens per optimizer step)",
        )
    raw = [(s, tokens / (tps * gpus), n, "") for s, tps, n in found_lines]
    samples, notes = _segmented(raw, "step", path)
    return TrainerLog(
        "torchtitan",
        tuple(samples),
        None,
        None,
        None,
        "TorchTitan's step line states no batch",
        None,
        tuple(notes),
    )


def read_nemo(path: Path, lines: list[str]) -> TrainerLog:
    rows = csv.reader(lines)
    header = [h.strip() for h in next(rows, [])]
    step_col = "step" if "step" in header else "global_step" if "global_step" in header else None
    if NEMO_TIMING not in header or step_col is None:
        raise DataError(
            f"a NeMo metrics.csv needs the columns '{NEMO_TIMING}' and step (or global_step)",
            where=f"{path}:1",
            fix="give the metrics.csv Lightning's CSV logger wrote for the run",
        )
    t_i, s_i = header.index(NEMO_TIMING), header.index(step_col)
    c_i = header.index("consumed_samples") if "consumed_samples" in header else None
    raw, consumed = [], []
    for number, row in enumerate(rows, start=2):
        if len(row) != len(header):
            if not any(v.strip() for v in row):
                continue
            raise DataError(
                f"{len(row)} fields where the header has {len(header)}",
                where=f"{path}:{number}",
                fix="give the metrics.csv as Lightning wrote it",
            )
        if not row[t_i].strip():
            continue  # a row of validation or epoch metrics
        step = _count(row[s_i], f"{path}:{number}", step_col)
        raw.append((step, _seconds(row[t_i], f"{path}:{number}", NEMO_TIMING), number, ""))
        if c_i is not None and row[c_i].strip():
            consumed.append((step, float(_count(row[c_i], f"{path}:{number}", "consumed_samples"))))
    samples, notes = _segmented(raw, "step", path)
    batch, note = _consumed_batch(consumed)
    if not samples:
        return _none(path)
    return TrainerLog("nemo", tuple(samples), None, batch, None, note, None, tuple(notes))


def _consumed_batch(consumed: list[tuple[int, float]]) -> tuple[int | None, str]:
    """The global batch (sequences) from NeMo's consumed_samples at successive steps, when it is one."""
    per_step = {
        round((b[1] - a[1]) / (b[0] - a[0]))
        for a, b in itertools.pairwise(consumed)
        if b[0] > a[0] and b[1] > a[1]
    }
    if len(per_step) == 1:
        batch = int(next(iter(per_step)))
        return batch, f"global batch {batch} sequences (consumed_samples per step)"
    if per_step:
        return None, f"consumed_samples per step changes ({', '.join(map(str, sorted(per_step)))}): a ramp-up"
    return None, "no global batch in the metrics"


def _nemo_timing(file: EventFile) -> tuple[Scalar, ...]:
    tag = next((t for t in NEMO_TB_TIMING if t in file.scalars), None)
    return file.scalars[tag] if tag else ()


def _nemo_event_files(path: Path) -> list[EventFile]:
    files = read_event_files(path)
    if not any(_nemo_timing(f) for f in files):
        seen = sorted({t for f in files for t in f.scalars})
        raise DataError(
            f"no '{NEMO_TIMING}' scalar (NeMo's TimingCallback) in {len(files)} event file(s); the scalars are "
            f"{', '.join(seen[:12]) or 'none'}",
            where=str(path),
            fix="give the TensorBoard log of a NeMo training run (exp_manager's TimingCallback is on by default)",
        )
    return files


def read_nemo_tensorboard(path: Path) -> TrainerLog:
    """NeMo's TensorBoard scalars: `train_step_timing in s` per logged step, the steps whose `reduced_train_loss`
    is NaN or infinite (or whose timing is) left out and named, the batch from `consumed_samples`."""
    files = _nemo_event_files(path)
    raw: list[tuple[int, float, int, str]] = []
    places: list[str] = []
    consumed: list[tuple[int, float]] = []
    notes = [n for f in files for n in f.notes]
    for file in files:
        losses = {s.step: s.value for s in file.scalars.get(NEMO_TB_LOSS, ())}
        for number, point in enumerate(_nemo_timing(file), start=1):
            loss = losses.get(point.step, 0.0)
            excluded = (
                f"a step time of {point.value}"
                if not math.isfinite(point.value) or point.value <= 0
                else f"a {'NaN' if math.isnan(loss) else 'infinite'} loss"
                if not math.isfinite(loss)
                else ""
            )
            raw.append((point.step, point.value, number, excluded))
            places.append(f"{file.path} (step {point.step})")
        consumed += [
            (s.step, s.value) for s in file.scalars.get(NEMO_TB_CONSUMED, ()) if math.isfinite(s.value)
        ]
    samples, restarts = _segmented(raw, "step", path, places)
    batch, note = _consumed_batch(consumed)
    return TrainerLog(
        "nemo-tensorboard", tuple(samples), None, batch, None, note, None, tuple(notes + restarts)
    )


def _number(record: dict, key: str, where: str) -> float:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(
            f"{key} is {value!r}, not a finite number of seconds",
            where=where,
            fix="write one JSON object per line with numeric step_time_s or time_s",
        )
    return float(value)


def read_jsonl(path: Path, lines: LogLines) -> TrainerLog:
    direct: list[tuple[int, float, int, str]] = []
    clock: list[tuple[int, float, int]] = []
    tokens: set[int] = set()
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{line_no}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if line_no == len(lines) and lines.cut:
                break  # a last write cut short by a kill
            raise DataError(
                f"not JSON ({exc.msg})", where=where, fix="one JSON object per line (the rehearsal contract)"
            ) from None
        if not isinstance(record, dict) or "event" in record or "step" not in record:
            continue
        step = record["step"]
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise DataError(f"step is {step!r}, not a step number", where=where, fix="number steps 1, 2, ...")
        if "step_time_s" in record:
            direct.append((step, _number(record, "step_time_s", where), line_no, ""))
        if isinstance(record.get("tokens"), int) and not isinstance(record["tokens"], bool):
            tokens.add(record["tokens"])
        for key in ("time_s", "timestamp", "time"):
            if key in record and "step_time_s" not in record:
                clock.append((step, _number(record, key, where), line_no))
                break
    if direct:
        samples, notes = _segmented(direct, "step", path)
    else:
        marks, notes = _segmented([(s, t, n, "") for s, t, n in clock], "step", path)
        samples = [
            StepSample(b.step, (b.seconds - a.seconds) / b.steps, b.steps, b.line, b.segment)
            for a, b in itertools.pairwise(marks)
            if a.segment == b.segment
        ]
    if not samples:
        raise DataError(
            "no per-step step_time_s or time_s / timestamp in the file",
            where=str(path),
            fix='log {"step": k, "step_time_s": seconds} (or a wall-clock "time_s") after each step',
        )
    per_step = next(iter(tokens)) if len(tokens) == 1 else None
    note = "the records' tokens" if per_step else "the records give no single tokens per step"
    return TrainerLog("jsonl", tuple(samples), per_step, None, None, note, None, tuple(notes))


def _none(path: Path) -> TrainerLog:
    raise DataError(
        "the log has no step line with a time in it",
        where=str(path),
        fix="give the log of a run that trained at least a few logged steps",
    )


def read_trainer_log(
    path: Path, fmt: str | None = None, *, gpus: int | None = None, global_batch_tokens: int | None = None
) -> TrainerLog:
    """Read `path` as `fmt` (default: detected from its content; a folder or event file is TensorBoard's)."""
    if fmt == "nemo-tensorboard" or (fmt is None and is_event_path(path)):
        return read_nemo_tensorboard(path)
    lines = _lines(path)
    kind = fmt or detect_format(path, lines)
    if kind == "megatron":
        return read_megatron(path, lines)
    if kind == "torchtitan":
        return read_torchtitan(path, lines, gpus, global_batch_tokens)
    if kind == "nemo":
        return read_nemo(path, lines)
    if kind == "jsonl":
        return read_jsonl(path, lines)
    raise DataError(
        f"--format {kind!r} is not one of {', '.join(FORMATS)}",
        where="--format",
        fix="leave it out to detect it",
    )


MEGATRON_STAMP = re.compile(
    r"\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)\]"
)  # .%f: some versions print whole seconds
MEGATRON_SAVED = re.compile(r"successfully saved checkpoint from iteration\s{0,20}(\d{1,12})")
TITAN_STAMP = re.compile(r"^\[titan\] (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(\d{3})")


@dataclass(frozen=True, slots=True)
class TimedLine:
    """One step, checkpoint or resumed line of a run's log with its wall-clock time."""

    t: float  # Unix seconds
    kind: str  # step, checkpoint or resumed
    step: int
    tokens: int | None = None  # the step's tokens, where the log gives them


def nemo_tensorboard_records(path: Path) -> list[TimedLine]:
    """NeMo's TensorBoard scalars as the step records of a run campaign did not launch: each logged step at the
    wall time its writer stamped, in the order the files were begun (a step going back is a restart)."""
    return [
        TimedLine(point.wall_time, "step", point.step)
        for file in _nemo_event_files(path)
        for point in _nemo_timing(file)
    ]


def timed_records(path: Path) -> list[TimedLine] | None:
    """A Megatron-LM or TorchTitan log as the step and checkpoint records of a run campaign did not launch
    (`t` in Unix seconds from each line's own timestamp, `kind`, `step`, `tokens`), for `campaign analyse
    --metrics`; None for JSON lines, which that reader reads itself. DataError for a log without timestamps.
    NeMo's TensorBoard event files (a file or their folder) carry each step's time in the event."""
    if is_event_path(path):
        return nemo_tensorboard_records(path)
    lines = _lines(path)
    kind = detect_format(path, lines)
    if kind == "jsonl":
        return None
    if kind not in ("megatron", "torchtitan"):
        raise DataError(
            f"a {kind} log has no wall-clock time per step, which analysing a run needs",
            where=str(path),
            fix="give the run's Megatron-LM or TorchTitan log, NeMo's TensorBoard event files, or JSON-lines metrics "
            "with a time per step",
        )
    tokens = None
    if kind == "megatron":
        log = read_megatron(path, lines)
        tokens = log.batch_sequences * log.seq_len if log.batch_sequences and log.seq_len else None
    rows: list[TimedLine] = []
    for number, line in enumerate(lines, start=1):
        text = ANSI.sub("", line)
        if kind == "megatron":
            stamp = MEGATRON_STAMP.search(text)
            step = MEGATRON_ITERATION.search(text)
            saved = MEGATRON_SAVED.search(text)
            if step and "elapsed time per iteration (ms)" in text:
                kind_step: tuple[str, int, int | None] = ("step", int(step.group(1)), tokens)
            elif saved:
                kind_step = ("checkpoint", int(saved.group(1)), None)
            else:
                continue
            when = stamp.group(1) if stamp else None
        else:
            found = TITAN_STEP.search(text)
            if not found or not TITAN_TPS.search(text):
                continue
            titan = TITAN_STAMP.search(text)
            kind_step = ("step", int(found.group(1)), None)
            when = f"{titan.group(1)}.{titan.group(2)}" if titan else None
        if when is None:
            raise DataError(
                f"line {number} has no timestamp: analysing a run needs each step's wall-clock time",
                where=f"{path}:{number}",
                fix="give a log whose lines carry their time (Megatron-LM prints it since 2024; TorchTitan always)",
            )
        stamp_utc = pd.Timestamp(when, tz="UTC")
        rows.append(TimedLine(stamp_utc.timestamp(), *kind_step))
    return rows

"""NeMo's TensorBoard scalars written by a real writer, as Lightning's TensorBoardLogger writes them.

What NeMo logs each training step, with `self.log` (Lightning then writes each key with `add_scalar(key, value,
step)`, lightning/fabric/loggers/tensorboard.py `TensorBoardLogger.log_metrics`):
- `train_step_timing in s`: nemo/utils/exp_manager.py `TimingCallback._on_batch_end` logs `name + ' in s'`;
- `reduced_train_loss`, `lr`, `global_step`, `consumed_samples`:
  nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py `training_step` (NeMo 2:
  nemo/lightning/pytorch/strategies/megatron_strategy.py `training_step` logs `global_step`, `step` and
  `reduced_train_loss`; nemo/lightning/pytorch/plugins/data_sampler.py logs `consumed_samples`);
- `epoch`: Lightning adds it when no `step` is logged.
The writer is torch's SummaryWriter when the tensorboard package is installed, else tensorboardX's
(TensorBoardLogger.experiment). torch's writes `Summary.Value(tag=name, simple_value=v)` through TensorBoard's
own `EventFileWriter` (torch/utils/tensorboard/summary.py `scalar`, writer.py `FileWriter`): "torch" below does that
without torch. tensorboardX's cleans the tag first (tensorboardX/summary.py `_clean_tag`: spaces become '_').
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

TIMING = "train_step_timing in s"
T0 = 1_772_352_000.0  # 2026-03-01T08:00:00Z


def write_nemo_events(
    folder: Path,
    times: Sequence[float],
    *,
    first_step: int = 1,
    batch: int = 512,
    nan_steps: Sequence[int] = (),
    writer: str = "tensorboardX",
    start: float = T0,
    suffix: str = "",
) -> Path:
    """One writer's life (one process of the run): step `first_step + i` took `times[i]` seconds and ended at
    `start + sum(times[: i + 1])`; the loss at `nan_steps` is NaN. Returns the event file."""
    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.iterdir())
    add = _tensorboardx(folder, suffix) if writer == "tensorboardX" else _torch_path(folder, suffix)
    clock = start
    for i, seconds in enumerate(times):
        step = first_step + i
        clock += seconds
        metrics = {
            "reduced_train_loss": math.nan if step in nan_steps else 2.5 - 0.001 * step,
            "lr": 3e-4,
            "global_step": float(step - 1),
            "consumed_samples": float(step * batch),
            TIMING: float(seconds),
            "epoch": 0.0,
        }
        for key, value in metrics.items():
            add(key, value, step, clock)
    add.close()
    (written,) = set(folder.iterdir()) - before
    return written


class _tensorboardx:
    def __init__(self, folder: Path, suffix: str) -> None:
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(str(folder), filename_suffix=suffix)

    def __call__(self, tag: str, value: float, step: int, wall: float) -> None:
        self.writer.add_scalar(tag, value, step, walltime=wall)

    def close(self) -> None:
        self.writer.close()


class _torch_path:
    """torch.utils.tensorboard's SummaryWriter.add_scalar, old style (its default), without torch."""

    def __init__(self, folder: Path, suffix: str) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.writer = EventFileWriter(str(folder), filename_suffix=suffix)

    def __call__(self, tag: str, value: float, step: int, wall: float) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        self.writer.add_event(Event(summary=summary, wall_time=wall, step=step))

    def close(self) -> None:
        self.writer.close()

"""The rehearsal's progress for the terminal: a line every N steps with the loss, read from the trainer's metrics
files as they grow, so a validate that trains for minutes is not silent. It follows the files only (the trainer
contract's JSON lines, docs/rehearsal.md); the harness is unchanged and the verdict never reads these lines."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

METRICS_NAME = "metrics.jsonl"
LINES_PER_RUN = 10  # about this many progress lines for each start of the trainer


@dataclass
class ProgressFollower:
    """Call `poll()` now and then: the progress lines of what the metrics files under `root` gained since the last
    call. A file last written before the follower started (an earlier validate's) is not news until it is
    written again, and then it is read from its start (the harness writes each run's file anew)."""

    root: Path
    steps: int
    every: int = 0  # a line every `every` steps; 0: steps / LINES_PER_RUN
    _seen: dict[Path, int] = field(default_factory=dict)  # path -> bytes read
    _since_ns: int = 0

    def __post_init__(self) -> None:
        self.every = self.every or max(1, self.steps // LINES_PER_RUN)
        # File times come from a coarse kernel clock, a few ms behind time.time_ns(): a small margin.
        self._since_ns = time.time_ns() - 50_000_000

    def _files(self) -> list[Path]:
        return sorted(self.root.glob(f"**/{METRICS_NAME}")) if self.root.is_dir() else []

    def poll(self) -> list[str]:
        out: list[str] = []
        for path in self._files():
            try:
                stat = path.stat()
                if path not in self._seen and stat.st_mtime_ns < self._since_ns:
                    continue
                offset = self._seen.get(path, 0)
                if stat.st_size < offset:  # rewritten: from its start
                    offset = 0
                with path.open("rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except OSError:
                continue
            end = chunk.rfind(b"\n") + 1  # whole lines only; a line being written waits for the next poll
            self._seen[path] = offset + end
            out += self.lines(path.parent.name, chunk[:end].decode("utf-8", errors="replace").splitlines())
        return out

    def lines(self, run: str, raw_lines: list[str]) -> list[str]:
        """The progress lines of one run's new metrics lines: a loss every `every` steps and at the last step,
        and every resume."""
        out = []
        for raw in raw_lines:
            try:
                record = json.loads(raw)
            except ValueError:
                continue  # the harness reports malformed lines; progress skips them
            if not isinstance(record, dict):
                continue
            step, loss = record.get("step"), record.get("loss")
            if record.get("event") == "resumed" and isinstance(step, int):
                out.append(f"rehearsal {run}: resumed from the checkpoint of step {step}")
            elif (
                isinstance(step, int)
                and isinstance(loss, int | float)
                and not isinstance(loss, bool)
                and (step % self.every == 0 or step == self.steps)
            ):
                shown = f"{loss:.3f}" if math.isfinite(loss) else str(loss)
                out.append(f"rehearsal {run}: step {step}/{self.steps}, loss {shown}")
        return out

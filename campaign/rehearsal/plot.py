"""The rehearsal's loss-curve plot: training and held-out loss, the kill and the restore marked."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def plot_loss_curve(curves: dict[str, Any], details: dict[str, Any]) -> bytes:
    """PNG of the uninterrupted run's losses, the faulted run's after its restore, and the kill/restore steps."""
    fig, ax = plt.subplots(figsize=(9, 3.4))
    ref = curves.get("reference") or {}
    if ref.get("loss"):
        steps, values = zip(*ref["loss"], strict=True)
        ax.plot(steps, values, lw=0.9, color="tab:blue", label="training loss (uninterrupted)")
    if ref.get("heldout"):
        steps, values = zip(*ref["heldout"], strict=True)
        ax.plot(steps, values, "o-", ms=3, lw=0.9, color="tab:orange", label="held-out loss")
    fault = curves.get("faulted") or {}
    resumed = fault.get("resumed_step")
    after = [(s, v) for s, v in fault.get("loss", []) if resumed is not None and s > resumed]
    if after:
        steps, values = zip(*after, strict=True)
        ax.plot(steps, values, ".", ms=2.5, color="tab:green", label="training loss after the restore")
    if details.get("kill_step") is not None:
        ax.axvline(
            details.get("killed_at_step", details["kill_step"]),
            color="tab:red",
            lw=1,
            label=f"SIGKILL (step {details.get('killed_at_step', details['kill_step'])})",
        )
    if resumed is not None:
        ax.axvline(
            resumed, color="tab:green", lw=1, ls="--", label=f"restored from checkpoint (step {resumed})"
        )
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats)")
    verdict = "passed" if details.get("passed") else "failed"
    ax.set_title(f"Rehearsal ({verdict}): {details.get('restore_check', '')}", fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right", fontsize=7)
    else:
        ax.text(0.5, 0.5, "the trainer reported no steps", ha="center", va="center", transform=ax.transAxes)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()

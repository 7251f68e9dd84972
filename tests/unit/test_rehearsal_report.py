"""The rehearsal's loss-curve plot, alone and in the window report."""

from campaign.rehearsal.plot import plot_loss_curve

CURVES = {
    "reference": {
        "loss": [(s, 8 - s / 30) for s in range(1, 151)],
        "heldout": [(s, 8.2 - s / 40) for s in range(0, 151, 15)],
        "checkpoints": [30, 60, 90],
    },
    "faulted": {
        "loss": [(s, 8 - s / 30) for s in list(range(1, 98)) + list(range(91, 151))],
        "heldout": [],
        "killed_at_step": 97,
        "resumed_step": 90,
    },
}
DETAILS = {
    "passed": True,
    "loss_first_tenth": 7.7,
    "loss_last_tenth": 3.2,
    "loss_drop": 4.5,
    "heldout_first": 8.2,
    "heldout_last": 4.4,
    "kill_step": 97,
    "killed_at_step": 97,
    "resumed_step": 90,
    "restore_check": "bit-identical over 60 steps after the restore",
}


def test_the_plot_is_a_png():
    assert plot_loss_curve(CURVES, DETAILS).startswith(b"\x89PNG")
    assert plot_loss_curve({}, {"passed": False}).startswith(b"\x89PNG")  # a rehearsal that never trained


def test_the_report_carries_the_rehearsal():
    from campaign.analysis.report import rehearsal_section

    section = rehearsal_section({"details": DETAILS, "curves": CURVES, "timings": {"tokens_per_s": 5000.0}})
    assert "killed at step 97, resumed at 90: bit-identical" in section.line
    assert "5,000 tokens/s" in section.line or "5000 tokens/s" in section.line
    assert section.image.startswith("data:image/png;base64,")
    failed = rehearsal_section(
        {"details": {"passed": False, "problems": ["training loss is nan at step 3"]}, "curves": {}}
    )
    assert failed.line == "failed: training loss is nan at step 3"
    assert rehearsal_section(None) is None

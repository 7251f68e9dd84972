"""The rehearsal's loss-curve plot, alone and in the window report."""

import pandas as pd

from campaign.analysis.report import write_report
from campaign.rehearsal.plot import plot_loss_curve

CURVES = {"reference": {"loss": [(s, 8 - s / 30) for s in range(1, 151)],
                        "heldout": [(s, 8.2 - s / 40) for s in range(0, 151, 15)], "checkpoints": [30, 60, 90]},
          "faulted": {"loss": [(s, 8 - s / 30) for s in list(range(1, 98)) + list(range(91, 151))],
                      "heldout": [], "killed_at_step": 97, "resumed_step": 90}}
DETAILS = {"passed": True, "loss_first_tenth": 7.7, "loss_last_tenth": 3.2, "loss_drop": 4.5, "heldout_first": 8.2,
           "heldout_last": 4.4, "kill_step": 97, "killed_at_step": 97, "resumed_step": 90,
           "restore_check": "bit-identical over 60 steps after the restore"}


def test_the_plot_is_a_png():
    assert plot_loss_curve(CURVES, DETAILS).startswith(b"\x89PNG")
    assert plot_loss_curve({}, {"passed": False}).startswith(b"\x89PNG")  # a rehearsal that never trained


def test_the_report_carries_the_rehearsal(tmp_path):
    result = {"commitment_id": "c1", "window": {"start": "a", "end": "b", "hours": 48.0}, "config_digest": "x" * 64,
              "data_digest": "y" * 64, "seed": 1, "ettr": 0.9, "ettr_definition": "d", "tokens_trained": 1.0,
              "tokens_target": 2.0, "completed": False, "interruptions": {"unexpected": 1, "planned": 0,
                                                                          "by_category": {"gpu": 1}},
              "observed_job_mtbf_h": None, "checkpoint_interval_s": {"used": 100.0},
              "goodput_breakdown_gpu_h": {"productive": 1.0, "idle": 1.0},
              "power_mw": {"peak": 1.0, "mean": 1.0, "min": 1.0, "max_ramp_mw_per_s": 0.1}, "energy_mwh": 1.0,
              "cost_usd": {"compute": 1.0}}
    frame = pd.DataFrame({"day": [0.0, 1.0], "power_mw": [1.0, 1.0], "tokens_trained": [0.0, 1.0]})
    report = write_report(tmp_path, result, frame, frame, {"details": DETAILS, "curves": CURVES,
                                                             "timings": {"tokens_per_s": 5000.0}})
    text = report.read_text()
    assert "## Rehearsal" in text and "killed at step 97, resumed at 90: bit-identical" in text
    assert "5,000 tokens/s" in text
    assert (tmp_path / "rehearsal.png").read_bytes().startswith(b"\x89PNG")
    failed = write_report(tmp_path, result, frame, frame,
                          {"details": {"passed": False, "problems": ["training loss is nan at step 3"]}, "curves": {}})
    assert "* Failed: training loss is nan at step 3" in failed.read_text()

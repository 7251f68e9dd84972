"""A run campaign did not launch, read from its metrics file and incident log into the window report's keys."""

import json

import pytest

from campaign import goodput
from campaign.errors import DataError
from campaign.execution.external import external_report_inputs, journal_from_metrics, read_timed_metrics

T0 = 1_800_000_000.0


def _metrics(tmp_path):
    """Steps 1-8 a second apart with a checkpoint at 5; killed after 8; resumed at 5 at 12 s, steps 6-10."""
    lines = [{"step": k, "loss": 3.0 - k / 10, "tokens": 256, "time": T0 + k} for k in range(1, 9)]
    lines.insert(5, {"event": "checkpoint", "step": 5, "time": T0 + 5.2})
    lines.append({"step": 8, "heldout_loss": 2.5})  # evaluations need no time
    lines.append({"event": "resumed", "step": 5, "time": T0 + 12})
    lines += [{"step": k, "loss": 3.0 - k / 10, "tokens": 256, "time": T0 + 7 + k} for k in range(6, 11)]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_a_restart_in_the_metrics_is_a_failure_classified_by_the_incident_log(tmp_path):
    (tmp_path / "incidents.csv").write_text(
        "time,job_id,category,node\n2027-01-15T08:00:09Z,j1,gpu_xid,n7\n2027-01-15T09:00:00Z,j2,software_bug,n1\n"
    )
    inputs = external_report_inputs(_metrics(tmp_path), tmp_path / "incidents.csv", gpu_hour_usd=2.0)
    r = inputs.result.to_json()  # the analysis.json of a run campaign did not launch
    assert r["title"] == "Measured run report" and not r["simulated"]
    assert r["interruptions"]["by_category"] == {"gpu_xid": 1} and r["interruptions"]["organic"] == 1
    assert goodput.buckets_sum_gpu_h(r["goodput_breakdown_gpu_h"]) == pytest.approx(r["window_gpu_h"])
    assert r["window_gpu_h"] == pytest.approx(16.0 / 3600)  # the run's first line to its last, one slot
    m = r["measured"]
    assert m["final_step"] == 10 and m["steps_trained_again"] == m["rework_steps_expected"] == 3
    assert r["tokens_trained"] == 10 * 256
    for key in ("ettr", "observed_job_mtbf_h", "checkpoint_interval_s", "power_mw", "energy_mwh", "cost_usd"):
        assert key in r


def test_without_an_incident_log_a_restart_is_unclassified(tmp_path):
    journal, final, tokens = journal_from_metrics(read_timed_metrics(_metrics(tmp_path)), None)
    assert (
        [f.category for f in journal.kinds("failure")] == ["unclassified"] and final == 10 and tokens == 256
    )


def test_a_step_line_without_a_time_is_named_with_its_line(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "loss": 2.0, "time": 1.0}\n{"step": 2, "loss": 1.9}\n')
    with pytest.raises(DataError, match=r"m\.jsonl:2: no 'time'") as err:
        read_timed_metrics(path)
    assert "unix_seconds" in (err.value.fix or "")

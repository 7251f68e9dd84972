"""NeMo's TensorBoard event files as a measurement (`campaign plan measure`) and as a measured run (`campaign analyse
--metrics`): each file written by a real writer with NeMo's own scalar tags (tests/helpers/nemo_events.py cites the
NeMo and Lightning code that logs them) and read with TensorBoard's EventAccumulator."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from campaign.errors import DataError
from campaign.plan.measure import parse_layout, read_step_times
from campaign.plan.measured_entry import measured_entry
from campaign.plan.tensorboard_events import is_event_path
from campaign.plan.trainer_logs import read_trainer_log
from campaign_cli.cli import main
from tests.helpers.nemo_events import write_nemo_events

LAYOUT = "tp=4,pp=2,dp=8"


def known_times(n: int, seed: int = 5) -> np.ndarray:
    """Warm-up (compilation, allocator growth) then steady steps near 4 s."""
    steady = 4.0 + np.random.default_rng(seed).normal(0, 0.05, n)
    steady[:3] = [21.0, 9.5, 6.2]
    return steady


def stored(times: np.ndarray) -> np.ndarray:
    """A scalar event keeps a float32 (simple_value)."""
    return times.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("writer", ["tensorboardX", "torch"])
def test_the_median_step_time_and_tokens_per_step_come_from_nemos_scalars(
    tmp_path: Path, writer: str
) -> None:
    times = known_times(100)
    write_nemo_events(tmp_path / "version_0", times, batch=512, writer=writer)
    got = measured_entry(tmp_path / "version_0", nodes=8, layout=parse_layout(LAYOUT), seq_len=4096)
    assert got.format == "nemo-tensorboard"
    assert got.global_batch_tokens == 512 * 4096 and "consumed_samples" in got.tokens_source
    assert got.result.skipped == 10 and got.result.n_steps == 90
    assert got.result.median_s == pytest.approx(float(np.median(stored(times)[10:])), abs=1e-9)
    # The file itself reads the same as its folder.
    (events,) = (tmp_path / "version_0").iterdir()
    assert read_step_times(events).seconds == read_step_times(tmp_path / "version_0").seconds


def test_a_restart_is_named_and_its_warm_up_dropped_again_and_analyse_counts_it(tmp_path: Path) -> None:
    """The run died after step 60 and resumed from the checkpoint at step 40: a second process, a second file."""
    from campaign.execution.external import external_report_inputs

    folder = tmp_path / "version_0"
    first, second = known_times(60, seed=1), known_times(60, seed=2)
    write_nemo_events(folder, first, batch=8, suffix=".1")
    resumed_at = 1_772_352_000.0 + float(first.sum()) + 300.0  # five minutes to requeue and load
    restart = write_nemo_events(folder, second, first_step=41, batch=8, start=resumed_at, suffix=".2")
    times = read_step_times(folder)
    assert times.skipped == 6 + 6
    (note,) = [n for n in times.notes if "went back" in n]
    assert note.startswith(f"{restart} (step 41): the step went back from 60 to 41")
    kept = np.concatenate([stored(first)[6:], stored(second)[6:]])
    assert times.seconds == pytest.approx(tuple(kept), abs=1e-9)
    report = external_report_inputs(folder, None, gpu_hour_usd=2.0).result.to_json()
    assert report["measured"]["final_step"] == 100 and report["measured"]["steps_trained_again"] == 20
    assert report["interruptions"]["by_category"] == {"unclassified": 1}


def test_steps_with_a_nan_loss_are_left_out_and_named(tmp_path: Path) -> None:
    times = known_times(60)
    times[30] = times[31] = 40.0  # what they took is no step time of the run
    write_nemo_events(tmp_path / "run", times, nan_steps=(31, 32))
    got = read_step_times(tmp_path / "run")
    assert len(got.seconds) == 60 - 6 - 2 and 31 not in got.steps and 32 not in got.steps
    named = [n for n in got.notes if "NaN loss" in n]
    assert len(named) == 2 and "(step 31): left out the 1 iteration to 31, which had a NaN loss" in named[0]
    assert max(got.seconds) < 5.0


def test_an_empty_garbled_or_foreign_file_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "events.out.tfevents.1772352000.node01"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match="the event file is empty") as err:
        read_step_times(empty)
    assert err.value.where == str(empty)
    garbled = tmp_path / "garbled" / "events.out.tfevents.1772352000.node01"
    garbled.parent.mkdir()
    garbled.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(DataError, match="first record's header does not check out") as err:
        read_step_times(garbled.parent)
    assert err.value.where == str(garbled)
    # A TensorBoard log without NeMo's timing names the scalars it has.
    other = tmp_path / "other"
    other.mkdir()
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(other)) as writer:
        writer.add_scalar("loss", 1.0, 1)
    with pytest.raises(DataError, match=r"no 'train_step_timing in s' scalar .* the scalars are loss"):
        read_step_times(other)
    outer = tmp_path / "exp"
    outer.mkdir()
    os.replace(other, outer / "version_0")
    with pytest.raises(
        DataError, match=r"holds no events.out.tfevents.\* file \(there are some in .*version_0\)"
    ):
        read_step_times(outer)
    assert main(["plan", "measure", str(garbled), "--nodes", "8"]) == 2
    assert str(garbled) in capsys.readouterr().err


def test_a_file_cut_mid_record_is_read_up_to_the_cut_and_the_cut_named(tmp_path: Path) -> None:
    events = write_nemo_events(tmp_path / "run", known_times(50))
    data = events.read_bytes()
    events.write_bytes(data[:-7])  # the writer killed in its last record
    got = read_step_times(tmp_path / "run")
    assert got.steps[-1] == 50 and any("is cut short" in n for n in got.notes)


def test_detected_by_its_first_record_and_read_only_under_its_writers_name(tmp_path: Path) -> None:
    events = write_nemo_events(tmp_path / "run", known_times(20))
    renamed = tmp_path / "metrics.bin"
    os.replace(events, renamed)
    text = tmp_path / "notes.txt"
    text.write_text("brain.Event:2 is not a record\n")
    assert is_event_path(renamed) and not is_event_path(text) and not is_event_path(tmp_path / "absent")
    with pytest.raises(DataError, match=r"reads only files named events\.out\.tfevents"):
        read_step_times(renamed)
    with pytest.raises(DataError, match="does not exist"):
        read_trainer_log(tmp_path / "absent", "nemo-tensorboard")


def test_without_tensorboard_the_error_names_the_file_and_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = write_nemo_events(tmp_path / "run", known_times(20))
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing", None)
    with pytest.raises(DataError, match="tensorboard package") as err:
        read_step_times(events)
    assert err.value.where == str(events) and "pip install" in err.value.fix


def test_the_command_reads_the_folder_and_says_it_read_nemos_tensorboard_scalars(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_nemo_events(tmp_path / "version_0", known_times(100), batch=512)
    args = [
        "plan",
        "measure",
        str(tmp_path / "version_0"),
        "--nodes",
        "8",
        "--layout",
        LAYOUT,
        "--seq-len",
        "4096",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"read {tmp_path / 'version_0'} as nemo-tensorboard" in out
    assert f"global_batch_tokens: {512 * 4096}" in out
    assert main([*args, "--format", "nemo-tensorboard", "--json"]) == 0

"""`campaign plan measure`: a short run's metrics file to a plan.measured entry, warm-up dropped, regimes named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from campaign.config import load_config
from campaign.errors import DataError
from campaign.plan.measure import measure, parse_layout, read_step_times, stationarity_problems
from tests.helpers.paths import DEMO


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _steady(n: int = 100, seed: int = 0) -> np.ndarray:
    return 5.0 + np.random.default_rng(seed).normal(0, 0.03, n)


def test_step_times_from_step_time_s_drop_the_warm_up(tmp_path: Path) -> None:
    times = [30.0, 12.0] + [5.0] * 50
    path = _write(
        tmp_path / "m.jsonl", [{"step": i + 1, "loss": 1.0, "step_time_s": t} for i, t in enumerate(times)]
    )
    got = read_step_times(path, skip_steps=2)
    assert got.seconds == (5.0,) * 50 and got.steps[0] == 3 and got.skipped == 2
    assert read_step_times(path).skipped == 5  # 10 % by default


def test_step_times_from_wall_clock_timestamps(tmp_path: Path) -> None:
    records = [{"step": 1, "loss": 1.0, "time_s": 100.0}, {"event": "checkpoint", "step": 1}]
    records += [{"step": k, "loss": 1.0, "time_s": 100.0 + 20.0 + 4.0 * (k - 2)} for k in range(2, 40)]
    records += [{"step": 41, "loss": 1.0, "time_s": 100.0 + 20.0 + 4.0 * 37 + 8.0}]  # step 40 not logged
    got = read_step_times(_write(tmp_path / "m.jsonl", records), skip_steps=1)
    assert set(got.seconds) == {4.0}
    assert got.steps[-1] == 41


def test_a_cut_off_last_line_is_ignored_and_a_bad_line_named(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(
        "".join(json.dumps({"step": k, "step_time_s": 5.0}) + "\n" for k in range(1, 20)) + '{"step": 2'
    )
    assert len(read_step_times(path, 1).seconds) == 18
    path.write_text('{"step": 1, "step_time_s": 5.0}\nnot json\n')
    with pytest.raises(DataError, match=r"m\.jsonl:2"):
        read_step_times(path)


def test_a_file_without_step_times_says_what_to_log(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.jsonl", [{"step": k, "loss": 1.0} for k in range(1, 20)])
    with pytest.raises(DataError, match="no per-step step_time_s") as err:
        read_step_times(path)
    assert "step_time_s" in str(err.value.fix)


def test_too_few_steps_after_warm_up(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.jsonl", [{"step": k, "step_time_s": 5.0} for k in range(1, 6)])
    with pytest.raises(DataError, match="at least 5"):
        read_step_times(path, skip_steps=2)


def test_a_steady_series_is_stationary() -> None:
    assert stationarity_problems(_steady()) == []


def test_a_drifting_series_is_named() -> None:
    drifting = _steady() * np.linspace(1.0, 1.15, 100)
    (problem,) = stationarity_problems(drifting)
    assert problem.startswith("drifting")


def test_a_bimodal_series_is_named() -> None:
    bimodal = _steady()
    bimodal[::4] *= 1.3
    problems = stationarity_problems(bimodal)
    assert any(p.startswith(("bimodal: 25 steps", "bimodal: 75 steps")) for p in problems)
    assert (
        stationarity_problems(np.concatenate([_steady(98), [9.0, 9.5]])) == []
    )  # two outliers are not a mode


def test_the_entry_pastes_into_the_config_and_calibrates_it(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "m.jsonl", [{"step": k, "step_time_s": float(t)} for k, t in enumerate(_steady(), 1)]
    )
    result = measure(read_step_times(path))
    assert result.median_s == pytest.approx(5.0, abs=0.02) and 0 < result.spread < 0.05
    text = result.entry_yaml(2, parse_layout("tp=2,dp=8"), 2097152, "m.jsonl", ", model: demo-2b")
    entry = yaml.safe_load(text)["measured"]
    config = load_config(DEMO, [f"plan.measured={json.dumps(entry)}"]).config
    assert config.plan.measured[0].step_time_s == pytest.approx(result.median_s, rel=1e-3)


def test_layout_text() -> None:
    assert parse_layout("tp=8,pp=4,dp=16") == {"tp": 8, "pp": 4, "dp": 16, "cp": 1, "vpp": 1}
    with pytest.raises(DataError, match="'ep=2'"):
        parse_layout("tp=8,ep=2")

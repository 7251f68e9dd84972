"""`campaign analyse --compare` on simulate files: what it reads from a user's file, where it writes, and what it
highlights. No workspace and no Prefect: the window side is in test_analysis_report.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from campaign.analysis.compare import (
    COMPARE_MARKER,
    compare_out_dir,
    load_run,
    render_compare,
    write_compare,
)
from campaign.errors import ConfigError, DataError


def simulate_json(ettr: float = 0.9, days: float = 1.5, p: float = 0.9) -> dict[str, Any]:
    spread = {"mean": ettr, "p10": ettr - 0.02, "p50": ettr, "p90": ettr + 0.01}
    return {
        "replicas": 8,
        "seed": 1,
        "wall_s": 0.1,
        "summary": {
            "ettr": spread,
            "completion_days": {"mean": days, "p10": days - 0.1, "p50": days, "p90": days + 0.2},
            "interruptions_unexpected": {"mean": 4, "p10": 2, "p50": 4, "p90": 6},
            "p_complete_in_window": p,
            "tokens_trained": spread,
            "power_mw": {"peak": 1},
            "energy_mwh": 5,
        },
    }


def _write(path: Path, obj: Any) -> str:
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


@pytest.mark.parametrize(
    ("field", "text", "said"),
    [
        ("summary.completion_days.p50", "Infinity", "not a finite number"),
        ("summary.completion_days.mean", "NaN", "not a finite number"),
        ("summary.ettr.p50", "1e400", "not a finite number"),
        ("summary.ettr.p50", "-Infinity", "not a finite number"),
        ("summary.energy_mwh", '"5 MWh"', "not a number"),
        ("summary.p_complete_in_window", "1.5", "must be from 0 to 1"),
        ("summary.interruptions_unexpected.mean", "-3", "must be at least 0"),
        ("summary.completion_days", "[1, 2]", "not a mapping"),
        ("replicas", "true", "not a number"),
    ],
)
def test_a_tampered_simulate_file_is_refused_naming_the_file_and_the_field(tmp_path, field, text, said):
    good = _write(tmp_path / "a.json", simulate_json())
    obj = simulate_json()
    node = obj
    *parents, last = field.split(".")
    for part in parents:
        node = node[part]
    node[last] = "@@VALUE@@"
    bad = _write(tmp_path / "b.json", json.dumps(obj).replace('"@@VALUE@@"', text))
    with pytest.raises(DataError, match=said) as err:
        render_compare([load_run(good), load_run(bad)])
    assert err.value.exit_code == 2 and err.value.where == bad
    assert field.rsplit(".", 1)[0] in err.value.message


def test_replica_values_that_are_not_finite_are_refused(tmp_path):
    good = _write(tmp_path / "a.json", simulate_json())
    obj = {**simulate_json(), "replica_values": {"completion_days": [1.0, "NaN-ish"], "ettr": [0.9, 0.9]}}
    bad = _write(tmp_path / "b.json", obj)
    with pytest.raises(DataError, match=r"replica_values.completion_days\[1\]"):
        load_run(bad)
    nan = _write(
        tmp_path / "c.json",
        json.dumps(simulate_json()).replace("}}", '}, "replica_values": {"ettr": [NaN]}}'),
    )
    with pytest.raises(DataError, match=r"replica_values.ettr\[0\]"):
        render_compare([load_run(good), load_run(nan)])


@pytest.mark.parametrize(
    "text",
    ["[" * 200_000, '{"replicas": 1, "summary": {}, "x": ' + "9" * 5000 + "}", "\xff\xfe", ""],
)
def test_an_unreadable_simulate_file_is_bad_input(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(DataError) as err:
        load_run(str(path))
    assert err.value.exit_code == 2 and err.value.where == str(path)


def test_a_fifo_given_as_a_simulate_file_answers_at_once(tmp_path):
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="FIFO"):
        load_run(str(fifo))


def test_only_a_real_difference_is_highlighted_and_shown_with_the_digits_to_see_it(tmp_path):
    a = _write(tmp_path / "a.json", simulate_json(days=3.6))
    b = _write(tmp_path / "b.json", simulate_json(days=3.6 + 1e-12))  # float noise: equal
    c = _write(tmp_path / "c.json", simulate_json(days=3.604))  # a difference the usual 2 decimals hide
    table = render_compare([load_run(a), load_run(b), load_run(c)]).to_json()["metrics"]
    days = next(row for row in table if row["key"] == "summary.completion_days.p50")
    assert days["differs"] == [False, False, True]
    assert days["digits"] == 3  # 3.600 and 3.604: the highlighted figure reads differently from the first
    ettr = next(row for row in table if row["key"] == "summary.ettr.p50")
    assert ettr["differs"] == [False, False, False] and ettr["digits"] == 3


def test_a_small_difference_is_highlighted(tmp_path):
    """A difference under 1% is still a difference: highlighted, and readable."""
    a = _write(tmp_path / "a.json", simulate_json(ettr=0.950))
    b = _write(tmp_path / "b.json", simulate_json(ettr=0.951))
    comparison = render_compare([load_run(a), load_run(b)])
    assert "ETTR (p50 of replicas)" in comparison.to_json()["differences"]
    assert "0.951" in comparison.markdown and "**0.951**" in comparison.markdown


def test_compare_writes_only_into_a_folder_it_owns(tmp_path):
    a = _write(tmp_path / "a.json", simulate_json())
    b = _write(tmp_path / "b.json", simulate_json(ettr=0.8))
    comparison = render_compare([load_run(a), load_run(b)])
    users = tmp_path / "mine"
    users.mkdir()
    (users / "compare.html").write_text("my own page")
    with pytest.raises(ConfigError, match="not empty") as err:
        write_compare(users, comparison)
    assert err.value.where == "--out" and err.value.exit_code == 2
    assert (users / "compare.html").read_text() == "my own page"
    assert sorted(p.name for p in users.iterdir()) == ["compare.html"]
    fresh = tmp_path / "new" / "cmp"
    html, _ = write_compare(fresh, comparison)
    assert html.is_file() and (fresh / COMPARE_MARKER).is_file()
    write_compare(fresh, comparison)  # campaign's own folder: written again
    empty = tmp_path / "empty"
    empty.mkdir()
    write_compare(empty, comparison)
    assert (empty / COMPARE_MARKER).is_file()
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        compare_out_dir(a_file)


def test_a_relative_out_folder_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = _write(tmp_path / "a.json", simulate_json())
    b = _write(tmp_path / "b.json", simulate_json(ettr=0.8))
    out = compare_out_dir("compare")
    assert out == tmp_path / "compare" and out.is_absolute()
    html, path_json = write_compare(Path("compare"), render_compare([load_run(a), load_run(b)]))
    assert html.is_absolute() and html.as_uri().startswith("file:///")
    assert path_json == tmp_path / "compare" / "compare.json"


def test_the_window_row_reads_p_target_in_window_as_every_other_output(tmp_path):
    # A snapshot window never completes (P(finish) 0) but reaches its target: the row is P(target reached), the
    # figure simulate, its report, the sweep and the schedule gate read; a file written before it existed falls
    # back to P(finish), the same figure for a window that stops at its target.
    snapshot = simulate_json(p=0.0)
    snapshot["summary"] |= {
        "p_target_in_window": 1.0,
        "target_days": {"mean": 1.2, "p10": 1.1, "p50": 1.2, "p90": 1.3},
    }
    older = simulate_json(p=0.75)
    runs = [load_run(_write(tmp_path / "a.json", snapshot)), load_run(_write(tmp_path / "b.json", older))]
    rows = {row["key"]: row for row in render_compare(runs).to_json()["metrics"]}
    assert "summary.p_complete_in_window" not in rows
    assert rows["summary.p_target_in_window"]["values"] == [1.0, 0.75]
    assert rows["summary.p_target_in_window"]["label"] == "P(target reached inside the window)"
    assert rows["summary.target_days.p90"]["values"] == [1.3, None]

"""The reference trainer's pieces: contract parsing, data order, atomic checkpoints, the verdict's arithmetic."""

import json
import math

import numpy as np
import pytest

from campaign.rehearsal import contract as c
from campaign.rehearsal.contract import (
    Metrics,
    MetricsError,
    MetricsLine,
    parse_metrics_line,
    parse_metrics_record,
    read_metrics,
)
from campaign.rehearsal.harness import control_order, training_order
from campaign.rehearsal.processes import drop_partial_line
from campaign.rehearsal.trainer import (
    UsageError,
    batch_rows,
    complete_checkpoints,
    load_latest_checkpoint,
    remove_partial_checkpoints,
    save_checkpoint,
    settings_from_env,
)
from campaign.rehearsal.verdict import compare_curves, first_divergence, tenth_means


def env(tmp_path, **extra):
    base = {
        c.ENV_TRAIN: str(tmp_path / "t.npy"),
        c.ENV_HELDOUT: str(tmp_path / "h.npy"),
        c.ENV_VOCAB: "50",
        c.ENV_STEPS: "20",
        c.ENV_SEED: "1",
        c.ENV_CHECKPOINT_EVERY: "5",
        c.ENV_CHECKPOINT_DIR: str(tmp_path / "ck"),
        c.ENV_METRICS: str(tmp_path / "m.jsonl"),
        c.ENV_BATCH_SEQUENCES: "8",
    }
    return {**base, **extra}


def test_settings_come_from_the_contracts_variables(tmp_path):
    s = settings_from_env(env(tmp_path, **{c.ENV_LEARNING_RATE: "0.01", c.ENV_BATCH_SEQUENCES: "4"}))
    assert (s.vocab, s.steps, s.checkpoint_every, s.learning_rate, s.batch_sequences) == (50, 20, 5, 0.01, 4)
    with pytest.raises(UsageError, match="CAMPAIGN_REHEARSAL_METRICS"):
        settings_from_env({k: v for k, v in env(tmp_path).items() if k != c.ENV_METRICS})
    with pytest.raises(UsageError, match="is not an integer"):
        settings_from_env(env(tmp_path, **{c.ENV_STEPS: "many"}))


def test_rows_are_trained_in_the_harness_order_a_seeded_permutation_per_epoch():
    order = training_order(10, 5, 4, seed=3)  # 20 positions over 10 rows: two epochs
    assert np.array_equal(order, training_order(10, 5, 4, seed=3))
    assert sorted(order[:10].tolist()) == list(range(10)) and sorted(order[10:].tolist()) == list(range(10))
    assert not np.array_equal(training_order(10, 5, 4, seed=4), order)
    assert batch_rows(1, 4) == slice(0, 4) and batch_rows(3, 4) == slice(8, 12)  # step k: rows (k-1)B .. kB-1
    shifted = control_order(order, 5, 4)  # step k of the control run gets the rows of step k + 2
    assert np.array_equal(shifted[:4], order[8:12])


def test_checkpoints_are_complete_or_absent_and_the_latest_intact_one_wins(tmp_path):
    leaves = [np.arange(6, dtype=np.float32), np.array(3, dtype=np.int32)]
    for step in (5, 10, 15):
        save_checkpoint(tmp_path, step, step * 4, [x + step for x in leaves], {})
    assert [p.name for p in complete_checkpoints(tmp_path)] == ["step_00000010", "step_00000015"]  # keeps two
    meta, loaded = load_latest_checkpoint(tmp_path, 2)
    assert meta["step"] == 15 and meta["data_position"] == 60 and loaded[1] == 18
    # a damaged newest checkpoint is skipped; a half-written one (temporary folder) is removed
    (tmp_path / "step_00000015" / "state.npz").write_bytes(b"garbage")
    (tmp_path / ".tmp-step_00000020-1").mkdir()
    remove_partial_checkpoints(tmp_path)
    assert not list(tmp_path.glob(".tmp-*"))
    meta, _ = load_latest_checkpoint(tmp_path, 2)
    assert meta["step"] == 10


def test_metrics_lines_are_parsed_or_rejected_with_their_line_number(tmp_path):
    m = Metrics()
    for i, line in enumerate(
        [
            '{"step": 1, "loss": 2.5, "tokens": 64}',
            '{"step": 1, "heldout_loss": NaN}',
            '{"event": "checkpoint", "step": 1}',
            '{"event": "resumed", "step": 1}',
            '{"step": 2, "loss": "nan"}',
        ],
        start=1,
    ):
        parse_metrics_line(line, i, m)
    assert m.losses[0] == (1, 2.5) and m.tokens == {1: 64} and math.isnan(m.heldout[0][1])
    assert m.checkpoints == [1] and m.resumed == [1] and math.isnan(m.losses[1][1])
    for bad, reason in (
        ("oops", "not JSON"),
        ('{"step": -1, "loss": 1}', "must be an integer from 0"),
        ('{"step": 1}', "needs 'loss'"),
        ('{"event": "saved", "step": 1}', "unknown event"),
        ('{"step": 1, "loss": "x"}', "must be a number"),
    ):
        with pytest.raises(MetricsError, match=reason):
            parse_metrics_line(bad, 7, Metrics())
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": 1.0}) + "\nnot json\n" + '{"step": 2, "lo')
    parsed = read_metrics(path)
    assert parsed.losses == [(1, 1.0)] and parsed.problems == [
        f"{path}:2: not JSON (Expecting value): 'not json'"
    ]
    assert drop_partial_line(path) == len('{"step": 2, "lo') and path.read_text().endswith("not json\n")


def test_a_metrics_line_is_a_typed_record_with_its_time_where_it_has_one():
    assert parse_metrics_record('{"step": 3, "loss": 2.5, "tokens": 64, "time": 1.7e9}') == MetricsLine(
        "loss", 3, 2.5, 64, 1.7e9
    )
    assert parse_metrics_record('{"event": "checkpoint", "step": 4, "time": 12}') == MetricsLine(
        "checkpoint", 4, time=12.0
    )
    assert parse_metrics_record('{"step": 0, "heldout_loss": 3.0, "time": true}') == MetricsLine(
        "heldout", 0, 3.0
    )
    assert parse_metrics_record('{"event": "resumed", "step": 2, "time": "noon"}').time is None


def test_the_verdicts_arithmetic():
    losses = [(s, 10.0 - s / 10) for s in range(1, 101)]
    assert tenth_means(losses, 100) == pytest.approx((9.45, 0.45))  # steps 1-10 and 91-100
    assert first_divergence(losses) is None
    assert first_divergence([(1, 5.0), (2, 5.5), (3, 6.5), (4, float("nan"))])[0] == 3
    assert first_divergence([(1, 5.0), (2, float("inf"))])[0] == 2
    n, diff = compare_curves(losses, losses, 1, 100, 0.0)
    assert n == 100 and diff is None
    other = [(s, v + (1e-9 if s == 40 else 0)) for s, v in losses]
    assert compare_curves(losses, other, 30, 100, 0.0)[1].step == 40
    assert compare_curves(losses, other, 30, 100, 1e-6)[1] is None
    assert compare_curves(losses, losses[:50], 30, 100, 0.0)[1].describe().startswith("step 51 is missing")

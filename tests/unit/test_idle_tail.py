"""The idle tail after an early finish has one price: the report, the `schedule` gate and the calendar compute it
with one function (campaign.calendar.gaps.released_capacity) and show the same figure for the same run."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from campaign import calendar as cal
from campaign.analysis.analysis import window_figures
from campaign.analysis.recorded_config import RecordedConfig
from campaign.calendar.window_length import assess_window_length
from campaign.config import load_config
from campaign.sim import simulate
from campaign.window import window_inputs, with_start
from tests.helpers.paths import DEMO

START = datetime(2027, 3, 1, tzinfo=UTC)


def test_the_report_the_gate_and_the_calendar_price_one_run_s_idle_tail_the_same():
    loaded = load_config(DEMO)
    config = with_start(loaded.config, START)
    run = simulate(window_inputs(config), 0)
    summary = run.summary
    assert summary.completed  # the demo finishes early: there is an idle tail
    window_s, completion_s = summary.window_s, summary.completion_s
    identity = cal.cluster_identity(config.cluster)
    nodes = config.cluster.booked_nodes

    # The report of this run.
    recorded = RecordedConfig.from_mapping(config.model_dump(mode="json", by_alias=True))
    report = window_figures(summary, run.events, recorded)
    # The calendar: the booking ends when the job did (rounded up to the second, as execute records it).
    end = START + timedelta(seconds=round(window_s))
    actual_end = START + timedelta(seconds=math.ceil(completion_s))
    booking = cal.Booking("b-1", "c-1", cal.CAMPAIGN, "demo", nodes, START, end, "executed", actual_end)
    gaps = cal.calendar_report("demo", nodes, identity.pricing, [booking], START, end).gaps
    [tail_gap] = [g for g in gaps if g.kind == "early_finish"]
    # The schedule gate, judging this one replica.
    gate = assess_window_length([completion_s], window_s, nodes, identity.pricing)

    price = report.cost_usd.released_early
    assert price > 0
    assert price == tail_gap.cost_usd == gate.expected_idle_tail_cost_usd
    assert report.released_early_h == pytest.approx(tail_gap.hours, abs=1e-12)
    assert report.released_early.node_hours == pytest.approx(tail_gap.idle_node_hours, abs=1e-9)
    assert report.released_early.node_hours == pytest.approx(gate.expected_idle_tail_node_hours, abs=1e-9)
    # And it is more than the GPU-hours alone: idle nodes draw power too.
    assert price > report.goodput_breakdown_gpu_h["idle_released"] * report.gpu_hour_usd

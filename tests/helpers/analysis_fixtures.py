"""A workspace catalog with one executed window, built from campaign functions alone (no Prefect)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from campaign import store
from campaign.config import load_config
from campaign.gate_result import GateResult
from campaign.plan import make_plan
from campaign.sim import simulate
from campaign.window import UNBOOKED_START, window_inputs
from tests.helpers.paths import DEMO


def executed_workspace(root: Path, overrides: tuple[str, ...] = ()) -> store.Workspace:
    """A workspace whose catalog holds gates, a commitment and one executed (simulated) window of the demo."""
    loaded = load_config(DEMO, list(overrides))
    config = loaded.config
    ws = store.adopt_workspace(store.Workspace(root.resolve()), config.name)
    plan = make_plan(config)
    result = simulate(window_inputs(config, plan), replica=0)
    summary = dataclasses.replace(
        result.summary, checkpoint_interval_optimal_s=plan.checkpoint.optimal_interval_s, plan=plan.to_json()
    )
    # The demo books `window.start: auto`; unbooked, it is simulated from UNBOOKED_START (a UTC midnight).
    start = UNBOOKED_START if config.window.is_auto else config.window.start
    commitment = store.Commitment(
        "c-test",
        start,
        start + timedelta(days=config.window.days),
        loaded.digest,
        "d" * 64,
        "tester",
        "commit-1",
        datetime(2027, 1, 1, tzinfo=UTC),
        json.dumps(config.model_dump(mode="json", by_alias=True), sort_keys=True),
    )
    store.record_gates(
        ws,
        "validate-1",
        loaded.digest,
        "d" * 64,
        [GateResult("layout", True, "tp=2 fits"), GateResult("memory", False, "too big")],
    )
    store.record_commitment(ws, commitment)
    store.record_replica(ws, "execute-1", "c-test", 0, config.seed, summary, result.events, result.power)
    store.record_execution(ws, "execute-1", "c-test", 0, reused=False)
    return ws


def empty_catalog(root: Path) -> store.Workspace:
    """A workspace with the current schema and nothing executed."""
    ws = store.adopt_workspace(store.Workspace(root.resolve()), "demo")
    with store.catalog(ws):
        pass
    return ws

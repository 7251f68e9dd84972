"""Fuzzing the input contract: mutated configs and corpora never crash, never hang, never lose a record.

Configs: any value for any numeric key, through `--set`, either loads or is a ConfigError (exit 2) naming the
key; a config that loads plans to finite figures (or violations) and simulates its window. Corpora: any bytes in
a JSONL file either become documents or rejections with a reason: input = kept + rejected, always. The CLI-level
checks (`campaign plan` exit codes, no traceback) run the real command in-process.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from campaign.config import CampaignConfig, DataConfig, SourceConfig, load_config
from campaign.data import prepare_data
from campaign.errors import ConfigError, DataError
from campaign.plan import make_plan
from campaign.sim import simulate
from campaign.window import window_inputs
from tests.helpers.examples import examples
from tests.helpers.paths import DEMO


def _numeric_paths(node: Any, prefix: tuple = ()) -> list[str]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _numeric_paths(v, (*prefix, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _numeric_paths(v, (*prefix, i))]
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return [".".join(map(str, prefix))]
    return []


DEMO_DATA = yaml.safe_load(DEMO.read_text())
NUMERIC_KEYS = [
    *sorted(_numeric_paths(DEMO_DATA)),
    "plan.checkpoint.interval_s",
    "plan.power_smoothing.floor_fraction",
    "plan.power_smoothing.ramp_mw_per_s",
    "cluster.total_gpus",
]
NASTY = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from(
        [
            ".nan",
            ".inf",
            "-.inf",
            "1e400",
            "-0",
            "0",
            "1e-300",
            "abc",
            "[]",
            "{}",
            "",
            "true",
            "null",
            "2**70",
            "9" * 400,
        ]
    ),
)


def _text(value: Any) -> str:
    if isinstance(value, float):
        return (
            ".nan"
            if math.isnan(value)
            else (".inf" if value == math.inf else "-.inf" if value == -math.inf else repr(value))
        )
    return str(value)


def test_every_numeric_config_field_has_a_finite_range():
    """A new field without both bounds fails here: every config number must be representable downstream."""
    missing = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            annotation = info.annotation
            args = getattr(annotation, "__args__", (annotation,))
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            inner = [getattr(a, "__args__", ()) for a in args]
            models += [
                b for group in inner for b in group if isinstance(b, type) and issubclass(b, BaseModel)
            ]
            for m in models:
                walk(m, f"{prefix}{name}.")
            numeric = any(a in (int, float) for a in args)
            if (
                numeric and name != "interval_s"
            ):  # interval_s is checked by its own validator (1..1e7 or 'auto')
                kinds = {type(m).__name__ for m in info.metadata}
                if not ({"Gt", "Ge"} & kinds and {"Lt", "Le"} & kinds):
                    missing.append(prefix + name)

    walk(CampaignConfig, "")
    assert missing == []


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(NUMERIC_KEYS), value=NASTY)
@example(key="plan.checkpoint.interval_s", value=float("nan"))
@example(key="cluster.power.pue", value=math.inf)
@example(key="seed", value=2**70)
@example(key="window.days", value=1e6)
@example(key="sim.power_sample_s", value=1e-6)
@example(key="window.start", value="9999-01-01T00:00:00Z")
def test_a_mutated_config_loads_or_is_a_config_error_and_then_plans_finitely(key, value):
    try:
        loaded = load_config(DEMO, [f"{key}={_text(value)}"])
    except ConfigError as err:
        assert err.exit_code == 2 and err.message and err.fix
        assert "--set" in err.message or key.split(".")[0] in err.message
        return
    plan = make_plan(loaded.config)
    figures = plan.to_json()
    for name in ("step_time_s", "memory_gib_per_gpu", "expected_ettr", "mfu", "tokens_per_s"):
        assert isinstance(figures[name], (int, float)) and math.isfinite(figures[name]), (name, figures[name])
    assert isinstance(figures["fits"], bool)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(
        [k for k in NUMERIC_KEYS if k.startswith(("cluster", "window", "plan.checkpoint", "sim", "seed"))]
    ),
    value=st.one_of(st.floats(min_value=0, max_value=1e7), st.integers(min_value=0, max_value=10**9)),
)
def test_a_config_that_loads_simulates_its_window(key, value):
    try:
        loaded = load_config(DEMO, [f"{key}={_text(value)}"])
    except ConfigError:
        return
    try:
        inputs = window_inputs(loaded.config, make_plan(loaded.config))
    except ConfigError as err:  # a rule that needs the plan (e.g. the checkpoint write outlasts the window)
        assert err.exit_code == 2 and err.where and err.fix
        return
    result = simulate(inputs, replica=0)
    assert 0.0 <= result.summary["ettr"] <= 1.0


# ------------------------------------------------------------------------------------------------ corpora

RECORD = st.one_of(
    st.builds(lambda t: json.dumps({"id": "x", "text": t}).encode(), st.text(max_size=400)),
    st.builds(
        lambda v: json.dumps({"text": v}).encode(), st.one_of(st.integers(), st.none(), st.lists(st.text()))
    ),
    st.binary(max_size=300),
    st.builds(
        lambda n: b'{"text": ' + b"[" * n + b"]" * n + b"}", st.integers(min_value=0, max_value=200_000)
    ),
    st.sampled_from(
        [
            b"\xef\xbb\xbf" + json.dumps({"text": "a byte-order mark " * 20}).encode(),
            json.dumps({"text": "nul\x00in\x00text " * 30}).encode(),
            b"{",
            b"null",
            b"[]",
            b'"str"',
        ]
    ),
)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(records=st.lists(RECORD, min_size=1, max_size=25))
def test_a_mutated_corpus_keeps_every_record(tmp_path_factory, records):
    folder = tmp_path_factory.mktemp("corpus")
    (folder / "part.jsonl").write_bytes(b"\n".join(r.replace(b"\n", b" ") for r in records) + b"\n")
    data = DataConfig(
        sources=(SourceConfig(name="web", path=str(folder / "*.jsonl"), format="jsonl", weight=1),)
    )
    try:
        manifest = prepare_data(data, folder / "data")
    except DataError:
        return
    stats = manifest["sources"][0]
    assert stats["n_input"] == stats["n_kept"] + stats["n_rejected"]
    assert all(pq.read_table(folder / "data" / "rejected" / "web.parquet").column("reason").to_pylist())
    for text in pq.read_table(folder / "data" / "clean" / "web.parquet").column("text").to_pylist():
        assert "\x00" not in text and not text.startswith("\ufeff")


def test_a_byte_order_mark_and_a_symlink_loop_are_handled(tmp_path: Path):
    (tmp_path / "in" / "a").mkdir(parents=True)
    from campaign.data.demo_corpus import _prose_paragraphs

    prose = "\n\n".join(_prose_paragraphs()[0][:3])  # real prose that passes the quality and repetition rules
    (tmp_path / "in" / "a" / "part.jsonl").write_bytes(
        b"\xef\xbb\xbf" + json.dumps({"text": prose}).encode() + b"\n"
    )
    (tmp_path / "in" / "a" / "loop").symlink_to(tmp_path / "in")
    data = DataConfig(
        sources=(
            SourceConfig(name="web", path=str(tmp_path / "in" / "**" / "*.jsonl"), format="jsonl", weight=1),
        )
    )
    stats = prepare_data(data, tmp_path / "data")["sources"][0]
    assert stats["n_input"] == 1 and stats["n_kept"] == 1


@pytest.mark.parametrize("value", [".nan", ".inf", "1e400", "-1", "abc"])
def test_the_cli_plan_never_exits_70_or_prints_a_traceback(value, capsys):
    from campaign_cli.cli import main

    for key in ("plan.checkpoint.interval_s", "cluster.power.pue", "plan.target_tokens", "cluster.nodes"):
        code = main(["plan", str(DEMO), "--set", f"{key}={value}"])
        captured = capsys.readouterr()
        assert code == 2, (key, value, captured.err)
        assert "Traceback" not in captured.err + captured.out and key in captured.err

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
    assert 0.0 <= result.summary.ettr <= 1.0


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


# --------------------------------------------------------------------------- compare inputs (simulate JSON files)

SIMULATE_FIELDS = [
    "replicas",
    "window_days",
    "summary.p_complete_in_window",
    "summary.energy_mwh",
    "summary.power_mw.peak",
    "summary.power_mw",
    "summary.ettr",
    *(
        f"summary.{k}.{s}"
        for k in ("ettr", "completion_days", "tokens_trained")
        for s in ("mean", "p50", "p90")
    ),
    "replica_values",
    "replica_values.completion_days",
]
JSON_VALUES = st.one_of(
    st.sampled_from(
        [
            "NaN",
            "Infinity",
            "-Infinity",
            "1e400",
            "-1e400",
            "-1",
            "1.5",
            "0",
            '"abc"',
            "[]",
            "{}",
            "null",
            "true",
            "9" * 400,
            "[" * 5000 + "]" * 5000,
            '[1, "x", NaN]',
            "[1e400]",
        ]
    ),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)


def _simulate_file(ettr: float) -> dict[str, Any]:
    spread = {"mean": ettr, "p10": ettr - 0.01, "p50": ettr, "p90": ettr + 0.01}
    return {
        "replicas": 4,
        "seed": 1,
        "wall_s": 0.1,
        "window_days": 2.0,
        "summary": {
            "ettr": spread,
            "completion_days": {"mean": 1.5, "p10": 1.4, "p50": 1.5, "p90": 1.7},
            "interruptions_unexpected": {"mean": 3, "p10": 1, "p50": 3, "p90": 5},
            "p_complete_in_window": 0.75,
            "tokens_trained": {"mean": 1e9, "p10": 1e9, "p50": 1e9, "p90": 1e9},
            "power_mw": {"peak": 1.2},
            "energy_mwh": 40.0,
        },
        "replica_values": {"completion_days": [1.4, 1.5, None, 1.7], "ettr": [0.9, 0.91, 0.89, 0.9]},
    }


@settings(
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(field=st.sampled_from(SIMULATE_FIELDS), value=JSON_VALUES)
@example(field="summary.completion_days.p50", value="Infinity")
@example(field="summary.ettr.mean", value="NaN")
@example(field="replica_values.completion_days", value="[1e400]")
def test_a_tampered_simulate_file_compares_or_is_bad_input_naming_it(tmp_path_factory, field, value):
    """Any value at any field compare reads: the comparison's table holds finite figures (or n/a), or it is a
    DataError (exit 2) naming the file; never another exception, never "differences: none" over a NaN."""
    from campaign.analysis.compare import comparison_table, load_run

    folder = tmp_path_factory.mktemp("compare")
    first = folder / "a.json"
    first.write_text(json.dumps(_simulate_file(0.9)))
    obj = _simulate_file(0.9)
    node = obj
    *parents, last = field.split(".")
    for part in parents:
        node = node[part]
    node[last] = "@@VALUE@@"
    second = folder / "b.json"
    second.write_text(json.dumps(obj).replace('"@@VALUE@@"', value))
    try:
        runs = [load_run(str(first)), load_run(str(second))]
    except DataError as err:
        assert err.where == str(second) and err.exit_code == 2
        return
    for row in comparison_table(runs):  # the figures' plots are drawn from the same checked values
        assert all(v is None or math.isfinite(v) for v in row.values), (field, value, row)
    assert all(run.window_advice != "" for run in runs)


# ------------------------------------------------------------------------------------------------- special files


def _special(kind: str, folder: Path) -> Path:
    """A path that is not a regular file: each would block open(), never end, or not be a file at all."""
    import os

    path = folder / f"special-{kind}-{len(list(folder.iterdir()))}.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "dev-null":
        path.symlink_to("/dev/null")
    elif kind == "folder":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(folder / "nowhere")
    return path


SPECIAL_KINDS = ["fifo", "dev-zero", "dev-null", "folder", "dangling"]


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_a_special_file_anywhere_a_user_names_a_file_answers_at_once(tmp_path: Path, kind: str):
    """As a config, as a file a config names, as a tokenizer, as an input matched by a glob and as a compare
    target: refused with a message naming it (exit 2), never opened to block or read without end."""
    from campaign.analysis.compare import load_run
    from campaign.data.inputs import plan_shards
    from campaign.data.tokenizer import check_spec

    special = _special(kind, tmp_path)
    with pytest.raises(ConfigError) as err:
        load_config(special)
    assert str(special) in err.value.render()
    data = yaml.safe_load(DEMO.read_text())
    data["model"] = str(special)
    named = tmp_path / "names-it.yaml"
    named.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError):
        load_config(named)
    tokenizer = tmp_path / f"tok-{kind}.json"
    _special(kind, tmp_path).rename(tokenizer) if kind != "folder" else tokenizer.mkdir()
    with pytest.raises(ConfigError):
        check_spec(str(tokenizer))
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text(json.dumps({"text": "hello"}) + "\n")
    _special(kind, tmp_path).rename(inputs / "b.jsonl")
    source = SourceConfig(name="web", path=str(inputs / "*.jsonl"), format="jsonl", weight=1)
    if kind == "folder":  # a folder is not matched as a file: nothing to say
        assert len(plan_shards(DataConfig(sources=(source,)))) == 1
    else:
        with pytest.raises(DataError) as data_err:
            plan_shards(DataConfig(sources=(source,)))
        assert str(inputs / "b.jsonl") in data_err.value.render() and "a.jsonl" not in data_err.value.render()
    target = _special(kind, tmp_path)
    with pytest.raises((ConfigError, DataError)):
        load_run(str(target))


# ------------------------------------------------------------------------------------------------- environment


@settings(max_examples=examples(60), deadline=None)
@given(
    where=st.sampled_from(["fsync", "replace", "fdopen"]),
    code=st.sampled_from(["ENOSPC", "EDQUOT"]),
    wrapped=st.booleans(),
)
def test_a_full_disk_at_any_point_of_a_write_is_disk_full_never_a_bug(tmp_path_factory, where, code, wrapped):
    import errno
    import os

    from campaign import files
    from campaign.errors import DiskFull, disk_full

    folder = tmp_path_factory.mktemp("full")
    real = getattr(os, where)

    def fail(*args, **kwargs):
        if where == "fdopen":
            os.close(args[0])
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))

    setattr(files.os, where, fail)
    try:
        with pytest.raises(DiskFull) as err:
            files.atomic_write_text(folder / "out.json", "{}")
    finally:
        setattr(files.os, where, real)
    assert err.value.exit_code == 74 and err.value.where == str(folder / "out.json")
    assert [p.name for p in folder.iterdir()] == []  # nothing half-written left
    error: BaseException = err.value
    if wrapped:  # however a library wraps it
        try:
            raise RuntimeError("the library failed") from err.value
        except RuntimeError as outer:
            error = outer
    assert isinstance(disk_full(error), DiskFull)


@pytest.mark.parametrize("value", ["abc", "nan", "inf", "-1", "1e400", "86401"])
def test_a_bad_lock_wait_in_the_environment_is_bad_input_naming_the_variable(value, monkeypatch):
    from campaign.store import lock_wait_s

    monkeypatch.setenv("CAMPAIGN_LOCK_WAIT_S", value)
    with pytest.raises(ConfigError, match="CAMPAIGN_LOCK_WAIT_S") as err:
        lock_wait_s()
    assert err.value.exit_code == 2

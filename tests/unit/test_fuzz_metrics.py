"""Fuzzing the trainer's metrics lines: whatever a trainer writes is a parsed record or a malformed line with its
file:line and reason, never an exception of another kind (which would reach the user as exit 70)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from campaign.rehearsal.contract import (
    MAX_LINE_BYTES,
    Metrics,
    MetricsError,
    parse_metrics_line,
    read_metrics,
)
from campaign.rehearsal.processes import MetricsTail
from tests.helpers.examples import examples

NASTY_NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.sampled_from(
        ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "9" * 400, "7" * 5000, "1" + "0" * 40]
    ),
)
KEYS = st.sampled_from(["step", "loss", "heldout_loss", "tokens", "event"])


def _json_number(value: object) -> str:
    """A JSON literal for the value as a trainer might print it (Python's json writes NaN and Infinity)."""
    return value if isinstance(value, str) else json.dumps(value)


@st.composite
def metrics_lines(draw: st.DrawFn) -> str:
    fields = draw(st.dictionaries(KEYS, NASTY_NUMBERS, min_size=1, max_size=4))
    if draw(st.booleans()):
        fields["event"] = draw(st.sampled_from(["checkpoint", "resumed", "saved"]))
    body = ", ".join(
        f'"{k}": {json.dumps(v) if k == "event" else _json_number(v)}' for k, v in fields.items()
    )
    return "{" + body + "}"


def _check(line: str) -> Metrics:
    m = Metrics()
    try:
        parse_metrics_line(line, 7, m, "m.jsonl:7")
    except MetricsError as exc:
        assert str(exc)  # a reason, never empty
        return m
    for step, _ in m.losses + m.heldout:
        assert 0 <= step <= 10**9
    for tokens in m.tokens.values():
        assert 0 <= tokens <= 2**53
    for _, value in m.losses + m.heldout:
        assert isinstance(value, float)  # NaN and infinity are evidence for the verdict, never an overflow
    return m


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=metrics_lines())
@example(line='{"step": 1, "loss": 1.0, "tokens": 1e400}')
@example(line='{"step": 1, "loss": 1.0, "tokens": NaN}')
@example(line='{"step": 1, "loss": ' + "9" * 400 + "}")
@example(line='{"step": ' + "5" * 5000 + ', "loss": 1.0}')
@example(line='{"event": "checkpoint", "step": ' + "5" * 5000 + "}")
@example(line="[" * 200_000)
@example(line="[" * 50_000)
@example(line='{"a": ' * 30_000)
def test_a_metrics_line_is_a_record_or_a_malformed_line(line: str) -> None:
    _check(line)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=st.text(max_size=300))
def test_any_text_is_a_record_or_a_malformed_line(line: str) -> None:
    _check(line)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(st.binary(max_size=200), max_size=8))
def test_a_metrics_file_of_any_bytes_reads_to_records_and_problems(
    tmp_path_factory, chunks: list[bytes]
) -> None:
    path = Path(tmp_path_factory.mktemp("metrics")) / "metrics.jsonl"
    path.write_bytes(b"\n".join(chunks))
    parsed = read_metrics(path)
    tail = MetricsTail(path, 0, 1)
    tail.poll()
    assert len(tail.metrics.problems) == len(parsed.problems)
    for problem in parsed.problems:
        assert problem.startswith(f"{path}:")


def test_a_line_that_never_ends_is_a_problem_not_a_memory_leak(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n' + "x" * (MAX_LINE_BYTES + 10))
    tail = MetricsTail(path, 0, 1)
    tail.poll()
    assert tail.metrics.losses == [(1, 2.0)] and tail.pending == b""
    assert tail.metrics.problems == [f"{path}:2: a line of more than 65,536 bytes without an end"]


def test_non_finite_losses_are_evidence_and_remember_their_line() -> None:
    m = Metrics()
    parse_metrics_line('{"step": 3, "loss": 1e400}', 5, m, "m.jsonl:5")
    parse_metrics_line('{"step": 3, "heldout_loss": NaN}', 6, m, "m.jsonl:6")
    assert m.losses == [(3, math.inf)] and math.isnan(m.heldout[0][1])
    assert m.where == {("loss", 3): "m.jsonl:5", ("heldout", 3): "m.jsonl:6"}


def test_each_number_that_is_not_a_finite_metrics_value_is_refused_with_its_reason() -> None:
    for line, reason in (
        ('{"step": 1, "loss": 1.0, "tokens": 1e400}', "'tokens' must be a whole number from 0 to 2^53"),
        ('{"step": 1, "loss": 1.0, "tokens": NaN}', "'tokens' must be a whole number"),
        ('{"step": 1, "loss": 1.0, "tokens": 2.5}', "'tokens' must be a whole number"),
        ('{"step": 1, "loss": ' + "9" * 400 + "}", "a 400-digit integer is not a metrics value"),
        ('{"step": ' + "5" * 5000 + ', "loss": 1.0}', "a 5000-digit integer"),
        ('{"step": 10000000000, "loss": 1.0}', "'step' must be an integer from 0 to 1,000,000,000"),
        ("[" * 200_000, "a line of 200,000 characters (at most 65,536)"),
        ("[" * 50_000, "nested too deeply"),
    ):
        try:
            parse_metrics_line(line, 3, Metrics(), "m.jsonl:3")
        except MetricsError as exc:
            assert reason in str(exc), (reason, str(exc))
        else:
            raise AssertionError(f"accepted: {line[:60]}")

"""Gate decisions: commit needs every gate passed for these digests; execute needs an unchanged commitment."""

from dataclasses import replace
from datetime import UTC, datetime

from campaign.config import load_config
from campaign.gates import (
    REQUIRED_GATES,
    SourceFigures,
    commit_problems,
    data_gates,
    execute_problems,
    plan_gates,
)
from campaign.plan import make_plan
from campaign.store import Commitment, GateRecord
from tests.helpers.paths import DEMO

T = datetime(2027, 1, 4, tzinfo=UTC)


def _passed(config="c", data="d", failing=()):
    return {
        g: GateRecord(g, g not in failing, config, data, {"summary": f"{g} detail"}, "r", T)
        for g in REQUIRED_GATES
    }


def test_commit_names_each_missing_gate():
    problems = commit_problems({}, "c" * 64, "d" * 64)
    assert len(problems) == len(REQUIRED_GATES)
    for gate, problem in zip(REQUIRED_GATES, problems, strict=True):
        assert f"gate '{gate}' has not been run" in problem


def test_commit_before_any_validate_says_never_validated_not_changed():
    (problem,) = commit_problems({}, "c" * 64, "d" * 64, ever_validated=False)
    assert problem.startswith("never validated") and "run `campaign validate`" in problem
    assert "changed" not in problem
    problems = execute_problems([], "c", "d", [], {}, ever_validated=False)
    assert problems[0].startswith("no commitment") and problems[1].startswith("never validated")
    assert len(problems) == 2


def test_commit_names_a_failed_gate_with_its_detail():
    assert commit_problems(_passed(failing=("memory",)), "c", "d") == [
        "gate 'memory' failed in the latest validate: memory detail"
    ]
    assert commit_problems(_passed(), "c", "d") == []


def test_execute_without_commitment_names_missing_gates():
    problems = execute_problems([], "c", "d", [], {})
    assert problems[0].startswith("no commitment")
    assert all(any(g in p for p in problems) for g in REQUIRED_GATES)


def test_execute_names_the_digest_that_changed():
    booked = [Commitment("c-1", T, T, "config-old" + "0" * 54, "d" * 64, "x", "r", T)]
    problems = execute_problems(booked, "config-new" + "0" * 54, "d" * 64, [], _passed())
    assert len(problems) == 1 and problems[0].startswith("config digest changed since commit")
    booked = [Commitment("c-1", T, T, "c", "data-old", "x", "r", T)]
    problems = execute_problems(booked, "c", "data-new", ["data/clean/web.parquet changed"], _passed())
    assert (
        problems[0].startswith("gate evidence digest changed since commit")
        and "data/clean/web.parquet changed" in problems
    )


def test_execute_allowed_when_everything_matches():
    booked = [Commitment("c-1", T, T, "c", "d", "x", "r", T)]
    assert execute_problems(booked, "c", "d", [], _passed()) == []


def _figures(kept=(100, 100), tokens=(6000, 4000), inputs=(120, 110), mismatches=(0, 0)):
    return {
        n: SourceFigures(n_kept=k, n_rejected=i - k, n_tokens=t, n_tokens_column=t, n_token_mismatches=m)
        for n, k, t, i, m in zip(("web", "docs"), kept, tokens, inputs, mismatches, strict=True)
    }


W = {"web": 0.6, "docs": 0.4}


def test_data_gates_pass_and_fail_on_thresholds():
    volume, mixture = data_gates(_figures(), W, 150, 5000, 0.5, 0.1)
    assert volume.passed and mixture.passed
    volume, mixture = data_gates(_figures(tokens=(9000, 1000)), W, 150, 5000, 0.5, 0.1)
    assert not mixture.passed and "docs" in mixture.summary
    volume, _ = data_gates(_figures(kept=(10, 10)), W, 150, 5000, 0.5, 0.1)
    assert (
        not volume.passed and "min_documents" in volume.summary and "max_rejected_fraction" in volume.summary
    )


def test_mixture_is_judged_against_the_weights_given_now():
    # the data has 60/40 tokens; weights of 95/5 (e.g. from --set) must fail, whatever prepare was told
    _, mixture = data_gates(_figures(), {"web": 0.95, "docs": 0.05}, 150, 5000, 0.5, 0.25)
    assert not mixture.passed and mixture.details["weights"] == {"web": 0.95, "docs": 0.05}


def test_token_counts_that_the_tokenizer_does_not_give_fail_the_volume_gate():
    volume, _ = data_gates(_figures(mismatches=(3, 0)), W, 150, 5000, 0.5, 0.1)
    assert not volume.passed and "3 clean documents carry an n_tokens" in volume.summary


def test_nan_fails_every_comparison():
    nan = float("nan")
    volume, mixture = data_gates(_figures(), W, 150, nan, 0.5, nan)
    assert not volume.passed and not mixture.passed
    plan = make_plan(load_config(DEMO).config)
    gates = plan_gates(replace(plan, memory_gib_per_gpu=nan, expected_days=nan), [])
    assert [g.passed for g in gates] == [True, False, False]

"""The rehearsal gate inside validate: its row in the table, its artifacts, and commit refusing without it."""

import json

import pytest

from campaign_cli.cli import main
from tests.helpers.paths import DEMO, set_args


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, demo_prepared):
    """A copy of the run's prepared demo workspace (conftest.py): prepare reads no rehearsal setting."""
    return demo_prepared.restore_to(
        tmp_path_factory.mktemp("rehearsal") / "ws"
    )  # its own folder and calendar


def rehearsal_row(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("rehearsal "))


# The shipped demo's JAX trainer and model, on 60 steps instead of 150 (checkpoints every 20): every run of the
# rehearsal (reference, killed, resumed, control) still trains the real model, in 40 % of the time. `make run` and
# benchmarks/readme_figures.py run the shipped settings whole.
JAX_SHORT = ["rehearsal.steps=60", "rehearsal.checkpoint_every=20"]


@pytest.mark.timeout(900)  # the JAX reference trainer: reference, killed, resumed and control runs
def test_validate_prints_the_rehearsal_row_and_commit_then_books(prepared, demo_inputs_jax, capsys):
    sets = set_args([*demo_inputs_jax, *JAX_SHORT])
    capsys.readouterr()
    assert main(["validate", str(DEMO), "--workspace", str(prepared), *sets]) == 0
    row = rehearsal_row(capsys.readouterr().out)
    assert "PASS" in row
    for evidence in ("loss ", "drop ", "held-out ", "killed at step ", "resumed at ", "bit-identical over"):
        assert evidence in row, (evidence, row)
    result = json.loads((prepared / "rehearsal" / "result.json").read_text())
    assert result["details"]["passed"] and result["curves"]["faulted"]["resumed_step"] > 0
    assert result["timings"]["tokens_per_s"] > 0  # recorded beside the verdict: it varies from run to run
    assert (prepared / "rehearsal" / "loss_curve.png").read_bytes().startswith(b"\x89PNG")
    assert main(["commit", str(DEMO), "--workspace", str(prepared), *sets]) == 0


def test_a_divergent_learning_rate_fails_the_gate_and_commit_refuses(
    prepared, demo_inputs, capsys, monkeypatch
):
    # The fast contract-following trainer with a softmax that overflows, as a real one does at a huge learning
    # rate; the JAX reference trainer's own divergence is tests/e2e/test_rehearsal_reference_trainer.py's.
    monkeypatch.setenv("NUMPY_TRAINER_MODE", "naive_softmax")
    sets = set_args([*demo_inputs, "rehearsal.learning_rate=1e6"])
    capsys.readouterr()
    assert main(["validate", str(DEMO), "--workspace", str(prepared), *sets]) == 1
    captured = capsys.readouterr()
    row = rehearsal_row(captured.out)
    assert "FAIL" in row and ("diverged at step" in row or "first non-finite" in row), row
    assert "lower rehearsal.learning_rate" in row and "Traceback" not in captured.err
    assert main(["commit", str(DEMO), "--workspace", str(prepared), *sets]) == 3
    assert "gate 'rehearsal' failed" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ("data.tokenizer=gpt2-pretokens", "cannot encode"),
        (
            "rehearsal.command=[/no/such/trainer, --small]",
            "cannot start the trainer `/no/such/trainer --small`",
        ),
    ],
)
def test_unusable_tokenizer_or_command_fails_the_gate_not_the_program(
    prepared, demo_inputs_jax, capsys, override, reason
):
    capsys.readouterr()
    # a counting-only tokenizer cannot make training shards: the config refuses that pair, so they go off with it
    extra = ["data.training_shards=false"] if override.startswith("data.tokenizer") else []
    assert (
        main(
            [
                "validate",
                str(DEMO),
                "--workspace",
                str(prepared),
                *set_args([*demo_inputs_jax, override, *extra]),
            ]
        )
        == 1
    )
    captured = capsys.readouterr()
    row = rehearsal_row(captured.out)
    assert "FAIL" in row and reason in row and "fix:" in row, row
    assert "Traceback" not in captured.err

"""Paths and CLI overrides the tests share, independent of the directory pytest runs from."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "campaigns" / "demo.yaml"
LLAMA = REPO / "configs" / "campaigns" / "llama3-405b.yaml"
NUMPY_TRAINER = REPO / "tests" / "helpers" / "rehearsal_numpy_trainer.py"


# Flow tests that are not about the rehearsal run its gate with a fast third-party trainer that follows the same
# contract (a NumPy bigram model, tests/helpers/rehearsal_numpy_trainer.py): the gate still trains for real, kills the
# trainer and checks the restore, in seconds instead of a minute of JAX. The JAX reference trainer is tested by
# tests/e2e/test_rehearsal_reference_trainer.py, tests/flows/test_rehearsal.py and `make run`.
def fast_rehearsal() -> list[str]:
    import sys

    return [
        f"rehearsal.command=[{sys.executable}, {NUMPY_TRAINER}]",
        "rehearsal.steps=40",
        "rehearsal.checkpoint_every=10",
        "rehearsal.eval_every=10",
        "rehearsal.warmup_steps=0",
        "rehearsal.learning_rate=50",
        "rehearsal.min_loss_drop=0.3",
        "rehearsal.sample_tokens=5000",
    ]


FAST_REHEARSAL = fast_rehearsal()


def future_start(days: int = 30) -> str:
    """A fixed window start for tests that need one: the UTC midnight `days` (>= 1) after today, ISO 8601.

    The shipped demo books `window.start: auto`; a test that names a start must keep it in the future (a start in
    the past is refused at commit), so it is computed from the clock, never written as a date."""
    from datetime import UTC, datetime, timedelta

    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return (today + timedelta(days=days)).isoformat().replace("+00:00", "Z")


def set_args(overrides: list[str]) -> list[str]:
    """["a=1", "b=2"] -> ["--set", "a=1", "--set", "b=2"]."""
    return [arg for override in overrides for arg in ("--set", override)]

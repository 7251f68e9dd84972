"""The `rehearsal:` config: bounded, described, derived from the campaign's model, never switched off."""

import math

import pytest
from annotated_types import Ge, Gt, Le, Lt

from campaign.config import RehearsalConfig, RehearsalModelConfig, load_config
from campaign.errors import ConfigError
from campaign.rehearsal.gate import rehearsal_model
from tests.helpers.paths import DEMO, LLAMA


@pytest.mark.parametrize("model", [RehearsalConfig, RehearsalModelConfig])
def test_every_numeric_field_has_finite_bounds_on_both_sides_and_a_description(model):
    for name, info in model.model_fields.items():
        assert info.description, name
        annotation = str(info.annotation)
        if "int" not in annotation and "float" not in annotation:
            continue
        lower = [m for m in info.metadata if isinstance(m, (Ge, Gt))]
        upper = [m for m in info.metadata if isinstance(m, (Le, Lt))]
        assert lower and upper, f"{model.__name__}.{name} needs a lower and an upper bound"
        for bound in lower + upper:
            value = next(
                v for v in (getattr(bound, a, None) for a in ("ge", "gt", "le", "lt")) if v is not None
            )
            assert math.isfinite(value), name


def test_the_demo_has_a_rehearsal_and_it_cannot_be_disabled():
    config = load_config(DEMO).config
    assert config.rehearsal.steps >= 10 and config.rehearsal.command[0] == "python"
    for bad in ("rehearsal.enabled=false", "rehearsal=null", "rehearsal.steps=0"):
        with pytest.raises(ConfigError):
            load_config(DEMO, [bad])


def test_a_divergent_learning_rate_is_a_valid_config_but_infinity_is_not():
    assert load_config(DEMO, ["rehearsal.learning_rate=1000"]).config.rehearsal.learning_rate == 1000
    with pytest.raises(ConfigError):
        load_config(DEMO, ["rehearsal.learning_rate=.inf"])


def test_checkpoint_interval_must_leave_room_for_a_kill():
    with pytest.raises(ConfigError) as err:
        load_config(DEMO, ["rehearsal.steps=100", "rehearsal.checkpoint_every=60"])
    assert "rehearsal.checkpoint_every" in str(err.value) and "at most steps / 2 = 50" in str(err.value)


def test_the_rehearsal_model_keeps_the_campaigns_ratios():
    for path in (DEMO, LLAMA):
        model = load_config(path).config.model
        small = rehearsal_model(model)
        assert small.heads // small.kv_heads == model.heads // model.kv_heads
        assert small.ffn_hidden / small.hidden == pytest.approx(model.ffn_hidden / model.hidden, rel=0.05)
        assert 128 <= small.hidden <= 256 and small.layers <= 4


def test_an_explicit_rehearsal_model_is_used_as_given():
    loaded = load_config(
        DEMO,
        [
            "rehearsal.model.layers=3",
            "rehearsal.model.hidden=192",
            "rehearsal.model.heads=6",
            "rehearsal.model.kv_heads=3",
            "rehearsal.model.ffn_hidden=768",
        ],
    )
    assert rehearsal_model(loaded.config.model, loaded.config.rehearsal.model).layers == 3
    with pytest.raises(ConfigError):
        load_config(DEMO, ["rehearsal.model.hidden=100", "rehearsal.model.heads=3"])

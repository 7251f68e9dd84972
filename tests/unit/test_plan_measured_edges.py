"""plan.measured at its edges: a measurement the model cannot explain is refused with its factor (never clipped into
a plan outside its own band), contradicting rows at one layout are named, and a row knows its model and stack."""

from __future__ import annotations

import pytest

from campaign.config import CampaignConfig, load_config
from campaign.errors import ConfigError
from campaign.plan import make_plan
from campaign.plan.calibration import Calibration, MeasuredRow, fit_calibration
from campaign_cli.cli import main
from tests.helpers.paths import DEMO
from tests.oracles.production_runs import all_production_runs

AT_LAYOUT = (
    "{nodes: 16, layout: {tp: 2, pp: 1, dp: 64, cp: 1}, global_batch_tokens: 2097152"  # demo's own layout
)


def _rows(*rows: str) -> str:
    return "plan.measured=[" + ", ".join(rows) + "]"


def _row(step_s: float, extra: str = "", layout: str = AT_LAYOUT) -> str:
    """A row of the demo's own model unless `extra` names one (or `model: null`, none)."""
    if "model:" not in extra:
        extra = f", model: demo-2b{extra}"
    return f"{layout}, step_time_s: {step_s}, source: run {step_s}{extra}}}"


def test_the_demo_row_is_at_the_configured_layout():
    cfg = load_config(DEMO).config
    assert (cfg.cluster.nodes, cfg.plan.layout.tp, cfg.plan.layout.dp, cfg.plan.global_batch_tokens) == (
        16,
        2,
        64,
        2097152,
    )


@pytest.mark.parametrize("step_s", [3.0, 1e-12, 1e6, 0.05])
def test_a_measurement_outside_what_the_model_explains_is_refused_with_its_factor(step_s, capsys):
    cfg = load_config(DEMO, [_rows(_row(step_s))]).config
    with pytest.raises(ConfigError) as err:
        make_plan(cfg)
    assert err.value.where == "plan.measured[0].step_time_s"
    assert (
        f"the measured step {step_s:.4g} s is " in err.value.message and "x the model's" in err.value.message
    )
    assert main(["plan", str(DEMO), "--set", _rows(_row(step_s))]) == 2
    assert "plan.measured[0].step_time_s" in capsys.readouterr().err


@pytest.mark.parametrize("step_s", [0.4, 0.6, 1.5])
def test_an_explainable_measurement_is_reproduced_inside_its_own_band(step_s):
    plan = make_plan(load_config(DEMO, [_rows(_row(step_s))]).config)
    low, high = plan.step_time_range_s
    assert plan.step_time_s == pytest.approx(step_s, rel=1e-3)
    assert low <= plan.step_time_s <= high


def test_runs_only_bounded_factors_fit_together_widen_the_band_to_hold_every_run_and_say_so():
    splits, measured = [(5.0, 5.0), (10.0, 0.0)], [20.0, 4.0]  # alone x2.0 and x0.4; together x0.4 and x3.6
    factors, note = fit_calibration(splits, measured)
    assert "outside the 0.33x-3x a stack can show" in note and "band widened" in note
    rows = tuple(
        MeasuredRow(1, {"tp": 1}, y, factors.compute * c + factors.communication * n)
        for (c, n), y in zip(splits, measured, strict=True)
    )
    low, high = Calibration(factors, rows, ("a", "b"), note).band()
    assert low <= 1.0 <= high  # the plan's own point
    assert all(low <= r.measured_s / r.predicted_s <= high for r in rows)  # and every measured run


@pytest.mark.parametrize(
    "rows",
    [
        (_row(0.3), _row(1.5)),  # two rows at one layout, 5x apart
        (_row(0.6), _row(0.62), _row(1.0)),  # a third that contradicts the first two
    ],
    ids=["two", "third"],
)
def test_contradicting_rows_at_one_layout_are_named_not_averaged(rows):
    with pytest.raises(ConfigError) as err:
        load_config(DEMO, [_rows(*rows)])
    assert f"plan.measured[{len(rows) - 1}].step_time_s" in str(err.value)
    assert "contradict each other" in str(err.value) and "plan.measured[0]" in str(err.value)


def test_rows_of_one_layout_that_agree_are_kept():
    plan = make_plan(load_config(DEMO, [_rows(_row(0.6), _row(0.62))]).config)
    assert plan.calibration is not None and len(plan.calibration.rows) == 2


def test_a_row_of_another_model_or_stack_is_refused_naming_both():
    with pytest.raises(ConfigError, match=r"measured on 'mt-nlg-530b', this config plans 'demo-2b'"):
        load_config(DEMO, [_rows(_row(0.6, ", model: mt-nlg-530b"))])
    with pytest.raises(
        ConfigError, match=r"measured on the 'pytorch-fsdp' stack, this config plans on 'megatron-core'"
    ):
        load_config(DEMO, [_rows(_row(0.6, ", model: demo-2b, stack: pytorch-fsdp"))])
    named = make_plan(load_config(DEMO, [_rows(_row(0.6, ", model: demo-2b, stack: megatron-core"))]).config)
    assert named.calibration is not None and len(named.calibration.rows) == 1
    # a row that names no model cannot be checked: refused, saying what to write
    with pytest.raises(ConfigError, match=r"name the model the run trained \(model: demo-2b") as err:
        load_config(DEMO, [_rows(_row(0.6, ", model: null"))])
    assert "plan.measured[0].model: name the model" in str(err.value)


def test_a_published_step_of_another_model_is_refused():
    """Every published production run pasted into every other family's config is refused: naming its model, for
    the model; not naming it, because a row must name its model (a nameless row was once taken as this config's
    model, and for 34 of these 72 pairs the plan's band then missed the target's own published step)."""
    runs = all_production_runs()
    for target in runs:
        for measured in (m for m in runs if m.family != target.family):
            cfg = measured.config
            entry = {
                "nodes": cfg.cluster.nodes,
                "layout": cfg.plan.layout.model_dump(),
                "global_batch_tokens": cfg.plan.global_batch_tokens,
                "micro_batch": cfg.plan.micro_batch,
                "step_time_s": measured.step_s,
                "source": measured.name,
            }
            data = target.config.model_dump(mode="json", by_alias=True)
            for named in (True, False):
                data["plan"]["measured"] = [{**entry, **({"model": cfg.model.name} if named else {})}]
                with pytest.raises((ConfigError, ValueError)) as err:
                    make_plan(CampaignConfig.model_validate(data))
                said = cfg.model.name if named else f"(model: {target.config.model.name} if it was"
                assert said in str(err.value), (target.name, measured.name, str(err.value))

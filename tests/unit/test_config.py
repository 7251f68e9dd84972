"""The config loader: references, overrides, digests, and errors that name file:line: field and the fix."""

import pytest

from campaign.config import load_config
from campaign.errors import ConfigError
from campaign.plan.flops import parameter_count
from tests.helpers.paths import DEMO, LLAMA


def test_shipped_configs_load_and_resolve_references():
    llama = load_config(LLAMA).config
    assert llama.cluster.nodes == 2048 and llama.cluster.gpus == 16384
    assert len(llama.cluster.failures) == 18  # Table 5 of the Llama 3 paper has 18 root-cause rows
    assert all(f.source for f in llama.cluster.failures)
    assert load_config(DEMO).config.name == "demo"


def test_llama3_parameter_count_matches_405b():
    # Llama 3 Herd of Models, Table 3: 405B parameters. Tolerance 1%.
    assert parameter_count(load_config(LLAMA).config.model) == pytest.approx(405e9, rel=0.01)


def test_digest_is_stable_and_changes_with_any_value():
    a, b = load_config(DEMO), load_config(DEMO)
    assert a.digest == b.digest
    assert load_config(DEMO, ["cluster.spare_nodes=4"]).digest != a.digest


def test_override_sets_nested_values_and_list_items():
    c = load_config(
        LLAMA, ["plan.layout.dp=64", "cluster.nodes=1024", "cluster.failures.0.detect_s=5"]
    ).config
    assert c.plan.layout.dp == 64 and c.cluster.nodes == 1024
    assert c.cluster.failures[0].detect_s == 5


def test_unknown_key_names_file_line_field_and_suggests(tmp_path):
    text = DEMO.read_text().replace("  spare_nodes: 3\n", "  spare_nodez: 3\n")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    line = text.splitlines().index("  spare_nodez: 3") + 1
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = err.value.render()
    assert (
        f"{path}:{line}: cluster.spare_nodez: unknown key 'spare_nodez'; did you mean 'spare_nodes'?"
        in message
    )
    assert "fix:" in message


def test_wrong_type_names_the_line(tmp_path):
    text = DEMO.read_text().replace("  layers: 24\n", "  layers: twenty-four\n")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    line = text.splitlines().index("  layers: twenty-four") + 1
    with pytest.raises(ConfigError, match=rf"bad.yaml:{line}: model.layers: .*integer.*'twenty-four'"):
        load_config(path)


def test_impossible_layout_says_how_to_fix():
    with pytest.raises(
        ConfigError, match=r"plan.layout: tp x pp x dp x cp = .* change plan.layout.dp or cluster.nodes"
    ):
        load_config(DEMO, ["plan.layout.dp=63"])


def test_batch_not_divisible_names_the_field():
    with pytest.raises(ConfigError, match=r"plan.global_batch_tokens: .*not divisible"):
        load_config(DEMO, ["plan.micro_batch=3"])


def test_failure_needs_exactly_one_rate():
    with pytest.raises(
        ConfigError, match=r"cluster.failures\[0\]: .*exactly one of per_gpu_year or per_1k_node_days"
    ):
        load_config(DEMO, ["cluster.failures.0.per_1k_node_days=3"])


def test_invalid_yaml_and_missing_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\ncluster: [\n")
    with pytest.raises(ConfigError, match=r"broken.yaml:\d+: invalid YAML"):
        load_config(path)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_duplicate_key_is_an_error(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text(DEMO.read_text().replace("seed: 7\n", "seed: 7\nseed: 8\n"))
    with pytest.raises(ConfigError, match="key 'seed' appears twice"):
        load_config(path)


def test_missing_referenced_file(tmp_path):
    path = tmp_path / "ref.yaml"
    path.write_text(LLAMA.read_text().replace("../clusters/h100-meta-24k.yaml", "../clusters/nope.yaml"))
    with pytest.raises(
        ConfigError, match=r"ref.yaml:\d+: cluster: referenced file '../clusters/nope.yaml' not found"
    ):
        load_config(path)


def test_bad_override_syntax():
    with pytest.raises(ConfigError, match="has no '='"):
        load_config(DEMO, ["cluster.nodes"])


def test_a_list_item_is_set_by_bracket_or_dotted_index():
    bracket = load_config(DEMO, ["cluster.failures[0].per_gpu_year=500"]).config
    dotted = load_config(DEMO, ["cluster.failures.0.per_gpu_year=500"]).config
    assert bracket.cluster.failures[0].per_gpu_year == 500
    assert bracket == dotted


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("cluster.failures[99].per_gpu_year=1", r"cluster.failures has \d+ item\(s\), numbered from 0"),
        ("cluster.failures.x.per_gpu_year=1", "is a list, so the next key is an item's number"),
        ("cluster.failures[x].per_gpu_year=1", "cannot read the key"),
        ("cluster..nodes=1", "cannot read the key"),
        ("cluster.nodes.=1", "cannot read the key"),
    ],
)
def test_a_bad_list_index_in_an_override_names_the_list(override, said):
    with pytest.raises(ConfigError, match=said) as err:
        load_config(DEMO, [override])
    assert err.value.where == "--set" and "did you mean" not in err.value.render()


def test_an_unknown_key_never_suggests_itself(tmp_path):
    text = DEMO.read_text().replace("  spare_nodes: 3\n", "  spare_nodes: 3\n  'odd[0]': 1\n")
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = err.value.render()
    assert "cluster.odd[0]: unknown key 'odd[0]'" in message
    assert "did you mean 'cluster'" not in message
    with pytest.raises(ConfigError) as err:
        load_config(DEMO, ["cluster.failures[0].per_gpu_yaer=5000"])
    assert "unknown key 'per_gpu_yaer'; did you mean 'per_gpu_year'?" in err.value.render()


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_config_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path, special):
    import os

    target = special
    if special == "fifo":
        target = str(tmp_path / "campaign.yaml")
        os.mkfifo(target)  # open() without O_NONBLOCK would wait for a writer forever
    with pytest.raises(ConfigError, match="not a regular file") as err:
        load_config(target)
    assert err.value.where == target
    import yaml

    data = yaml.safe_load(DEMO.read_text())
    data["model"] = target  # a section that names another file: that file is read under the same rule
    ref = tmp_path / "ref.yaml"
    ref.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="not a regular file") as err:
        load_config(ref)
    assert target in err.value.render()


def test_a_config_larger_than_the_bound_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    from campaign.config import loader

    big = tmp_path / "big.yaml"
    big.write_text("name: x\n" + "# padding\n" * 200)
    monkeypatch.setattr(loader, "MAX_CONFIG_BYTES", 1000)
    with pytest.raises(ConfigError, match="config file too large") as err:
        load_config(big)
    assert err.value.where == str(big)

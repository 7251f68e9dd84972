"""The failure fit on logs with known truth: rates inside their intervals, scopes, lemon nodes and no healthy node
named, clustering told from Poisson; the command's JSON, its profile, and its refusal of a bad log."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from campaign.config import FailureCategoryConfig
from campaign.failures import find_lemon_nodes, fit_failures, poisson_rate_interval, read_incident_log
from campaign.failures.fit import exposure_clock
from campaign_cli.cli import main
from tests.helpers.incident_logs import known_log, write_log


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    truth, jobs, incidents = known_log(tmp_path_factory.mktemp("log"))
    return truth, jobs, incidents, fit_failures(read_incident_log(jobs, incidents), nodes=512)


def test_rates_are_recovered_inside_their_intervals_with_the_right_scopes(known):
    truth, _, _, fit = known
    fitted = {c.name: c for c in fit.categories}
    assert set(fitted) == {c.name for c in truth.categories}
    for c in truth.categories:
        f = fitted[c.name]
        assert f.scope == c.scope, (c.name, f.evidence)
        rate = truth.mean_rate_per_h(c) * (365 * 24 if c.scope == "gpu" else 1)
        assert f.ci95[0] <= rate <= f.ci95[1], (c.name, rate, f.ci95)
        assert f.unit == ("per_gpu_year" if c.scope == "gpu" else "per_job_hour")
        assert "strong evidence" in f.evidence.verdict
        assert f.interarrival.verdict.startswith("consistent with independent")


def test_planted_lemon_nodes_are_found_and_no_healthy_node_is_named(known):
    truth, _, _, fit = known
    assert sorted(n.node for n in fit.lemon_nodes) == sorted(truth.lemon_nodes)
    assert all(n.p_value < 0.05 and n.failures > 5 * n.expected for n in fit.lemon_nodes)
    # As the simulator's cluster.lemons: the demo plants 3 of 512 at 20x.
    lemons = fit.cluster_lemons
    assert lemons is not None and lemons.count == 3 and lemons.fraction == 3 / 512
    assert 10 < lemons.factor < 40
    assert lemons.healthy_divisor == 1 + 3 / 512 * (lemons.factor - 1)


def test_job_mttf_is_predicted_from_job_and_gpu_rates_and_matches_the_observed_sizes(known):
    truth, _, _, fit = known
    for point in fit.job_mttf_h:
        rate = sum(
            truth.mean_rate_per_h(c) * (point.gpus if c.scope == "gpu" else 1) for c in truth.categories
        )
        assert point.ci95[0] <= 1 / rate <= point.ci95[1], point
    for seen in fit.observed_mttf_h:  # the log's own sizes: the prediction inside each observed interval
        rate = sum(c.count / c.exposure_h * (seen.gpus if c.scope == "gpu" else 1) for c in fit.categories)
        assert seen.ci95[0] <= 1 / rate <= seen.ci95[1], seen


def test_the_exact_poisson_interval_is_garwoods():
    assert poisson_rate_interval(0, 1.0) == pytest.approx((0.0, 3.6889), abs=1e-4)
    assert poisson_rate_interval(10, 2.0) == pytest.approx((4.7954 / 2, 18.3904 / 2), abs=1e-4)


def test_a_lemon_needs_significance_after_correcting_for_the_number_of_nodes():
    counts = {f"n{i}": 2 for i in range(100)} | {"bad": 9}
    lemons, tested = find_lemon_nodes(counts, nodes=101)
    assert [n.node for n in lemons] == ["bad"]
    assert tested[0].expected == pytest.approx(2.0)
    # 7 where 2 are expected is rare for one node (p 0.0045) but what chance gives somewhere among 101.
    lemons, tested = find_lemon_nodes({f"n{i}": 2 for i in range(100)} | {"x": 7}, nodes=101)
    assert lemons == [] and tested[0].node == "x" and 0.3 < tested[0].p_value < 0.6


def test_bursts_of_failures_are_told_from_poisson_arrivals(tmp_path):
    rng = np.random.default_rng(0)
    bursts = np.repeat(np.sort(rng.uniform(0, 8000, 40)), 5) + rng.exponential(0.05, 200)
    times = []
    for h in np.sort(bursts):
        times.append(
            f"{(np.datetime64('2026-01-01T00:00:00') + np.timedelta64(int(h * 3600), 's'))}Z,j,flaky,"
        )
    jobs, incidents = write_log(tmp_path, ["j,2026-01-01T00:00:00Z,2027-01-01T00:00:00Z,64"], times)
    fit = fit_failures(read_incident_log(jobs, incidents))
    (flaky,) = fit.categories
    assert flaky.interarrival.weibull_shape < 1 and flaky.interarrival.p_value < 0.01
    assert flaky.interarrival.verdict.startswith("clustered")


def test_the_exposure_clock_counts_the_load_of_overlapping_jobs():
    import pandas as pd

    jobs = pd.DataFrame({"start_h": [0.0, 5.0], "end_h": [10.0, 15.0]})
    t, cumulative = exposure_clock(jobs, np.array([2.0, 3.0]))
    assert np.interp([5.0, 10.0, 15.0], t, cumulative).tolist() == [10.0, 35.0, 50.0]


def test_one_job_size_cannot_tell_the_scope_and_says_so(tmp_path):
    jobs, incidents = write_log(
        tmp_path,
        ["a,2026-03-01T00:00:00Z,2026-03-05T00:00:00Z,64", "b,2026-03-01T00:00:00Z,2026-03-05T00:00:00Z,64"],
        ["2026-03-01T05:00:00Z,a,sw,", "2026-03-02T05:00:00Z,b,sw,"],
    )
    log = read_incident_log(jobs, incidents)
    (grows,) = fit_failures(log).categories
    assert grows.scope == "gpu" and "cannot be judged" in grows.evidence.verdict
    (per_job,) = fit_failures(log, base_scopes={"sw": "job"}).categories
    assert per_job.scope == "job" and per_job.rate == pytest.approx(2 / 192)


def test_the_command_prints_the_documented_json_and_writes_a_profile_a_config_takes(known, tmp_path, capsys):
    _, jobs, incidents, _ = known
    out = tmp_path / "profile.yaml"
    code = main(
        [
            "failures",
            "fit",
            "--jobs",
            str(jobs),
            "--incidents",
            str(incidents),
            "--nodes",
            "512",
            "--json",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["exposure"]) == {"gpu_hours", "job_hours", "node_days"}
    for c in data["categories"]:
        assert {"name", "scope", "count", "rate", "unit", "ci95"} <= set(c) and c["scope"] in (
            "gpu",
            "node",
            "job",
        )
    assert all(set(n) == {"node", "failures", "expected", "p_value"} for n in data["lemon_nodes"])
    assert [m["gpus"] for m in data["job_mttf_h"]] == [1024, 2048, 4096, 8192, 16384]
    profile = [FailureCategoryConfig.model_validate(c) for c in yaml.safe_load(out.read_text())]
    by_name = {c.name: c for c in profile}
    assert by_name["software_bug"].per_job_hour is not None and by_name["software_bug"].observed is not None
    assert by_name["faulty_gpu"].observed.failures == next(
        c["count"] for c in data["categories"] if c["name"] == "faulty_gpu"
    )


def test_a_bad_log_exits_2_naming_the_row_and_writes_nothing(tmp_path, capsys):
    jobs, incidents = write_log(
        tmp_path, ["a,2026-03-01T00:00:00Z,2026-03-01T10:00:00Z,64"], ["2026-03-02T05:00:00Z,a,x,"]
    )
    out = tmp_path / "profile.yaml"
    code = main(["failures", "fit", "--jobs", str(jobs), "--incidents", str(incidents), "--out", str(out)])
    assert code == 2
    assert (
        f"{incidents}:2: time 2026-03-02T05:00:00+00:00 is outside every segment of job a"
        in capsys.readouterr().err
    )
    assert not out.exists()


def test_a_profile_whose_rate_disagrees_with_its_counts_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"is not observed\.failures / observed\.exposure_h .* refit with"):
        FailureCategoryConfig(
            name="x",
            scope="gpu",
            per_gpu_year=0.5,
            detect_s=60,
            restart_s=60,
            repair_h=1,
            observed={"failures": 10, "exposure_h": 1e6},
        )


def test_the_exact_interval_covers_the_true_rate_at_least_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    for mean in (0.5, 3.0, 40.0):
        counts = rng.poisson(mean, size=2000)
        intervals = {int(k): poisson_rate_interval(int(k), 1.0) for k in np.unique(counts)}
        covered = [intervals[int(k)][0] <= mean <= intervals[int(k)][1] for k in counts]
        assert np.mean(covered) >= 0.95


def test_the_report_page_shows_every_category_the_three_figures_and_the_lemons(known, tmp_path, capsys):
    truth, jobs, incidents, _ = known
    page = tmp_path / "fit.html"
    args = ["failures", "fit", "--jobs", str(jobs), "--incidents", str(incidents), "--nodes", "512"]
    assert main([*args, "--report", str(page)]) == 0
    out = capsys.readouterr().out
    assert f"report written to {page}" in out
    assert "as a config: cluster.lemons: {count: 3, factor: " in out  # to copy into a campaign's cluster
    text = page.read_text()
    assert text.count("<svg") == 3
    for name in [c.name for c in truth.categories] + list(truth.lemon_nodes):
        assert name in text


def test_the_artifact_markdown_carries_the_table_the_mttf_and_the_figures(known):
    from campaign.failures.report import fit_report_markdown

    truth, _, _, fit = known
    text = fit_report_markdown(fit, "t")
    assert text.count("data:image/svg+xml;base64,") == 3
    assert all(c.name in text for c in truth.categories) and "| 16,384 |" in text
    assert all(node in text for node in truth.lemon_nodes)
    assert "As a config: `cluster.lemons: {count: 3, factor: " in text


def test_llama3_table_5_names_match_the_shipped_profile_by_alias_and_unseen_categories_add_no_rate(
    tmp_path, capsys
):
    from tests.helpers.paths import REPO

    # One 16,384-GPU job and one 1,024-GPU job (two sizes, so the log itself can speak to scope), with incidents
    # named as Llama 3's Table 5 names its root causes.
    jobs = [
        "big,2026-03-01T00:00:00Z,2026-03-11T00:00:00Z,16384",
        "small,2026-03-01T00:00:00Z,2026-03-11T00:00:00Z,1024",
    ]
    names = ["GPU HBM3 Memory", "GPU SRAM Memory", "Host Maintenance", "NCCL Watchdog Timeouts", "Faulty GPU"]
    incidents = [f"2026-03-0{1 + i}T06:00:00Z,big,{name},node{i}" for i, name in enumerate(names)]
    jobs_path, incidents_path = write_log(tmp_path, jobs, incidents)
    base = REPO / "configs" / "failures" / "llama3-405b.yaml"
    out = tmp_path / "profile.yaml"
    args = [
        "--jobs",
        str(jobs_path),
        "--incidents",
        str(incidents_path),
        "--base",
        str(base),
        "--out",
        str(out),
    ]
    assert main(["failures", "fit", *args, "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    seen = {c["name"]: c for c in fit["categories"] if c["count"]}
    assert set(seen) == {
        "gpu_hbm3",
        "gpu_sram",
        "host_maintenance_unplanned",
        "nccl_watchdog_timeout",
        "faulty_gpu",
    }
    # Its rate is stated per GPU-year in the profile, so it grows with the job, as the profile says.
    assert seen["nccl_watchdog_timeout"]["unit"] == "per_gpu_year"
    assert not {"gpu_hbm3_memory", "gpu_sram_memory", "host_maintenance", "nccl_watchdog_timeouts"} & {
        c["name"] for c in fit["categories"]
    }
    assert any("'GPU HBM3 Memory' as gpu_hbm3" in n for n in fit["notes"])
    profile = {
        c.name: c for c in (FailureCategoryConfig.model_validate(c) for c in yaml.safe_load(out.read_text()))
    }
    assert len(profile) == 18  # the shipped profile's categories, no duplicate under another name
    # A category's scope comes from the category its name matched: an NCCL timeout costs the job, not a GPU.
    assert (
        profile["nccl_watchdog_timeout"].scope == "job"
        and profile["host_maintenance_unplanned"].scope == "node"
    )
    # A category the log never saw adds no rate (and no posterior to draw one from).
    assert profile["ssd"].per_gpu_year == 0.0 and profile["ssd"].observed is None
    assert profile["gpu_hbm3"].observed is not None and profile["gpu_hbm3"].aliases == ("GPU HBM3 Memory",)


def test_a_category_matching_nothing_in_the_base_is_said_and_keeps_its_own_name(tmp_path, capsys):
    from tests.helpers.paths import REPO

    jobs_path, incidents_path = write_log(
        tmp_path, ["a,2026-03-01T00:00:00Z,2026-03-02T00:00:00Z,64"], ["2026-03-01T06:00:00Z,a,Cosmic Ray,"]
    )
    base = REPO / "configs" / "failures" / "llama3-405b.yaml"
    args = ["--jobs", str(jobs_path), "--incidents", str(incidents_path), "--base", str(base), "--json"]
    assert main(["failures", "fit", *args]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in fit["categories"] if c["count"]] == ["cosmic_ray"]
    assert any("not in the base profile by name or alias: cosmic_ray" in n for n in fit["notes"])

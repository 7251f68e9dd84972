"""No user file overwritten: every output a command writes where the user names (--out, --report, a folder) refuses
an input of the same command and an existing file campaign did not write (exit 2, nothing written), and may replace
what campaign itself wrote there before."""

from __future__ import annotations

import os

import pytest

from campaign.errors import ConfigError
from campaign.files import OUTPUT_LEDGER, check_output_dir, check_outputs, write_output, written_by_campaign
from campaign_cli.cli import main
from tests.helpers.incident_logs import write_log

JOBS = ["a,2026-03-01T00:00:00Z,2026-03-05T00:00:00Z,64", "b,2026-03-01T00:00:00Z,2026-03-05T00:00:00Z,64"]
INCIDENTS = ["2026-03-01T05:00:00Z,a,sw,", "2026-03-02T05:00:00Z,b,sw,"]


@pytest.fixture
def log(tmp_path):
    jobs, incidents = write_log(tmp_path, JOBS, INCIDENTS)
    return jobs, incidents, {p: p.read_bytes() for p in (jobs, incidents)}


def _fit(jobs, incidents, *extra):
    return main(["failures", "fit", "--jobs", str(jobs), "--incidents", str(incidents), *map(str, extra)])


@pytest.mark.parametrize("flag", ["--out", "--report"])
@pytest.mark.parametrize("which", ["incidents", "jobs"])
def test_an_output_flag_naming_an_input_is_refused_and_the_input_kept(log, capsys, flag, which):
    jobs, incidents, before = log
    target = incidents if which == "incidents" else jobs
    assert _fit(jobs, incidents, flag, target) == 2
    err = capsys.readouterr().err
    assert f"{flag} {target} is the file --{which} reads" in err
    assert {p: p.read_bytes() for p in before} == before


def test_an_output_through_a_link_to_an_input_is_refused(log, tmp_path, capsys):
    jobs, incidents, before = log
    os.link(incidents, tmp_path / "hard.csv")
    (tmp_path / "soft.csv").symlink_to(incidents)
    for name in ("hard.csv", "soft.csv"):
        assert _fit(jobs, incidents, "--out", tmp_path / name) == 2
        assert "is the file --incidents reads" in capsys.readouterr().err
    assert incidents.read_bytes() == before[incidents]


@pytest.mark.parametrize("flag", ["--out", "--report"])
def test_an_existing_user_file_is_refused_with_exit_2(log, tmp_path, capsys, flag):
    jobs, incidents, _ = log
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    assert _fit(jobs, incidents, flag, notes) == 2
    assert "campaign does not overwrite a file it did not write" in capsys.readouterr().err
    assert notes.read_text() == "my notes\n"


def test_a_refused_report_leaves_the_profile_unwritten_too(log, tmp_path, capsys):
    jobs, incidents, _ = log
    (tmp_path / "notes.html").write_text("mine")
    assert _fit(jobs, incidents, "--out", tmp_path / "p.yaml", "--report", tmp_path / "notes.html") == 2
    assert not (tmp_path / "p.yaml").exists()


def test_campaign_replaces_its_own_output_but_not_once_a_user_edited_it(log, tmp_path, capsys):
    jobs, incidents, _ = log
    out = tmp_path / "profile.yaml"
    assert _fit(jobs, incidents, "--out", out) == 0
    assert written_by_campaign(out) and (tmp_path / OUTPUT_LEDGER).is_file()
    assert _fit(jobs, incidents, "--out", out) == 0  # its own file: rewritten
    out.write_text(out.read_text() + "# my edit\n")
    assert _fit(jobs, incidents, "--out", out) == 2
    assert out.read_text().endswith("# my edit\n")


def test_the_same_file_for_two_outputs_and_a_folder_are_refused(log, tmp_path, capsys):
    jobs, incidents, _ = log
    assert _fit(jobs, incidents, "--out", tmp_path / "x", "--report", tmp_path / "x") == 2
    assert "name the same file" in capsys.readouterr().err
    (tmp_path / "dir").mkdir()
    assert _fit(jobs, incidents, "--out", tmp_path / "dir") == 2
    assert "is a folder, not a file" in capsys.readouterr().err


def test_demo_log_does_not_overwrite_a_users_jobs_csv(tmp_path, capsys):
    (tmp_path / "jobs.csv").write_text("mine\n")
    assert main(["failures", "demo-log", str(tmp_path), "--jobs", "20"]) == 2
    assert "FOLDER/jobs.csv" in capsys.readouterr().err
    assert (tmp_path / "jobs.csv").read_text() == "mine\n" and not (tmp_path / "incidents.csv").exists()
    fresh = tmp_path / "fresh"
    assert main(["failures", "demo-log", str(fresh), "--jobs", "20"]) == 0
    assert main(["failures", "demo-log", str(fresh), "--jobs", "20"]) == 0  # its own files: rewritten


def test_analyse_metrics_refuses_a_users_folder_and_one_holding_its_input(tmp_path, capsys):
    metrics = tmp_path / "run" / "metrics.jsonl"
    metrics.parent.mkdir()
    metrics.write_text('{"step": 1, "time": 0.0, "loss": 1.0}\n')
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "report.html").write_text("my page")
    assert main(["analyse", "--metrics", str(metrics), "--out", str(tmp_path / "mine")]) == 2
    assert "is not empty and is not a folder campaign wrote into" in capsys.readouterr().err
    assert (tmp_path / "mine" / "report.html").read_text() == "my page"
    assert main(["analyse", "--metrics", str(metrics), "--out", str(metrics.parent)]) == 2
    assert "holds --metrics" in capsys.readouterr().err


def test_the_guard_refuses_a_fifo_and_an_unwritable_folder(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ConfigError, match="FIFO"):
        check_outputs({"--out": tmp_path / "pipe"})
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        check_output_dir(tmp_path / "pipe", "--out")
    with pytest.raises(ConfigError, match=r"Not a directory|not a folder"):
        check_outputs({"--out": tmp_path / "pipe" / "x.yaml"})
    write_output(tmp_path / "ok.txt", "x")
    assert check_outputs({"--out": tmp_path / "ok.txt"}) == {"--out": tmp_path / "ok.txt"}

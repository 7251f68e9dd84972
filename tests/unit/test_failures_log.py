"""The incident log's format: both files read (CSV and Parquet), every bad row named with file:line and the fix,
nothing dropped, an unknown category kept as its own."""

from __future__ import annotations

import pandas as pd
import pytest

from campaign.errors import DataError
from campaign.failures import category_key, fit_failures, read_incident_log
from tests.helpers.incident_logs import write_log

JOBS = [
    "a,2026-03-01T00:00:00Z,2026-03-01T10:00:00Z,64",
    "b,2026-03-01T00:00:00Z,2026-03-02T00:00:00Z,8",
    "b,2026-03-03T00:00:00Z,2026-03-03T12:00:00Z,8",  # a second segment of job b
]


def test_a_good_log_reads_every_row_with_its_segment_and_exposure(tmp_path):
    jobs, incidents = write_log(
        tmp_path,
        JOBS,
        [
            "2026-03-01T05:00:00Z,a,Faulty GPU,node7",
            "2026-03-03T06:00:00+00:00,b,software bug,",
            "2026-03-01T23:00:00,b,my-new-thing,",  # no offset: UTC
        ],
    )
    log = read_incident_log(jobs, incidents)
    assert len(log.jobs) == 3 and len(log.incidents) == 3
    assert log.jobs["hours"].tolist() == [10.0, 24.0, 12.0]
    segments = log.jobs.iloc[log.incidents["segment"]]
    assert segments["job_id"].tolist() == ["a", "b", "b"]
    assert log.incidents["time_h"].tolist() == [5.0, 54.0, 23.0]
    assert log.incidents["line"].tolist() == [2, 3, 4]
    fit = fit_failures(log, base_scopes={"faulty_gpu": "gpu", "software_bug": "job"})
    # Mapped to the config's names by category_key; an unknown category kept under its own name.
    assert {c.name for c in fit.categories} == {"faulty_gpu", "software_bug", "my_new_thing"}
    assert fit.exposure.to_json() == {
        "gpu_hours": 640 + 8 * 36,
        "job_hours": 46.0,
        "node_days": (640 + 8 * 36) / 8 / 24,
    }


def test_category_names_match_whatever_their_case_and_separators():
    assert category_key(" Faulty GPU ") == category_key("faulty-gpu") == "faulty_gpu"
    assert category_key("Network switch/cable") == "network_switch_cable"


def test_every_bad_row_is_named_with_file_line_and_the_fix(tmp_path):
    jobs, incidents = write_log(
        tmp_path,
        [
            *JOBS,
            "c,yesterday,2026-03-01T10:00:00Z,8",  # line 5
            "d,2026-03-01T10:00:00Z,2026-03-01T09:00:00Z,8",  # line 6: ends before it starts
            "e,2026-03-01T00:00:00Z,2026-03-01T10:00:00Z,eight",  # line 7
            "b,2026-03-01T12:00:00Z,2026-03-01T13:00:00Z,8",  # line 8: overlaps b's first segment (line 3)
        ],
        [
            "2026-03-01T05:00:00Z,a,faulty_gpu,node7",  # line 2: fine
            "2026-03-01T11:00:00Z,a,faulty_gpu,node7",  # line 3: after job a ended
            "2026-03-01T05:00:00Z,zz,faulty_gpu,",  # line 4: unknown job
            "soon,a,faulty_gpu,",  # line 5: unparsable time
            "2026-03-02T06:00:00Z,b,,",  # line 6: no category; also between b's segments
        ],
    )
    with pytest.raises(DataError) as err:
        read_incident_log(jobs, incidents)
    text = str(err.value)
    for where, what in [
        (f"{jobs}:5", "start is not an ISO 8601 time"),
        (f"{jobs}:6", "end is not after start"),
        (f"{jobs}:7", "gpus is not a whole number"),
        (f"{jobs}:8", "this segment overlaps the same job's segment at line 3"),
        (f"{incidents}:3", "outside every segment of job a"),
        (f"{incidents}:4", "job_id is not in the jobs file"),
        (f"{incidents}:5", "time is not an ISO 8601 time"),
        (f"{incidents}:6", "category is empty"),
        (f"{incidents}:6", "outside every segment of job b"),
    ]:
        lines = [line for line in text.splitlines() if line.strip().startswith(f"{where}: ")]
        assert any(what in line for line in lines), (where, what)
    assert f"{incidents}:2:" not in text
    assert "9 bad rows" in text and "fix:" in text
    assert err.value.exit_code == 2


def test_a_missing_column_names_the_header_to_give(tmp_path):
    (tmp_path / "jobs.csv").write_text(
        "jobname,start,end,gpus\nx,2026-03-01T00:00:00Z,2026-03-01T01:00:00Z,8\n"
    )
    (tmp_path / "incidents.csv").write_text("time,job_id,category\n")
    with pytest.raises(
        DataError,
        match=r"jobs.csv:1: the jobs file has no column job_id .*give the header job_id,start,end,gpus\n  fix: correct",
    ):
        read_incident_log(tmp_path / "jobs.csv", tmp_path / "incidents.csv")


def test_parquet_is_read_and_its_bad_rows_are_named_by_row(tmp_path):
    pd.DataFrame(
        {
            "job_id": ["a", "b"],
            "start": pd.to_datetime(["2026-03-01T00:00:00Z", "2026-03-01T00:00:00Z"]),
            "end": pd.to_datetime(["2026-03-01T10:00:00Z", "2026-03-01T10:00:00Z"]),
            "gpus": [16, 0],
        }
    ).to_parquet(tmp_path / "jobs.parquet")
    pd.DataFrame(
        {"time": pd.to_datetime(["2026-03-01T01:00:00Z"]), "job_id": ["a"], "category": ["x"], "node": [None]}
    ).to_parquet(tmp_path / "incidents.parquet")
    with pytest.raises(DataError, match=r"jobs.parquet: row 1: gpus is not a whole number"):
        read_incident_log(tmp_path / "jobs.parquet", tmp_path / "incidents.parquet")


def test_times_at_different_precisions_in_the_two_files_still_join(tmp_path):
    jobs, incidents = write_log(
        tmp_path, ["a,2026-03-01T00:00:00Z,2026-03-01T10:00:00Z,8"], ["2026-03-01T05:00:00.250Z,a,x,"]
    )
    assert read_incident_log(jobs, incidents).incidents["time_h"].tolist() == [5.0 + 0.25 / 3600]


def test_a_log_whose_every_incident_time_is_bad_is_reported_not_crashed(tmp_path):
    jobs, incidents = write_log(tmp_path, ["a,2026-03-01T00:00:00Z,2026-03-01T01:00:00Z,8"], ["x,a,y,"])
    with pytest.raises(DataError, match=r"incidents.csv:2: time is not an ISO 8601 time \('x'"):
        read_incident_log(jobs, incidents)


def test_a_fifo_named_as_a_log_or_a_base_profile_is_refused_without_being_opened(tmp_path):
    import os

    from campaign.errors import ConfigError
    from campaign.failures import read_base_profile

    _, incidents = write_log(tmp_path, JOBS, [])
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match=r"pipe.csv: the jobs file cannot be read \(a FIFO"):
        read_incident_log(fifo, incidents)
    with pytest.raises(ConfigError, match="cannot read the base failure profile"):
        read_base_profile(fifo)


# --- a log as a team has it: spellings, delimiters, epoch seconds, day/month order; and the edges refused


def _files(tmp_path, jobs_text: str, incidents_text: str):
    (tmp_path / "jobs.csv").write_text(jobs_text)
    (tmp_path / "incidents.csv").write_text(incidents_text)
    return tmp_path / "jobs.csv", tmp_path / "incidents.csv"


def test_scheduler_spellings_a_semicolon_delimiter_and_epoch_seconds_are_read_and_said(tmp_path):
    jobs, incidents = _files(
        tmp_path,
        "JobID;Start;End;NNodes\nA;1772323200;1772359200;8\n",  # 2026-03-01T00:00Z to 10:00Z
        "Timestamp,JOB_ID,Cause,Hostname\n2026-03-01T05:00:00Z,A,faulty_gpu,n1\n",
    )
    with pytest.raises(DataError, match="gives nodes, not gpus; pass --gpus-per-node"):
        read_incident_log(jobs, incidents)
    log = read_incident_log(jobs, incidents, gpus_per_node=8)
    assert log.jobs["gpus"].tolist() == [64] and log.jobs["hours"].tolist() == [10.0]
    assert log.incidents["time_h"].tolist() == [5.0] and log.incidents["node"].tolist() == ["n1"]
    said = "\n".join(log.notes)
    assert "semicolon-separated" in said and "JobID as job_id" in said and "NNodes as nodes" in said
    assert "epoch seconds" in said and "Cause as category" in said and "nodes x 8" in said


def test_a_day_month_order_the_column_settles_is_read_and_an_ambiguous_one_refused_with_both_readings(
    tmp_path,
):
    jobs, incidents = _files(
        tmp_path,
        "job_id,start,end,gpus\na,03/01/2026 00:00,03/13/2026 00:00,8\n",  # 03/13: month first
        "time,job_id,category,node\n03/02/2026 12:00,a,x,\n",
    )
    log = read_incident_log(jobs, incidents)
    assert log.jobs["hours"].tolist() == [12 * 24.0] and log.incidents["time_h"].tolist() == [36.0]
    assert any("month first (US)" in n for n in log.notes)
    jobs.write_text("job_id,start,end,gpus\na,01/03/2026 00:00,01/04/2026 00:00,8\n")
    with pytest.raises(DataError) as err:
        read_incident_log(jobs, incidents)
    text = str(err.value)
    assert "ambiguous" in text and "2026-01-03" in text and "2026-03-01" in text and "jobs.csv:2" in text


def test_both_files_headers_are_named_when_both_are_wrong(tmp_path):
    jobs, incidents = _files(
        tmp_path, "jobname,start,end,gpus\nx,1,2,3\n", "when_it_was,jobname,what\n1,x,y\n"
    )
    with pytest.raises(DataError) as err:
        read_incident_log(jobs, incidents)
    text = str(err.value)
    assert f"{jobs}:1: the jobs file has no column job_id" in text
    assert f"{incidents}:1: the incidents file has no column time, job_id, category" in text


def test_a_row_with_more_fields_than_the_header_is_named_as_such(tmp_path):
    jobs, incidents = write_log(tmp_path, [*JOBS, "c,2026-03-01T00:00:00Z,2026-03-01T01:00:00Z,8,extra"], [])
    incidents.write_text("time,job_id,category,node\n2026-03-01T05:00:00Z,a,x,n1\n")
    with pytest.raises(DataError, match=r"jobs.csv:5: 5 fields, more than the header's 4"):
        read_incident_log(jobs, incidents)


def test_absurd_years_duplicate_and_contradicting_incidents_are_bad_rows(tmp_path):
    jobs, incidents = write_log(
        tmp_path,
        [*JOBS, "z,2999-03-01T00:00:00Z,2999-03-02T00:00:00Z,8"],
        [
            "2026-03-01T05:00:00Z,a,faulty_gpu,n1",
            "2026-03-01T05:00:00Z,a,faulty_gpu,n1",  # line 3: the same incident twice
            "2026-03-01T05:00:00Z,a,software_bug,n1",  # line 4: the same incident, another category
            "9999-01-01T00:00:00Z,a,x,",  # line 5
        ],
    )
    with pytest.raises(DataError) as err:
        read_incident_log(jobs, incidents)
    text = str(err.value)
    assert f"{jobs}:5: start 2999-03-01T00:00:00+00:00 is in the year 2999" in text
    assert f"{incidents}:3: repeats line 2 (same time, job and node): one incident logged twice" in text
    assert f"{incidents}:4: repeats line 2 (same time, job and node) with another category" in text
    assert f"{incidents}:5: time 9999-01-01T00:00:00+00:00 is in the year 9999" in text


def test_empty_header_only_zero_row_and_null_logs_exit_2_with_the_reason(tmp_path, capsys):
    from campaign_cli.cli import main

    jobs, incidents = write_log(tmp_path, JOBS, [])
    out = tmp_path / "profile.yaml"
    assert (
        main(["failures", "fit", "--jobs", str(jobs), "--incidents", str(incidents), "--out", str(out)]) == 2
    )
    assert "the incidents file has a header and no rows" in capsys.readouterr().err and not out.exists()
    incidents.write_text("")
    assert main(["failures", "fit", "--jobs", str(jobs), "--incidents", str(incidents)]) == 2
    assert "the incidents file is empty" in capsys.readouterr().err
    empty = pd.DataFrame({"job_id": pd.Series([], dtype=str), "start": [], "end": [], "gpus": []})
    empty.to_parquet(tmp_path / "jobs.parquet")
    incidents.write_text("time,job_id,category,node\n2026-03-01T05:00:00Z,a,x,n1\n")
    assert (
        main(["failures", "fit", "--jobs", str(tmp_path / "jobs.parquet"), "--incidents", str(incidents)])
        == 2
    )
    assert "the jobs file has a header and no rows" in capsys.readouterr().err
    pd.DataFrame(
        {
            "time": pd.to_datetime(["2026-03-01T01:00:00Z", None]),
            "job_id": ["a", None],
            "category": [None, "x"],
        }
    ).to_parquet(tmp_path / "incidents.parquet")
    with pytest.raises(DataError) as err:
        read_incident_log(jobs, tmp_path / "incidents.parquet")
    text = str(err.value)
    assert (
        "incidents.parquet: row 0: category is empty" in text
        and "incidents.parquet: row 1: time is empty" in text
    )
    assert "incidents.parquet: row 1: job_id is empty" in text

"""Slurm accounting as an incident log: sacct's segments and states, node events naming the category, the
editable mapping, host lists. The real cluster's own accounting is read in tests/e2e/test_failures_slurm.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from campaign.errors import DataError
from campaign.failures.profile import fit_slurm_log
from campaign.failures.slurm import DEFAULT_MAPPING, expand_hostlist, read_sacct, read_slurm_mapping
from campaign_cli.cli import main
from tests.helpers.paths import REPO as ROOT

HEADER = "JobID|JobIDRaw|State|Start|End|NNodes|NodeList|AllocTRES|Reason|ExitCode"


def _sacct(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


ROWS = [
    # a job requeued after a node failure, then finished: three segments of one job (and its steps, skipped)
    "100|100|NODE_FAIL|2026-03-01T00:00:00|2026-03-01T10:00:00|2|gpu[01-02]|billing=16,cpu=64,gres/gpu=16,node=2|None|0:0",
    "100.batch|100.batch|CANCELLED|2026-03-01T00:00:00|2026-03-01T10:00:00|1|gpu01|cpu=32|None|0:15",
    "100|100|FAILED|2026-03-01T11:00:00|2026-03-01T20:00:00|2|gpu[03-04]|billing=16,cpu=64,gres/gpu=16,node=2|None|1:0",
    "100|100|COMPLETED|2026-03-01T21:00:00|2026-03-02T09:00:00|2|gpu[05-06]|gres/gpu=16,node=2|None|0:0",
    "101|101|FAILED|2026-03-01T00:00:00|2026-03-01T05:00:00|1|gpu07|gres/gpu=8,node=1|None|1:0",  # a crash
    "102|102|TIMEOUT|2026-03-01T00:00:00|2026-03-02T00:00:00|1|gpu08|gres/gpu=8,node=1|None|0:0",
    "103|103|CANCELLED by 1234|2026-03-01T00:00:00|2026-03-01T02:00:00|1|gpu08|gres/gpu=8,node=1|None|0:0",
    "104_3|104|REQUEUED|2026-03-01T00:00:00|2026-03-01T01:00:00|1|gpu09||None|0:0",  # an array task, no TRES
    "105|105|PENDING|Unknown|Unknown|1|None assigned||None|0:0",  # never ran
]


def test_sacct_segments_states_and_steps(tmp_path: Path) -> None:
    fit, _ = fit_slurm_log(sacct=_sacct(tmp_path, ROWS), gpus_per_node=8)
    counts = {c.name: (c.count, c.scope) for c in fit.categories if c.count}
    # NODE_FAIL: hardware, node scope; FAILED: software unless a node event says otherwise; TIMEOUT, CANCELLED by
    # a person and REQUEUED: not failures.
    assert counts == {"node_failure": (1, "node"), "software_bug": (2, "job")}
    assert (
        fit.jobs == 5 and fit.segments == 7
    )  # job 100's three segments are one job; the pending job held no time
    assert fit.exposure.gpu_hours == 16 * (10 + 9 + 12) + 8 * (5 + 24 + 2) + 8 * 1  # 104: 1 node x 8 GPUs


def test_a_node_event_makes_a_failed_segment_hardware_with_its_reasons_category(tmp_path: Path) -> None:
    events = tmp_path / "events.txt"
    events.write_text(
        "NodeName|Start|End|State|Reason|User\n"
        "gpu04|2026-03-01T19:59:30|2026-03-02T08:00:00|DOWN|Xid 48: DBE (double bit ECC error)|slurm(64030)\n"
        "gpu99|2026-03-01T12:00:00|Unknown|DRAIN|NHC: ib port down|root(0)\n"  # hit no job
        "|2026-03-01T00:00:00|Unknown|DOWN|Cluster processor count changed|slurm(64030)\n"  # a cluster event
    )
    fit, _ = fit_slurm_log(sacct=_sacct(tmp_path, ROWS), events=events, gpus_per_node=8)
    counts = {c.name: c.count for c in fit.categories if c.count}
    assert counts == {"node_failure": 1, "gpu_hbm3": 1, "software_bug": 1}
    assert any("1 of 2 node events matched" in n for n in fit.notes)


def test_the_mapping_is_the_shipped_file_and_an_edited_copy_changes_it(tmp_path: Path, capsys) -> None:
    shipped = yaml.safe_load((ROOT / "configs/failures/slurm.yaml").read_text())
    assert shipped == DEFAULT_MAPPING
    assert read_slurm_mapping(ROOT / "configs/failures/slurm.yaml") == read_slurm_mapping()
    edited = dict(
        shipped, states={**shipped["states"], "TIMEOUT": "hang"}, scopes={**shipped["scopes"], "hang": "job"}
    )
    mapping = tmp_path / "slurm.yaml"
    mapping.write_text(yaml.safe_dump(edited))
    sacct = _sacct(tmp_path, ROWS)
    assert (
        main(["failures", "fit", "--slurm-sacct", str(sacct), "--slurm-mapping", str(mapping), "--json"]) == 0
    )
    fit = json.loads(capsys.readouterr().out)
    assert {c["name"]: c["count"] for c in fit["categories"]}["hang"] == 1
    mapping.write_text("states: [1, 2]\n")
    with pytest.raises(DataError, match=r"shape of configs/failures/slurm\.yaml"):
        read_slurm_mapping(mapping)


def test_bad_sacct_lines_are_named_and_an_unknown_state_is_said(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"sacct.txt:3: 3 fields where the header has 10"):
        read_sacct(_sacct(tmp_path, [ROWS[0], "1|2|3"]), 8)
    odd = ROWS[0].replace("NODE_FAIL", "SPECIAL_EXIT")
    fit, _ = fit_slurm_log(sacct=_sacct(tmp_path, [odd, ROWS[4]]))
    assert any("SPECIAL_EXIT" in n and "--slurm-mapping" in n for n in fit.notes)
    (tmp_path / "plain.txt").write_text("JobID State Start End\n")
    with pytest.raises(DataError, match="sacct's header"):
        read_sacct(tmp_path / "plain.txt", 8)


def test_host_lists_expand_as_slurm_writes_them() -> None:
    assert expand_hostlist("gpu[01-03,07],login1") == ("gpu01", "gpu02", "gpu03", "gpu07", "login1")
    assert expand_hostlist("r[1-2]-n[8-9]") == ("r1-n8", "r1-n9", "r2-n8", "r2-n9")
    with pytest.raises(ValueError, match="too large"):
        expand_hostlist("n[0-99999999]")


def test_one_source_at_a_time(tmp_path: Path, capsys) -> None:
    sacct = _sacct(tmp_path, ROWS)
    assert main(["failures", "fit", "--slurm-sacct", str(sacct), "--slurm-jobcomp", str(sacct)]) == 2
    assert "give one incident log" in capsys.readouterr().err
    assert main(["failures", "fit", "--jobs", str(sacct)]) == 2


def test_out_is_refused_for_an_input_and_for_a_profile_a_config_would_refuse(tmp_path: Path, capsys) -> None:
    sacct = _sacct(tmp_path, ROWS)
    assert main(["failures", "fit", "--slurm-sacct", str(sacct), "--out", str(sacct)]) == 2
    assert "--slurm-sacct reads" in capsys.readouterr().err
    # Seconds of jobs: a fit to read, not a rate a config can take; --out says so and writes nothing.
    short = _sacct(
        tmp_path,
        [
            "7|7|NODE_FAIL|2026-03-01T00:00:00|2026-03-01T00:00:02|1|n0|gres/gpu=8|None|0:0",
            "7|7|COMPLETED|2026-03-01T00:00:03|2026-03-01T00:00:09|1|n1|gres/gpu=8|None|0:0",
        ],
    )
    out = tmp_path / "profile.yaml"
    assert main(["failures", "fit", "--slurm-sacct", str(short), "--json"]) == 0
    assert any("no profile" in n for n in json.loads(capsys.readouterr().out)["notes"])
    assert main(["failures", "fit", "--slurm-sacct", str(short), "--out", str(out)]) == 2
    assert "a config refuses" in capsys.readouterr().err and not out.exists()

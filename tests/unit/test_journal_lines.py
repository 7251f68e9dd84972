"""The journal's lines as typed records: written and read back byte for byte, keys of another version kept, and a
malformed line refused with its file and line number."""

import json

import pytest

from campaign.errors import DataError
from campaign.execution.journal import Journal, JournalEvent, JournalStep

# One line of each shape the supervisors write (one-node and multi-node), as the version before the typed records
# wrote them: the file format these records must keep.
WRITTEN = [
    '{"event_id":0,"t_s":0.0,"kind":"job_start","category":"","scope":"","node":-1,"tokens_trained":0.0,'
    '"detail":"target_step=40 job_nodes=3 spare_nodes=1","attempt":0,"started_at":1800000000.0}',
    '{"event_id":1,"t_s":0.5,"kind":"start","category":"","scope":"","node":0,"tokens_trained":0.0,'
    '"detail":"world=3 nodes=n0,n1,n2","attempt":0,"nodes":["n0","n1","n2"],"names":["n0","n1","n2"]}',
    '{"event_id":2,"t_s":7.2,"kind":"checkpoint_end","category":"","scope":"","node":0,"tokens_trained":0.0,'
    '"detail":"step=5","attempt":0,"step":5}',
    '{"event_id":3,"t_s":8.5,"kind":"failure","category":"kill","scope":"job","node":0,"tokens_trained":0.0,'
    '"detail":"injected: kill","attempt":0,"injection":0,"step":7}',
    '{"event_id":4,"t_s":0.20759,"kind":"failure","category":"exit_code","scope":"job","node":0,'
    '"tokens_trained":640.0,"detail":"organic: exit code 3 after step 5","attempt":0,"injection":null,"step":5,'
    '"blame":"node","progressed":true,"stderr":"numpy trainer: CUDA error (pretend)"}',
    '{"event_id":5,"t_s":0.146938,"kind":"failure","category":"supervisor_lost","scope":"job","node":0,'
    '"tokens_trained":0.0,"detail":"organic: the supervisor stopped; its start was stopped with it","attempt":0,'
    '"blame":"none","progressed":true}',
    '{"event_id":6,"t_s":26.3,"kind":"detected","category":"node_lost","scope":"node","node":2,'
    '"tokens_trained":0.0,"detail":"","attempt":0}',
    '{"event_id":7,"t_s":4.810285,"kind":"checkpoint_fallback","category":"","scope":"","node":0,'
    '"tokens_trained":0.0,"detail":"resumed from step 20, not from the newest checkpoint (step 30)","attempt":1,'
    '"step":20,"newest":30,"lost_steps":10}',
    '{"event_id":8,"t_s":4.646835,"kind":"checkpoint_unloadable","category":"","scope":"","node":0,'
    '"tokens_trained":0.0,"detail":"the start failed before it resumed","attempt":1,"step":30}',
    '{"event_id":9,"t_s":0.462287,"kind":"restart_end","category":"","scope":"","node":0,"tokens_trained":0.0,'
    '"detail":"","attempt":1,"step":0}',
    '{"event_id":10,"t_s":0.265911,"kind":"window_end","category":"","scope":"","node":0,"tokens_trained":0.0,'
    '"detail":"cancelled: SIGTERM received","attempt":1,"outcome":"stopped"}',
]


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines))


def test_a_journal_read_back_and_written_again_is_byte_identical(tmp_path):
    _write(tmp_path / "events.jsonl", WRITTEN)
    _write(tmp_path / "steps.jsonl", ['{"t_s":1796469506.96469,"step":1,"attempt":0}'])
    journal = Journal.open(tmp_path)
    again = [json.dumps(e.to_json(), separators=(",", ":")) for e in journal.events]
    assert again == WRITTEN
    assert [json.dumps(s.to_json(), separators=(",", ":")) for s in journal.steps] == [
        '{"t_s":1796469506.96469,"step":1,"attempt":0}'
    ]
    by_id = {e.event_id: e for e in journal.events}
    assert by_id[1].nodes == ("n0", "n1", "n2") and by_id[4].injection is None and by_id[4].progressed is True
    assert by_id[3].injection == 0 and by_id[7].lost_steps == 10 and by_id[10].outcome == "stopped"
    assert journal.started_at() == 1.8e9 and by_id[6].at_step == 0 and by_id[2].at_step == 5


def test_add_writes_the_lines_the_supervisors_wrote(tmp_path):
    """Each supervisor's call, as it makes it, writes today's line: keys in the order given, a key given as None
    written as null, the list of a start's nodes as a JSON list."""
    journal = Journal.open(tmp_path)
    journal.add(0.0, "job_start", detail="target_step=40 job_nodes=3 spare_nodes=1", started_at=1800000000.0)
    journal.add(
        0.5,
        "start",
        node=0,
        detail="world=3 nodes=n0,n1,n2",
        nodes=("n0", "n1", "n2"),
        names=("n0", "n1", "n2"),
    )
    journal.add(7.2, "checkpoint_end", node=0, detail="step=5", step=5)
    journal.add(8.5, "failure", "kill", "job", 0, detail="injected: kill", attempt=0, injection=0, step=7)
    journal.add(
        0.20759,
        "failure",
        "exit_code",
        "job",
        0,
        tokens_trained=640,
        detail="organic: exit code 3 after step 5",
        attempt=0,
        injection=None,
        step=5,
        blame="node",
        progressed=True,
        stderr="numpy trainer: CUDA error (pretend)",
    )
    lines = journal.events_path.read_text().splitlines()
    assert lines == WRITTEN[:5]
    assert [e.to_json() for e in Journal.open(tmp_path).events] == [e.to_json() for e in journal.events]
    assert Journal.open(tmp_path).events == journal.events


def test_keys_of_another_version_are_kept_and_the_next_event_follows_them(tmp_path):
    newer = (
        '{"event_id":0,"t_s":0.0,"kind":"job_start","category":"","scope":"","node":-1,"tokens_trained":0.0,'
        '"detail":"","attempt":0,"gpu_serial":"X1","started_at":5.0,"tags":{"a":[1,2]}}'
    )
    _write(tmp_path / "events.jsonl", [newer])
    journal = Journal.open(tmp_path)
    (start,) = journal.events
    assert start.started_at == 5.0 and dict(start.unknown) == {"gpu_serial": "X1", "tags": {"a": [1, 2]}}
    assert json.dumps(start.to_json(), separators=(",", ":")) == newer
    journal.add(1.0, "window_end", detail="the window ended")
    assert journal.events_path.read_text().splitlines()[0] == newer and journal.events[1].event_id == 1


@pytest.mark.parametrize(
    "line, said",
    [
        ("not json", "line 2 is no JSON"),
        ("[1, 2]", "line 2 is no JSON object"),
        ('{"event_id":1,"t_s":1.0,"kind":"detected"}', "line 2 has no category, scope, node"),
        (WRITTEN[2].replace('"step":5', '"step":"5"'), "line 2: step is '5', of the wrong type"),
        (WRITTEN[2].replace(',"step":5', ""), "line 2 has no step"),
        (WRITTEN[6].replace('"node":2', '"node":true'), "line 2: node is True, of the wrong type"),
    ],
)
def test_a_malformed_line_names_the_file_and_the_line(tmp_path, line, said):
    _write(tmp_path / "events.jsonl", [WRITTEN[0], line])
    with pytest.raises(DataError) as raised:
        Journal.open(tmp_path)
    assert said in raised.value.message and raised.value.where == f"{tmp_path / 'events.jsonl'}:2"
    assert "restore the run folder" in raised.value.render()


def test_a_malformed_step_line_names_steps_jsonl(tmp_path):
    _write(
        tmp_path / "steps.jsonl", ['{"t_s":1.0,"step":1,"attempt":0}', '{"t_s":2.0,"step":2.5,"attempt":0}']
    )
    with pytest.raises(DataError, match=r"step is 2\.5") as raised:
        Journal.open(tmp_path)
    assert raised.value.where == f"{tmp_path / 'steps.jsonl'}:2"


def test_a_journal_that_does_not_start_with_its_start_says_so(tmp_path):
    _write(tmp_path / "events.jsonl", [WRITTEN[6]])
    with pytest.raises(DataError, match="no job_start"):
        Journal.open(tmp_path).started_at()


def test_records_are_frozen_and_read_by_attribute():
    step = JournalStep(1.0, 3, 0)
    event = JournalEvent(0, 0.0, "detected", "kill", "job", 0, 0.0, "", 0)
    with pytest.raises(AttributeError):
        step.step = 4  # type: ignore[misc]
    assert step.to_json() == {"t_s": 1.0, "step": 3, "attempt": 0} and event.step is None

"""``hetsched replay FILE`` reads the file twice and holds its decisions, not its inputs:
the report is the one replaying the whole file in memory gives (the same command with
its inputs read into a list, ``_holding``), on a clean log, a doctored one and one out
of order; and the replay of an iterator refuses an order it cannot sort."""

from __future__ import annotations

import gzip
import random
import tracemalloc
from pathlib import Path

import orjson
import pytest
from audit_builders import edit_first_input, export, recorded

from streams.cli import main
from streams.profiles.service import service_scheduler
from streams.replay import replay

REPO = Path(__file__).resolve().parents[2]


def _holding(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on the command reads its inputs into a list (what it did before session
    10), instead of reading the file again while it replays."""
    from streams.commands import replay_run as command

    streamed = command._InputsOf
    monkeypatch.setattr(command, "_InputsOf", lambda log: list(streamed(log)))


def _report(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    status = main(["replay", str(path), "--json", "--no-progress", *extra])
    doc = orjson.loads(capsys.readouterr().out)
    doc["replay"].pop("elapsed_s")
    return status, doc


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export(tmp_path_factory.mktemp("log") / "run.jsonl.gz", recorded())


def test_two_passes_report_what_the_whole_file_in_memory_reports(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    streamed = _report(log, capsys)
    assert streamed[0] == 0 and streamed[1]["replay"]["ok"]

    def more_cpu_than_any_node(payload: dict[str, object]) -> None:
        payload["resources"]["cpu_milli"] = 10**9  # type: ignore[index]

    changed = tmp_path / "changed.jsonl.gz"
    cause = edit_first_input(log, changed, "TaskSubmitted", more_cpu_than_any_node)
    changed_streamed = _report(changed, capsys)
    assert changed_streamed[0] == 1
    assert changed_streamed[1]["replay"]["first_mismatch"]["cause"]["event_id"] == cause
    _holding(monkeypatch)
    assert streamed == _report(log, capsys)
    assert changed_streamed == _report(changed, capsys)


def test_a_file_out_of_offset_order_is_read_whole_and_sorted(
        log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header, *lines = gzip.decompress(log.read_bytes()).splitlines(keepends=True)
    random.Random(3).shuffle(lines)
    shuffled = tmp_path / "shuffled.jsonl.gz"
    shuffled.write_bytes(gzip.compress(header + b"".join(lines)))
    status, doc = _report(shuffled, capsys)
    assert status == 2  # every decision matches; the order is an integrity error
    assert doc["replay"]["ok"] and doc["replay"]["mismatches"] == 0
    assert "out of order" in {f["kind"] for f in doc["integrity"]}
    assert doc["replay"] == _report(log, capsys)[1]["replay"]


def test_the_replay_of_an_iterator_out_of_order_is_refused() -> None:
    rec = recorded(12)
    inputs = sorted(rec.inputs, key=lambda r: r.offset)
    order = r"needs the records in \(topic, partition, offset\) order"
    with pytest.raises(ValueError, match=order):
        replay(iter([inputs[1], inputs[0], *inputs[2:]]), rec.decisions,
               service_scheduler("hetsched"))


def test_two_passes_hold_far_less_than_the_inputs(telemetry_audit_file,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path, held = telemetry_audit_file.path, telemetry_audit_file.input_bytes

    def peak(*extra: str) -> int:
        tracemalloc.start()
        try:
            assert main(["replay", str(path), "--no-progress", *extra]) == 0
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            capsys.readouterr()

    streamed = peak()
    _holding(monkeypatch)
    whole = peak()
    assert whole - streamed > held, (whole, streamed, held)  # the inputs were not all held


def test_a_what_if_reads_the_file_once_per_profile_to_the_same_report(
        log: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def what_if() -> dict:
        assert main(["replay", str(log), "--policy", "bestfit", "--json",
                     "--no-progress"]) == 0
        return orjson.loads(capsys.readouterr().out)

    streamed = what_if()
    assert streamed["baseline"]["decisions"] > 0
    _holding(monkeypatch)
    assert what_if() == streamed


def test_an_audit_file_is_written_in_offset_order_or_not_at_all(tmp_path: Path) -> None:
    from streams.audit import logfile
    from streams.audit.logfile import Header

    rec = recorded(12)
    ordered = sorted(rec.records, key=lambda r: (r.topic, r.partition, r.offset))
    path = tmp_path / "audit.jsonl.gz"
    with logfile.writing(path, Header(topics=[], exported_at="")) as add:
        for r in ordered:
            add(r)
    assert logfile.read(path)[1] == ordered
    late = tmp_path / "late.jsonl.gz"
    first, second = ordered[1], ordered[0]
    order = rf"record {second.topic}\[{second.partition}\]@{second.offset} written after "
    with (pytest.raises(ValueError, match=order),
          logfile.writing(late, Header(topics=[], exported_at="")) as add):
        add(first)
        add(second)
    assert not late.exists() and list(tmp_path.iterdir()) == [path]

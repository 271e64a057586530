"""Replay of exported logs: every decision reproduced, a changed input found, old versions read.

No broker: the run is recorded by ``streams.audit.workload`` (the worker's step,
records with offsets), exported to a file, and replayed through the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import orjson
import pytest
from audit_builders import edit_first_input, export, recorded

from schemas.codec import decode, encode
from schemas.events import TaskSubmitted, make_event
from schemas.events.envelope import _MESSAGES, _PAYLOADS, build_message_model
from streams.adapter import apply
from streams.audit import logfile
from streams.audit.chain import EMPTY, HashChain, run_hash
from streams.audit.records import Record
from streams.cli import main
from streams.profiles.service import service_scheduler
from streams.replay import canonical_bytes, replay


def test_an_exported_run_replays_with_every_decision_and_the_hash_matching(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = recorded()
    path = export(tmp_path / "run.jsonl.gz", rec)
    _, records = logfile.read(path)
    assert records == sorted(rec.records, key=lambda r: (r.topic, r.partition, r.offset))
    inputs = [r for r in records if "input-log" in r.topic]
    decisions = [r for r in records if "decisions" in r.topic]
    report = replay(inputs, decisions, service_scheduler("hetsched"))
    assert report.ok and report.mismatches == 0
    assert report.matches == report.recorded == len(rec.decisions) > 60
    assert report.recorded_hash == run_hash({"cell-0": [canonical_bytes(d) for d in decisions]})
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "OK: every recorded decision was reproduced" in out
    assert f"recorded {report.recorded_hash[:16]}  replayed {report.replayed_hash[:16]}  EQUAL" \
        in out


def test_an_empty_log_says_there_is_nothing_to_reproduce(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not "every recorded decision was reproduced", which reads as a proof."""
    path = tmp_path / "empty.jsonl.gz"
    logfile.write(path, logfile.Header(topics=[], exported_at=""), [])
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "OK: the log has no input records: there is nothing to " \
        "reproduce"


def test_the_hash_chain_starts_from_the_empty_digest_and_depends_on_order() -> None:
    assert HashChain().head == EMPTY
    assert run_hash({"c": [b"a", b"b"]}) != run_hash({"c": [b"b", b"a"]})
    assert run_hash({"a": [b"x"], "b": [b"y"]}) == run_hash({"b": [b"y"], "a": [b"x"]})


def test_a_changed_input_event_is_reported_with_the_first_diverging_decision(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = export(tmp_path / "run.jsonl.gz", recorded())

    def needs_more_cpu_than_any_node(payload: dict[str, object]) -> None:
        payload["resources"]["cpu_milli"] = 10**9  # type: ignore[index]

    changed = edit_first_input(path, tmp_path / "changed.jsonl.gz", "TaskSubmitted",
                          needs_more_cpu_than_any_node)
    assert main(["replay", str(tmp_path / "changed.jsonl.gz"), "--json"]) == 1
    report = orjson.loads(capsys.readouterr().out)["replay"]
    first = report["first_mismatch"]
    assert report["mismatches"] >= 1 and report["recorded_hash"] != report["replayed_hash"]
    assert first["cause"]["event_id"] == changed
    assert first["problem"] == "differs"
    paths = {d["path"] for d in first["diffs"]}
    assert {"$.type", "$.payload.node_id"} <= paths
    assert (first["recorded"]["type"], first["replayed"]["type"]) == (
        "TaskPlaced", "TaskUnschedulable")
    assert first["recorded"]["event_id"] == first["replayed"]["event_id"]

    assert main(["replay", str(tmp_path / "changed.jsonl.gz")]) == 1
    text = capsys.readouterr().out
    assert f"caused by: TaskSubmitted {changed}" in text
    assert "$.type: recorded 'TaskPlaced' != replayed 'TaskUnschedulable'" in text


class TaskSubmittedV2(TaskSubmitted):
    """A test-only second version: one new optional field, as the compat rule allows."""

    EVENT_VERSION: ClassVar[int] = 2
    deadline_s: float | None = None


@pytest.fixture
def v2_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register TaskSubmitted v2 for this test only (undone at teardown)."""
    model = build_message_model(TaskSubmittedV2)
    monkeypatch.setitem(_MESSAGES, ("TaskSubmitted", 2), model)
    monkeypatch.setitem(_PAYLOADS, ("TaskSubmitted", 2), TaskSubmittedV2)


def test_a_log_written_with_an_older_schema_version_still_replays(
        tmp_path: Path, v2_registered: None) -> None:
    rec = recorded()  # written by a build that knew only TaskSubmitted v1
    assert all(orjson.loads(r.value or b"")["version"] == 1 for r in rec.inputs)
    path = export(tmp_path / "v1.jsonl.gz", rec)
    _, records = logfile.read(path)
    report = replay([r for r in records if "input-log" in r.topic],
                    [r for r in records if "decisions" in r.topic], service_scheduler("hetsched"))
    assert report.ok and report.matches == len(rec.decisions)

    # and a log mixing both versions: the v2 submission is scheduled like a v1 one
    v1 = next(e for e in rec.envelopes if e.type == "TaskSubmitted")
    v2 = make_event(TaskSubmittedV2(**v1.payload.model_dump(), deadline_s=60.0),
                    source=v1.source, occurred_at=v1.occurred_at, cell=v1.cell,
                    event_id=v1.event_id)
    assert v2.version == 2
    swapped = [Record(r.topic, r.partition, r.offset, r.timestamp_ms, r.key,
                      _encode(v2) if r.event_id == v1.event_id else r.value)
               for r in records if "input-log" in r.topic]
    mixed = replay(swapped, [r for r in records if "decisions" in r.topic],
                   service_scheduler("hetsched"))
    assert mixed.skipped == 0 and mixed.ok


def _encode(env: object) -> bytes:
    from schemas.codec import encode

    return encode(env)  # type: ignore[arg-type]


@pytest.mark.parametrize("every", [1, 7])
def test_a_replay_that_rebuilds_its_cells_from_their_records_still_decides_alike(
        every: int) -> None:
    rec = recorded()
    inputs = [r for r in rec.records if r.topic.endswith("input-log")]
    decisions = [r for r in rec.records if r.topic.endswith("decisions")]
    plain = replay(inputs, decisions, service_scheduler("hetsched"))
    rebuilt = replay(inputs, decisions, service_scheduler("hetsched"), restore_every=every)
    assert plain.ok and rebuilt.ok and rebuilt.replayed_hash == plain.replayed_hash


def _requeue_log() -> list[Record]:
    """Two tasks run on a node that fails while two more wait; a smaller node joins."""
    from datetime import UTC, datetime, timedelta

    from schemas.events import GpuSpec, NodeFailed, NodeRegistered

    t0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    def env(payload: object, t: float, seed: str) -> bytes:
        return encode(make_event(payload, source="test", occurred_at=t0 + timedelta(seconds=t),
                                 cell="cell-0", id_seed=seed))

    def registered(name: str, gpus: int, t: float) -> bytes:
        return env(NodeRegistered(node_id=name, cpu_milli=64000, memory_mib=262144, gpus=[
            GpuSpec(index=i, uuid=f"GPU-{name}-{i}", model="A100", memory_mib=40960,
                    fp32_tflops=19.5, fp16_tflops=312.0, mem_bandwidth_gbps=1555.0,
                    power_limit_w=400.0)
            for i in range(gpus)]), t, f"node/{name}")

    values = [registered("n1", 2, 0)]
    values += [env(TaskSubmitted.model_validate({
        "task_id": f"t{i}", "tenant": "team-a",
        "resources": {"gpu_count": 1, "cpu_milli": 1000, "memory_mib": 1024},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": 1.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}}}), 1 + i,
        f"task/t{i}") for i in range(4)]
    values += [env(NodeFailed(node_id="n1", reason="operator"), 10, "failed/n1"),
               registered("n2", 1, 20)]
    return [Record("hetsched.input-log", 0, i, None, b"cell-0", v) for i, v in enumerate(values)]


def test_a_restart_serves_tasks_queued_again_after_those_that_waited_before_them() -> None:
    """The failed node's tasks go back behind the two waiting; rebuilt from its records
    after every input, a cell must still place the task that waited longest on the node
    that joins (it placed a task queued again instead, before the records kept the order
    tasks were queued in)."""
    from streams.core.cell import Cell

    inputs = _requeue_log()
    cell = Cell("cell-0", service_scheduler("hetsched"))
    decided = [d for r in inputs for d in apply(cell, decode(r.value))]
    decisions = [Record("hetsched.decisions", 0, i, None, b"cell-0", encode(d))
                 for i, d in enumerate(decided)]
    assert [d.payload.task_id for d in decided if d.type == "TaskPlaced"] == ["t0", "t1", "t2"]
    report = replay(inputs, decisions, service_scheduler("hetsched"), restore_every=1)
    assert report.ok, report.first

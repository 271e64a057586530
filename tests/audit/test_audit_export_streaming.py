"""``hetsched export`` writes each record as it reads it from the broker and holds none,
and a replay of the cluster spools to a temporary file the same way.

A recorded cell log (registrations and telemetry, with its decisions) is produced to a
deployment's real topics; the export must give back every record in partition and
offset order and replay to the recorded hash. Its traced memory peak is that of the
Kafka client's fetch buffers (about 5 MB here) plus the integrity check's indexes
(about 150 bytes a record): from a log to one four times longer it must grow by well
under the records' own bytes (the export held them all in a list before session 11,
and the check's indexes took more than a telemetry record's bytes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import sys
import tracemalloc
import uuid
from pathlib import Path

import orjson
import pytest
from audit_builders import tasks

from schemas.topics import DECISIONS, INPUT_LOG
from streams.audit import logfile
from streams.audit.logfile import Header
from streams.audit.records import Record
from streams.audit.source import export
from streams.cli import main

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))  # the log's builder and producer are the bench's


def _cell_log(prefix: str, telemetry: int) -> list[Record]:
    """A one-cell log on partition 1 of two: 20 nodes' registrations, 40 tasks placed and
    finished, their decisions, then ``telemetry`` telemetry records, under ``prefix``'s
    topic names."""
    from replay import telemetry_log

    nodes = [(f"n{i}", 32000, 262144, 8, "A100") for i in range(20)]
    inputs, decisions = telemetry_log(nodes, "bestfit", telemetry, tasks=tasks(40))
    out = [dataclasses.replace(r, topic=prefix + INPUT_LOG, partition=1) for r in inputs]
    return out + [dataclasses.replace(r, topic=prefix + DECISIONS, partition=1)
                  for r in decisions]


def _exported(bootstrap: str, telemetry: int,
              out: Path) -> tuple[str, list[Record], Header, int, int, int]:
    """(prefix, records produced, header, records exported, traced peak, records' bytes)."""
    from audit_memory import produce

    prefix = f"x{uuid.uuid4().hex[:8]}."
    records = _cell_log(prefix, telemetry)
    asyncio.run(produce(bootstrap, prefix, records, partitions=2))
    gc.collect()
    tracemalloc.start()
    try:
        header, count, integrity = export(out, prefix)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert integrity.errors == []
    return prefix, records, header, count, peak, sum(len(r.value or b"") for r in records)


def test_an_export_holds_no_records_and_gives_back_every_one_in_order(
        kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka_bootstrap)
    *_, long_peak, long_bytes = _exported(kafka_bootstrap, 24_000, tmp_path / "long.jsonl.gz")
    out = tmp_path / "audit.jsonl.gz"
    prefix, records, header, count, peak, held = _exported(kafka_bootstrap, 6_000, out)
    assert count == len(records)
    assert long_peak - peak < (long_bytes - held) / 2, (peak, long_peak, held, long_bytes)

    _, back = logfile.read(out)
    by_topic = {t: [r for r in records if r.topic == t] for t in header.topics}
    assert [(r.topic, r.key, r.value) for r in back] == [
        (r.topic, r.key, r.value) for t in sorted(by_topic) for r in by_topic[t]]
    assert [r.offset for r in back if r.topic == prefix + INPUT_LOG] == list(
        range(len(by_topic[prefix + INPUT_LOG])))

    assert main(["replay", str(out), "--json", "--no-progress"]) == 0
    from_file = orjson.loads(capsys.readouterr().out)["replay"]
    assert from_file["ok"] and from_file["matches"] == from_file["recorded"] > 0
    assert from_file["events"] == len(by_topic[prefix + INPUT_LOG])
    # Straight from the cluster: spooled to a temporary file, the same replay.
    assert main(["replay", "--topic-prefix", prefix, "--json", "--no-progress"]) == 0
    live = orjson.loads(capsys.readouterr().out)["replay"]
    from_file.pop("elapsed_s"), live.pop("elapsed_s")
    assert live == from_file


def test_a_topic_the_cluster_lacks_is_refused_by_name_and_nothing_is_written(
        kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A wrong prefix (or a deployment without decisions yet) read as empty: the export
    wrote a file that looked whole and replay said every decision was reproduced."""
    from schemas.admin import ensure_topics
    from schemas.topics import BY_NAME

    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka_bootstrap)
    prefix = f"x{uuid.uuid4().hex[:8]}."
    asyncio.run(ensure_topics(kafka_bootstrap, [dataclasses.replace(
        BY_NAME[INPUT_LOG], name=prefix + INPUT_LOG)], partitions=1))
    out = tmp_path / "audit.jsonl.gz"
    hint = f"(topic prefix {prefix!r}: give the deployment's with --topic-prefix or " \
           "HETSCHED_TOPIC_PREFIX)"
    assert main(["export", "-o", str(out), "--topic-prefix", prefix, "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"hetsched export: {kafka_bootstrap} has no topic {prefix}{DECISIONS} {hint}\n")
    assert list(tmp_path.iterdir()) == []  # no file, no .part
    assert main(["replay", "--topic-prefix", "nosuch.", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"hetsched replay: {kafka_bootstrap} has no topics nosuch.{INPUT_LOG}, "
        f"nosuch.{DECISIONS} (topic prefix 'nosuch.': give the deployment's with "
        "--topic-prefix or HETSCHED_TOPIC_PREFIX)\n")

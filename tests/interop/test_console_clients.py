"""An outside system meets the API with tools no one here wrote.

On a default cluster (a worker and simulated nodes, started as the docs say):
docs/api.md's five-minute section runs word for word with the Kafka console
producer and consumer alone (submit, read the answer, cancel), and afterwards
every record on every catalog topic is valid under the ``jsonschema`` package
against ``schemas/json/``, each topic carrying only the types its row of
docs/api.md lists.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from doc_blocks import REPO, Block, blocks
from interop_records import (
    API_DOC,
    KAFKA_LIBS,
    check_topics,
    described_topics,
    documented_settings,
    documented_types,
)
from live_cluster import WORKER_URL
from operator_tools import Operator, read_payloads, reports_of, wait_until, web_json

from schemas.codec import MAX_EVENT_BYTES
from schemas.events.envelope import new_event_id

pytestmark = pytest.mark.integration

SECTION = "## Integrate from outside in five minutes"


def section_blocks() -> list[Block]:
    """The fenced blocks of docs/api.md's five-minute section, in order."""
    lines = API_DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(SECTION) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("## ")) + 1
    return [b for b in blocks(API_DOC) if start < b.line < end]


def run_section(operator: Operator, scratch: Path) -> list[str]:
    """Write the section's files, run its command blocks as the docs test does (bash -e,
    pipefail, from a folder with the checkout's ``.cache`` linked); their outputs."""
    (scratch / ".cache").symlink_to(REPO / ".cache")
    section = section_blocks()
    for block in section:
        if block.mode == "file":
            (scratch / block.marker[1]).write_text(block.text)
    outputs = []
    for block in section:
        if not block.is_command:
            continue
        assert block.mode == "run" and block.has("cluster"), block.where
        text = block.text.replace("127.0.0.1:9092", operator.bootstrap)
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=scratch,
                              env=dict(os.environ), capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, f"{block.where}:\n{done.stdout}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout)
    return outputs


def decisions_in(output: str) -> list[dict]:
    return [orjson.loads(line) for line in output.splitlines() if line.strip()]


def test_the_five_minute_section_submits_answers_and_cancels_with_console_tools_alone(
        cluster: Operator, tmp_path: Path) -> None:
    sent, answer, cancelled = run_section(cluster, tmp_path)
    assert sent == ""
    first = decisions_in(answer)
    assert first and {d["payload"]["task_id"] for d in first} == {"train-43"}
    assert first[0]["type"] in ("TaskPlaced", "TaskUnschedulable"), first
    assert first[0]["cell"].startswith("cell-")

    long = decisions_in(cancelled)
    assert {d["payload"]["task_id"] for d in long} == {"train-44"}
    assert [d["type"] for d in long] == ["TaskPlaced", "TaskPreempted"], long
    stop = long[-1]["payload"]
    assert stop["requeue"] is False and stop["reason"]["code"] == "cancelled", stop
    assert stop["node_id"] == long[0]["payload"]["node_id"]
    # The node obeyed: its executor reports the task ended, on hetsched.task-status.
    ended = wait_until("train-44's end report", lambda: [
        r for r in reports_of(cluster.bootstrap, "train-44")
        if r["type"] in ("TaskFailed", "TaskFinished")], timeout_s=90, every_s=1)
    assert ended[-1]["payload"]["node_id"] == stop["node_id"]


def test_every_record_the_cluster_wrote_is_valid_and_on_a_topic_that_lists_its_type(
        cluster: Operator) -> None:
    """Runs after the section (same module, same cluster): registrations, telemetry,
    heartbeats, two submissions, a cancellation, decisions and reports."""
    checked = check_topics(cluster.bootstrap)
    assert checked.problems == [], "\n".join(checked.problems[:20])
    for topic in ("hetsched.nodes", "hetsched.tasks", "hetsched.decisions",
                  "hetsched.task-status", "hetsched.input-log"):
        assert checked.records[topic] > 0, (topic, checked.records)
    for schema in ("NodeRegistered.v1.json", "TaskSubmitted.v1.json",
                   "TaskCancelled.v1.json", "TaskPlaced.v1.json", "TaskPreempted.v1.json"):
        assert checked.by_schema[schema] > 0, (schema, checked.by_schema)
    assert set(checked.records) <= set(documented_types())


def test_the_workers_topics_read_back_with_kafka_topics_match_docs_api_md(
        cluster: Operator) -> None:
    """After ``hetsched worker`` with defaults (HETSCHED_PARTITIONS 8): every catalog
    topic as the Kafka admin tool describes it is docs/api.md's row."""
    assert described_topics(cluster.bootstrap) == documented_settings(partitions=8)


# --- malformed records, sent by an outside producer -------------------------------


@dataclass(frozen=True)
class Bad:
    """A malformed record: its key, its value (None: a tombstone), and the dead letter it
    must earn: reason, and text its message must contain."""

    key: str
    value: bytes | None
    reason: str
    says: str


def _task(task_id: str, **change: Any) -> dict[str, Any]:
    """docs/api.md's task.json for ``task_id``, with a fresh event id."""
    doc = orjson.loads(next(b for b in section_blocks() if b.mode == "file").text)
    doc["event_id"] = new_event_id(datetime.now(UTC))
    doc["payload"]["task_id"] = task_id
    for path, value in change.items():
        *parents, leaf = path.split(".")
        node = doc
        for name in parents:
            node = node[name]
        node[leaf] = value
    return doc


def _line(task_id: str, **change: Any) -> bytes:
    return orjson.dumps(_task(task_id, **change))


def malformed() -> list[Bad]:
    """The issue's list: each a mistake an outside producer makes."""
    naive = _line("bad-naive", occurred_at="2026-12-05T10:00:00")
    oversized = _task("bad-oversized")
    oversized["payload"]["labels"] = {"padding": "x" * (MAX_EVENT_BYTES + 1024)}
    return [
        Bad("bad-not-json", b'{"type": "TaskSubmitted", oops', "invalid_json", "line 1"),
        Bad("bad-array", b'[{"type": "TaskSubmitted"}]', "not_an_object", "array"),
        Bad("bad-string-int", _line("bad-string-int", **{"payload.resources.gpu_count": "1"}),
            "validation_failed", "TaskSubmitted"),
        Bad("bad-type", _line("bad-type", type="TaskTeleported"), "unknown_type",
            "'TaskTeleported'"),
        Bad("bad-naive", naive, "validation_failed", "TaskSubmitted"),
        Bad("bad-version", _line("bad-version", version=99), "unknown_version",
            "TaskSubmitted version 99 unknown"),
        Bad("bad-nan", _line("bad-nan").replace(b'"gpu_count":1', b'"gpu_count":NaN'),
            "invalid_json", ""),
        Bad("bad-utf8", _line("bad-utf8").replace(b"bad-utf8", b"bad-utf8-\xe9t\xe9"),
            "invalid_json", "value is not valid UTF-8 at byte offset"),
        Bad("bad-tombstone", None, "invalid_json", "value is null (a tombstone)"),
        Bad("bad-oversized", orjson.dumps(oversized), "validation_failed", "too_large:"),
        Bad("bad-wrong-key", _line("bad-keyed"), "validation_failed",
            "wrong_key: the record's key is 'bad-wrong-key'"),
    ]


def send_with_kcat(bootstrap: str, records: list[Bad], scratch: Path) -> None:
    """Each record as docs/api.md sends with kcat (murmur2 partitioner, keyed); the
    value's exact bytes from a file; a tombstone as an empty value with -Z (NULL)."""
    for n, bad in enumerate(records):
        base = ["kcat", "-P", "-b", bootstrap, "-t", "hetsched.tasks",
                "-X", "partitioner=murmur2_random"]
        if bad.value is None:
            done = subprocess.run([*base, "-Z", "-K", "|"], input=f"{bad.key}|\n".encode(),
                                  capture_output=True, timeout=60, check=False)
        else:
            path = scratch / f"bad-{n}.bin"
            path.write_bytes(bad.value)
            done = subprocess.run([*base, "-k", bad.key, str(path)], capture_output=True,
                                  timeout=60, check=False)
        assert done.returncode == 0, (bad.key, done.stderr)


def send_with_console_producer(bootstrap: str, records: list[Bad]) -> None:
    """One-line records in one run of the console producer, keyed as docs/api.md shows."""
    lines = b"".join(bad.key.encode() + b"|" + bad.value + b"\n" for bad in records
                     if bad.value is not None)
    done = subprocess.run(
        ["java", "-cp", f"{KAFKA_LIBS}/*", "kafka.tools.ConsoleProducer",
         "--bootstrap-server", bootstrap, "--topic", "hetsched.tasks",
         "--property", "parse.key=true", "--property", "key.separator=|"],
        input=lines, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_malformed_records_from_outside_are_dead_lettered_with_reasons_and_nothing_is_lost(
        cluster: Operator, tmp_path: Path) -> None:
    """Runs after the records check (which a malformed record on hetsched.tasks would
    fail). Bytes that a line-based tool cannot carry (invalid UTF-8, a null value, half a
    megabyte) go through kcat, the rest through the console producer; then a valid task,
    sent after them all, is answered, the worker is healthy and ``hetsched check`` finds
    every invariant holding, the refused submissions accounted for."""
    if shutil.which("kcat") is None:
        pytest.fail("kcat is not installed: ./dev test installs it (apt-get install kcat)")
    records = malformed()
    by_kcat = [b for b in records if b.value is None or len(b.value) > 4096
               or b"\xe9" in b.value]
    send_with_kcat(cluster.bootstrap, by_kcat, tmp_path)
    send_with_console_producer(cluster.bootstrap, [b for b in records if b not in by_kcat])
    send_with_console_producer(cluster.bootstrap, [
        Bad("train-46", _line("train-46"), "", "")])

    keys = {b.key for b in records}

    def letters() -> dict[str, dict[str, Any]]:
        found = {base64.b64decode(d["key_b64"]).decode(): d
                 for d in read_payloads(cluster.bootstrap, "hetsched.deadletter")
                 if d.get("key_b64")}
        return found if keys <= set(found) else {}

    found = wait_until("a dead letter for every malformed record", letters, timeout_s=120,
                       every_s=1)
    for bad in records:
        letter = found[bad.key]
        assert (letter["reason"], letter["source_topic"]) == (bad.reason, "hetsched.tasks"), \
            (bad.key, letter)
        assert bad.says in letter["message"], (bad.key, letter["message"])
        assert base64.b64decode(letter["original_b64"]) == (bad.value or b""), bad.key
    assert found["bad-string-int"]["errors"][0]["field"] == "payload.resources.gpu_count"
    assert found["bad-naive"]["errors"][0]["field"] == "occurred_at"
    assert found["bad-oversized"]["errors"][0]["field"] == "(record)"
    assert found["bad-wrong-key"]["errors"][0]["value"] == "bad-wrong-key"

    def answered() -> list[dict[str, Any]]:
        return [d for d in read_payloads(cluster.bootstrap, "hetsched.decisions")
                if d["payload"].get("task_id") == "train-46"]

    assert wait_until("train-46 answered", answered, timeout_s=90, every_s=1)
    assert web_json(f"{WORKER_URL}/health")["status"] == "ok"
    assert not [d for d in read_payloads(cluster.bootstrap, "hetsched.decisions")
                if d["payload"].get("task_id", "").startswith("bad-")]
    checked = cluster.run("check", "--json")
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-2000:]

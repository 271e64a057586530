"""An outside system meets the API with tools no one here wrote.

On a default cluster (a worker and simulated nodes, started as the docs say):
docs/api.md's five-minute section runs word for word with the Kafka console
producer and consumer alone (submit, read the answer, cancel), and afterwards
every record on every catalog topic is valid under the ``jsonschema`` package
against ``schemas/json/``, each topic carrying only the types its row of
docs/api.md lists.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest
from doc_blocks import REPO, Block, blocks
from interop_records import API_DOC, check_topics, documented_types
from operator_tools import Operator, reports_of, wait_until

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

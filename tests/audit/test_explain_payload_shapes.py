"""``explain`` on every legal shape of every record that names a task.

An operator's demo run crashed ``explain`` on a third of its tasks: a failure's
``reason`` is a code string (``'str' object has no attribute 'get'``) and a usage
report's GPUs carry ``gpu_index``, not a placement's ``index`` (``KeyError``). Here
each event type that has a ``task_id`` (taken from the schema registry, so a new
type must be given shapes here) is built through its pydantic model, fully filled
in and with only what it requires, each in both wire forms the decoder accepts
(optional fields written as null, and left out), and explained.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import orjson
import pytest

from schemas.codec import decode, encode
from schemas.deadletter import DeadLetter
from schemas.events import make_event
from schemas.events.base import Event
from schemas.events.decisions import (
    Candidate,
    DecisionReason,
    GpuAssignment,
    PolicyVerdict,
    TaskMigrating,
    TaskPlaced,
    TaskPreempted,
    TaskProbe,
    TaskRejected,
    TaskResized,
    TaskUnschedulable,
)
from schemas.events.envelope import message_model, registered
from schemas.events.status import (
    GpuUsage,
    TaskFailed,
    TaskFinished,
    TaskOverUse,
    TaskProgress,
    TaskStarted,
    TaskUsage,
    TaskUsageV2,
)
from schemas.events.task import (
    DataInput,
    ElasticRange,
    ExecutorSpec,
    ResourceRequest,
    SimulatedWork,
    TaskCancelled,
    TaskFeatures,
    TaskSubmitted,
)
from schemas.topics import DECISIONS, INPUT_LOG
from streams.audit.explain import render, timeline
from streams.audit.records import Record

PREFIX = "t."
TASK = "task-7"
T0 = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
RUN = "01JDQ5V0000000000000000001"
EXECUTOR = ExecutorSpec(kind="simulated", simulated=SimulatedWork(
    duration_s=60, gpu_util_pct=80, gpu_mem_used_mib=4000))
REASON = DecisionReason(code="best_score", message="best of 2 feasible nodes", candidates=[
    Candidate(node_id="node-a", gpu_indices=[0, 1], score=1.5, terms={"fit": 1.0, "fgd": 0.5}),
    Candidate(node_id="node-b", gpu_indices=[3], score=0.5, terms={"fit": 0.5})],
    metrics={"gpu_util_pct": 97.0})
GPUS = [GpuAssignment(index=3, uuid="GPU-3", share_milli=500, memory_mib=8000)]
CAUSE = "01JDQ5V0000000000000000002"
DECIDED = {"decision_id": RUN, "cause_event_id": CAUSE, "task_id": TASK}


def shapes() -> dict[str, list[tuple[str, Event, str]]]:
    """Event type -> (shape name, payload, text its explanation must show)."""
    failed = [(f"reason {code}", TaskFailed(
        task_id=TASK, node_id="node-a", decision_id=RUN, reason=code, exit_code=137,
        message=f"the run ended: {code}", retryable=True, runtime_s=12.5), f"reason: {code}")
        for code in get_args(TaskFailed.model_fields["reason"].annotation)]
    return {
        "TaskSubmitted": [
            ("full", TaskSubmitted(
                task_id=TASK, tenant="research", priority=5, qos="guaranteed",
                resources=ResourceRequest(gpu_count=2, gpu_memory_mib=16000, cpu_milli=4000,
                                          memory_mib=8192, gpu_models=["A100"]),
                elastic=ElasticRange(min_gpus=1, max_gpus=4),
                features=TaskFeatures(profile="compute", expected_duration_s=60, bursty=True),
                workflow_id="wf-1", depends_on=["task-1"],
                inputs=[DataInput(uri="s3://d", size_mib=10, location="node-a")],
                executor=EXECUTOR), "asks 2 GPU"),
            ("minimal", TaskSubmitted(task_id=TASK, tenant="research",
                                      resources=ResourceRequest(gpu_count=0),
                                      executor=EXECUTOR), "asks 0 GPU"),
        ],
        "TaskCancelled": [
            ("full", TaskCancelled(task_id=TASK, reason="no longer needed",
                                   requested_by="alice"), "reason: no longer needed"),
            ("minimal", TaskCancelled(task_id=TASK), "cancelled"),
        ],
        "TaskStarted": [
            ("full", TaskStarted(task_id=TASK, node_id="node-a", decision_id=RUN,
                                 gpu_indices=[3, 5]), "GPUs [3,5]"),
            ("minimal", TaskStarted(task_id=TASK, node_id="node-a", decision_id=RUN),
             "on node-a"),
        ],
        "TaskUsage": [
            ("full", TaskUsage(task_id=TASK, node_id="node-a", window_s=30, gpus=[
                GpuUsage(gpu_index=3, gpu_util_pct=55.5, mem_used_mib=2048)],
                cpu_milli=900, memory_mib=1024), "3: 55.5 % 2048 MiB"),
            ("minimal", TaskUsage(task_id=TASK, node_id="node-a", window_s=30, gpus=[]),
             "on node-a"),
            ("progress", TaskUsageV2(task_id=TASK, node_id="node-a", window_s=30, gpus=[],
                                     progress=TaskProgress(units=4800, rate_per_s=12.5)),
             "progress 4800 units at 12.5/s"),
            ("first count", TaskUsageV2(task_id=TASK, node_id="node-a", window_s=30, gpus=[],
                                        progress=TaskProgress(units=10)),
             "GPUs []; progress 10 units"),
        ],
        "TaskOverUse": [
            ("full", TaskOverUse(task_id=TASK, node_id="node-a", decision_id=RUN, gpu_index=3,
                                 observed_mib=9000, booked_mib=8000, margin_pct=5,
                                 pids=[41, 42]), "GPU 3: 9000 MiB used"),
            ("minimal", TaskOverUse(task_id=TASK, node_id="node-a", decision_id=RUN,
                                    gpu_index=3, observed_mib=9000, booked_mib=8000,
                                    margin_pct=5), "8000 MiB booked"),
        ],
        "TaskFinished": [
            ("full", TaskFinished(task_id=TASK, node_id="node-a", decision_id=RUN,
                                  runtime_s=61.5, exit_code=0), "after 61.5 s"),
            ("minimal", TaskFinished(task_id=TASK, node_id="node-a", decision_id=RUN,
                                     runtime_s=0), "on node-a"),
        ],
        "TaskFailed": [*failed, ("minimal", TaskFailed(task_id=TASK, reason="launch_error"),
                                 "reason: launch_error")],
        "TaskPlaced": [
            ("full", TaskPlaced(**DECIDED, node_id="node-a", gpus=GPUS, cpu_milli=2000,
                                memory_mib=4096, executor=EXECUTOR, reason=REASON),
             "GPUs [3(500m)]"),
            ("minimal", TaskPlaced(**DECIDED, node_id="node-a", gpus=[], executor=EXECUTOR,
                                   reason=DecisionReason(code="best_score")), "on node-a"),
        ],
        "TaskProbe": [
            ("full", TaskProbe(**DECIDED, node_id="node-a", gpus=GPUS, cpu_milli=2000,
                               memory_mib=4096, probe_duration_s=30, executor=EXECUTOR,
                               reason=REASON), "for 30.0 s"),
            ("minimal", TaskProbe(**DECIDED, node_id="node-a", gpus=[], probe_duration_s=0,
                                  executor=EXECUTOR, reason=DecisionReason(code="probe")),
             "on node-a"),
        ],
        "TaskResized": [
            ("full", TaskResized(**DECIDED, node_id="node-a", gpus=GPUS, direction="up",
                                 reason=REASON), "up: on node-a GPUs [3(500m)]"),
            ("minimal", TaskResized(**DECIDED, node_id="node-a", gpus=[], direction="down",
                                    reason=DecisionReason(code="util_low")), "down"),
        ],
        "TaskMigrating": [
            ("full", TaskMigrating(**DECIDED, from_node_id="node-a", from_gpus=GPUS,
                                   to_node_id="node-b", to_gpus=[GpuAssignment(index=0)],
                                   executor=EXECUTOR, reason=REASON),
             "node-a [3(500m)] -> node-b [0(1000m)]"),
            ("minimal", TaskMigrating(**DECIDED, from_node_id="node-a", from_gpus=[],
                                      to_node_id="node-b", to_gpus=[], executor=EXECUTOR,
                                      reason=DecisionReason(code="gpu_failed")),
             "node-a [] -> node-b []"),
        ],
        "TaskPreempted": [
            ("full", TaskPreempted(**DECIDED, node_id="node-a", by_task_id="task-9",
                                   requeue=False, grace_s=5, reason=REASON),
             "for task-9, not requeued"),
            ("minimal", TaskPreempted(**DECIDED, node_id="node-a",
                                      reason=DecisionReason(code="preempted")),
             "back to the queue"),
        ],
        "TaskUnschedulable": [
            ("full", TaskUnschedulable(**DECIDED, resolvable=False, verdicts=[
                PolicyVerdict(policy="fit", code="unschedulable_and_unresolvable",
                              reasons=["no GPU model A100"], nodes=4)],
                nodes_considered=4, message="no node can ever fit it"),
             "message: no node can ever fit it"),
            ("minimal", TaskUnschedulable(**DECIDED, resolvable=True, verdicts=[]),
             "waits in the queue"),
        ],
        "TaskRejected": [
            ("full", TaskRejected(**DECIDED, reason=DecisionReason(
                code="task_id_in_use", message="task task-7 already exists (running on "
                "node-a)")), "already exists (running on node-a)"),
            ("minimal", TaskRejected(**DECIDED, reason=DecisionReason(code="task_id_in_use")),
             "its task id is in use"),
            ("report refused", TaskRejected(**DECIDED, reason=DecisionReason(
                code="not_placed_here")), "status report is ignored"),
        ],
    }


def task_event_types() -> set[str]:
    """Every registered event type whose payload names a task."""
    out = set()
    for event_type, version in registered():
        model = message_model(event_type, version)
        assert model is not None
        if "task_id" in model.model_fields["payload"].annotation.model_fields:
            out.add(event_type)
    return out


def test_every_event_type_that_names_a_task_has_shapes_here() -> None:
    assert set(shapes()) == task_event_types()


def wire_forms(value: bytes) -> list[tuple[str, bytes]]:
    """The record as encoded (optional fields null) and with the null fields of its
    payload left out; both decode (the decoder takes either)."""
    doc = orjson.loads(value)
    doc["payload"] = {k: v for k, v in doc["payload"].items() if v is not None}
    forms = [("nulls written", value), ("nulls left out", orjson.dumps(doc))]
    for name, raw in forms:
        assert not isinstance(decode(raw), DeadLetter), name
    return forms


def cases() -> list[Any]:
    out = []
    for event_type, variants in shapes().items():
        for shape, payload, shown in variants:
            value = encode(make_event(payload, source="test", occurred_at=T0 + timedelta(1),
                                      cell="cell-a", causation_id=CAUSE))
            for form, raw in wire_forms(value):
                out.append(pytest.param(event_type, raw, shown,
                                        id=f"{event_type} {shape}, {form}"))
    return out


def submission() -> Record:
    env = make_event(TaskSubmitted(task_id=TASK, tenant="research",
                                   resources=ResourceRequest(gpu_count=1), executor=EXECUTOR),
                     source="test", occurred_at=T0, cell="cell-a")
    return Record(PREFIX + INPUT_LOG, 0, 0, None, b"cell-a", encode(env))


@pytest.mark.parametrize(("event_type", "value", "shown"), cases())
def test_explain_tells_every_legal_shape_of_a_task_record(event_type: str, value: bytes,
                                                          shown: str) -> None:
    is_decision = "cause_event_id" in orjson.loads(value)["payload"]
    topic = PREFIX + (DECISIONS if is_decision else INPUT_LOG)
    log = [submission(), Record(topic, 0, 1, None, b"cell-a", value)]
    rows = timeline(log, TASK, PREFIX)
    assert [row["type"] for row in rows] == ["TaskSubmitted", event_type]
    assert rows[1]["step"] != "?"
    text = render(TASK, rows)
    assert shown in text, text
    assert "None" not in text, text


@pytest.mark.parametrize("payload", [
    {"task_id": TASK, "gpus": [3, None], "reason": ["x"], "decision_id": ["d"]},
    {"task_id": TASK, "reason": {"candidates": [{"score": "high", "terms": [1]}, 7]}},
    {"task_id": TASK, "verdicts": "all", "message": 5, "window_s": "long"},
], ids=["lists of the wrong items", "candidates without their fields", "scalars for lists"])
def test_a_shape_no_schema_gives_is_still_explained(payload: dict[str, Any]) -> None:
    """A record of a version this build does not know is told as far as it can be."""
    for event_type in sorted(task_event_types()):
        doc = {"event_id": "e1", "type": event_type, "occurred_at": "2026-11-29T14:00:01Z",
               "payload": payload}
        log = [submission(), Record(PREFIX + INPUT_LOG, 0, 1, None, None, orjson.dumps(doc))]
        assert render(TASK, timeline(log, TASK, PREFIX)).startswith(f"task {TASK}\n")


def test_a_payload_that_is_not_an_object_is_left_out() -> None:
    doc = {"event_id": "e1", "type": "TaskFailed", "payload": [TASK]}
    log = [submission(), Record(PREFIX + INPUT_LOG, 0, 1, None, None, orjson.dumps(doc))]
    assert [row["type"] for row in timeline(log, TASK, PREFIX)] == ["TaskSubmitted"]

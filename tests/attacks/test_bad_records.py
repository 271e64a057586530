"""Records the scheduler cannot take, written by principals allowed to write the topic:
bigger than the codec's limit, not JSON, or JSON of the wrong types, on
``hetsched.tasks`` (alice) and ``hetsched.task-status`` (node-a). Each is signed with
the writer's own key, so it is the record itself that is refused, not its origin.

Each must be dead-lettered with its reason (and the field at fault where there is
one); the worker must stay healthy and take the next valid event: an honest
submission is placed, runs on node-b and its end (a task-status event) frees it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest
from attack_cluster import AttackCluster, run_id, simulated, submission

from schemas import make_event
from schemas.codec import MAX_EVENT_BYTES, encode
from schemas.events import ExecutorSpec, TaskFinished
from schemas.ids import new_event_id
from schemas.topics import TASK_STATUS, TASKS

pytestmark = pytest.mark.integration


def _oversize(run: str) -> bytes:
    """A well-formed submission whose environment alone is over the limit."""
    spec = ExecutorSpec(kind="process", argv=["/bin/sh", "-c", "exit 0"],
                        env={"BLOB": "x" * (MAX_EVENT_BYTES + 1024)})
    env = submission(f"huge-{run}", "vision", spec)
    return orjson.dumps(env.model_dump(mode="json"))


def _wrong_types(topic: str, run: str) -> bytes:
    if topic == TASKS:
        doc = orjson.loads(encode(submission(f"typed-{run}", "vision")))
        doc["payload"]["resources"]["gpu_count"] = "lots"
    else:
        now = datetime.now(UTC)
        doc = orjson.loads(encode(make_event(
            TaskFinished(task_id=f"typed-{run}", node_id="node-a",
                         decision_id=new_event_id(now), runtime_s=1.0),
            source="agent/node-a", occurred_at=now)))
        doc["payload"]["runtime_s"] = "forever"
    return orjson.dumps(doc)


CASES = {
    "oversize": ("validation_failed", "too_large:", "(record)"),
    "not JSON": ("invalid_json", "", None),
    "wrong types": ("validation_failed", "", None),
}
WRITER = {TASKS: "alice", TASK_STATUS: "node-a"}
FIELD = {TASKS: "payload.resources.gpu_count", TASK_STATUS: "payload.runtime_s"}


@pytest.mark.parametrize("topic", [TASKS, TASK_STATUS])
@pytest.mark.parametrize("kind", list(CASES))
async def test_a_bad_record_is_dead_lettered_with_its_reason_and_the_worker_goes_on(
    attack_cluster: AttackCluster, topic: str, kind: str,
) -> None:
    cluster, run = attack_cluster, run_id()
    value = {"oversize": _oversize(run), "not JSON": b"{not json " + run.encode(),
             "wrong types": _wrong_types(topic, run)}[kind]
    if kind == "oversize":
        assert len(value) > MAX_EVENT_BYTES
    await cluster.produce_raw(WRITER[topic], topic, value, key=f"bad-{run}".encode())

    letter = await cluster.dead_letter_at(topic, value)
    reason, prefix, field = CASES[kind]
    assert letter.reason == reason, letter.message
    assert letter.message.startswith(prefix), letter.message
    if kind == "wrong types":
        field = FIELD[topic]
    if field is not None:
        assert field in [e.field for e in letter.errors], letter.errors
    assert cluster.healthy()

    honest = submission(f"after-bad-{run}", "vision", simulated(1.0))
    await cluster.produce("alice", TASKS, honest)
    task_id = honest.payload.task_id

    def finished(events) -> bool:
        return any(isinstance(e.payload, TaskFinished) and e.payload.task_id == task_id
                   for e in events)

    await cluster.events(TASK_STATUS, finished, 90)  # placed, run by node-b, reported
    cluster.wait(lambda: task_id not in cluster.running()
                 and task_id not in cluster.state()["cells"]["cell-0"]["queue"],
                 "the worker to take the task's end")
    assert cluster.healthy()
    await cluster.assert_nothing_lost()

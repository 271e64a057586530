"""Attack: a node ends a task that runs on another node.

On the secured broker, with the real worker: node-b, a node principal bound to its
own node id, sends ``TaskFinished`` for alice's task placed on node-a, naming its
own node id and the placement's decision id (every node reads the decisions). The
router checked only that the report's node id was node-b's, so the cell took it,
freed the task's GPU while the task still ran on node-a, and placed the next task
on that GPU; ``hetsched check`` held.

Now the report is answered ``TaskRejected`` ``not_placed_here`` (naming the task and
node-b, not where the task runs) and dead-lettered with where the task is placed;
the task stays running, its GPU stays booked (the next whole-GPU task waits), and
``hetsched check`` of the cluster finds nothing wrong with either task.

It lives in tests/security, not tests/attacks, because it runs a worker of its own:
the attack suite's shared worker reads the same topics of the session broker and
would decide this test's tasks too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from secured_worker import (
    envelope_of,
    hetsched,
    letter_of,
    produce,
    read_until,
    registration,
    start_worker,
    status,
    submission,
)

from schemas.events import TaskFinished, TaskPlaced, TaskRejected, TaskUnschedulable
from schemas.topics import DEADLETTER, DECISIONS, NODES, TASK_STATUS, TASKS

pytestmark = pytest.mark.integration


def _decisions_of(records: list[Any], task: str) -> list[Any]:
    envs = (envelope_of(r) for r in records)
    return [e for e in envs if e is not None and getattr(e.payload, "task_id", None) == task]


async def test_node_b_cannot_end_a_task_placed_on_node_a(
        secure_cluster: Any, processes: Any, tmp_path: Path) -> None:
    cluster = secure_cluster
    worker = start_worker(cluster, processes, tmp_path)
    node_a, node_b = worker.node("node-a"), worker.node("node-b")
    await produce(cluster, "node-a", NODES, [registration(node_a, gpus=1)])
    worker.wait_for_node(node_a)
    first = submission(f"train-{worker.run}", worker.tenant("alice"))
    task = first.payload.task_id
    await produce(cluster, "alice", TASKS, [first])
    records = await read_until(cluster, DECISIONS, lambda rs: any(
        isinstance(e.payload, TaskPlaced) for e in _decisions_of(rs, task)))
    (placed,) = [e.payload for e in _decisions_of(records, task)]
    assert isinstance(placed, TaskPlaced) and placed.node_id == node_a, placed

    forged = status(TaskFinished(task_id=task, node_id=node_b, decision_id=placed.decision_id,
                                 runtime_s=1.0), node_b)
    await produce(cluster, "node-b", TASK_STATUS, [forged])

    letters = await read_until(cluster, DEADLETTER, lambda rs: any(
        (d := letter_of(r)) is not None and d.event_id == forged.event_id for r in rs))
    (letter,) = [d for r in letters if (d := letter_of(r)) is not None
                 and d.event_id == forged.event_id]
    assert letter.reason == "validation_failed"
    assert letter.message.startswith("not_placed_here:"), letter.message
    for named in (task, node_b, node_a, placed.decision_id):  # for the operators
        assert named in letter.message, (named, letter.message)
    assert letter.errors[0].field == "payload.node_id" and letter.errors[0].value == node_b

    records = await read_until(cluster, DECISIONS, lambda rs: any(
        e.causation_id == forged.event_id for e in _decisions_of(rs, task)))
    (answer,) = [e for e in _decisions_of(records, task) if e.causation_id == forged.event_id]
    assert isinstance(answer.payload, TaskRejected)
    assert answer.payload.reason.code == "not_placed_here"
    assert node_b in answer.payload.reason.message
    assert node_a not in answer.payload.reason.message  # every node reads the decisions

    # The GPU is still booked: the next whole-GPU task waits instead of taking it.
    second = submission(f"next-{worker.run}", worker.tenant("alice"))
    await produce(cluster, "alice", TASKS, [second])
    records = await read_until(cluster, DECISIONS, lambda rs: bool(
        _decisions_of(rs, second.payload.task_id)))
    (decided,) = [e.payload for e in _decisions_of(records, second.payload.task_id)]
    assert isinstance(decided, TaskUnschedulable) and decided.resolvable, decided
    cell = worker.cell()
    assert [(r["task"], r["node"]) for r in cell["running"]] == [(task, node_a)]
    assert cell["queue"] == [second.payload.task_id]
    assert worker.proc.poll() is None, worker.log_tail()

    # hetsched check, a real command as the read-only dashboard principal, reads the
    # cluster's topics: nothing about either task is wrong (other tests' records share
    # the session broker, so only this run's tasks are looked at).
    checked = hetsched(cluster, "grafana", "check", "--json", "--no-progress")
    assert checked.returncode in (0, 1), checked.stderr
    report = orjson.loads(checked.stdout)
    ours = {task, second.payload.task_id}
    assert [v for v in report["violations"] if v["task_id"] in ours] == [], report
    assert report["counts"]["reports_refused"] >= 1

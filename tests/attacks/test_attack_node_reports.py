"""Attack: a node ends a task that runs on another node.

On the attack suite's cluster (the secured broker, the real worker): node-b, a node
principal bound to its own node id, sends ``TaskFinished`` for alice's task placed on
node-a, naming its own node id and the placement's decision id (every node reads the
decisions). The router checked only that the report's node id was node-b's, so the
cell took it, freed the task's GPU while the task still ran on node-a, and placed the
next task on that GPU; ``hetsched check`` held.

Now the report is answered ``TaskRejected`` ``not_placed_here`` (naming the task and
node-b, not where the task runs) and dead-lettered with where the task is placed;
the task stays running, its GPU stays booked (the next whole-GPU task waits), and
``hetsched check`` of the cluster finds nothing wrong with either task.

node-a is only registered (one A100, no agent) and the tasks ask for an A100, so the
suite's node-b (T4s) never takes them. Alice cancels both at the end, so a later
worker of the session that re-reads the topics (tests/security) does not place them.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from attack_cluster import (
    NODE,
    AttackCluster,
    a100_node,
    cancellation,
    report,
    run_id,
    whole_a100,
)

from schemas.events import Envelope, TaskFinished, TaskPlaced, TaskRejected, TaskUnschedulable
from schemas.topics import DECISIONS, NODES, TASK_STATUS, TASKS

pytestmark = pytest.mark.integration


def _of(task: str) -> Any:
    """``done`` for :meth:`AttackCluster.events`: some decision about ``task``."""
    return lambda envs: bool(_decisions_of(envs, task))


def _decisions_of(envs: list[Envelope[Any]], task: str) -> list[Envelope[Any]]:
    return [e for e in envs if getattr(e.payload, "task_id", None) == task]


async def test_node_b_cannot_end_a_task_placed_on_node_a(attack_cluster: AttackCluster) -> None:
    cluster, run = attack_cluster, run_id()
    node_a, node_b = "node-a", NODE
    first = whole_a100(f"train-{run}", "vision")
    second = whole_a100(f"next-{run}", "vision")
    task = first.payload.task_id
    ours = {task, second.payload.task_id}
    try:
        await cluster.produce("node-a", NODES, a100_node(node_a, gpus=1))
        # A node keeps its first registration: node-a must not be known with more GPUs
        # (this test registers it first in the attack suite).
        cluster.wait(lambda: any(n["node"] == node_a and len(n["gpus_used_milli"]) == 1
                                 for c in cluster.state()["cells"].values() for n in c["nodes"]),
                     f"{node_a} with one GPU in the worker's state")
        await cluster.produce("alice", TASKS, first)
        envs = await cluster.events(DECISIONS, lambda es: any(
            isinstance(e.payload, TaskPlaced) for e in _decisions_of(es, task)))
        (placed,) = [e.payload for e in _decisions_of(envs, task)]
        assert isinstance(placed, TaskPlaced) and placed.node_id == node_a, placed

        forged = report(TaskFinished(task_id=task, node_id=node_b,
                                     decision_id=placed.decision_id, runtime_s=1.0), node_b)
        await cluster.produce("node-b", TASK_STATUS, forged)

        letter = await cluster.dead_letter(forged.event_id)
        assert letter.reason == "validation_failed"
        assert letter.message.startswith("not_placed_here:"), letter.message
        for named in (task, node_b, node_a, placed.decision_id):  # for the operators
            assert named in letter.message, (named, letter.message)
        assert letter.errors[0].field == "payload.node_id" and letter.errors[0].value == node_b

        envs = await cluster.events(DECISIONS, lambda es: any(
            e.causation_id == forged.event_id for e in _decisions_of(es, task)))
        (answer,) = [e for e in _decisions_of(envs, task) if e.causation_id == forged.event_id]
        assert isinstance(answer.payload, TaskRejected)
        assert answer.payload.reason.code == "not_placed_here"
        assert node_b in answer.payload.reason.message
        assert node_a not in answer.payload.reason.message  # every node reads the decisions

        # The GPU is still booked: the next whole-GPU task waits instead of taking it.
        await cluster.produce("alice", TASKS, second)
        envs = await cluster.events(DECISIONS, _of(second.payload.task_id))
        (decided,) = [e.payload for e in _decisions_of(envs, second.payload.task_id)]
        assert isinstance(decided, TaskUnschedulable) and decided.resolvable, decided
        cell = cluster.state()["cells"]["cell-0"]
        # node-b runs the other attacks' tasks: everything else is as a cluster of node-a.
        assert [(r["task"], r["node"]) for r in cell["running"]
                if r["node"] != NODE] == [(task, node_a)]
        assert cell["queue"] == [second.payload.task_id]
        cluster.assert_running()

        # hetsched check, a real command as the read-only dashboard principal, reads the
        # cluster's topics: nothing about either task is wrong (other tests' records share
        # the session broker, so only this run's tasks are looked at).
        checked = cluster.hetsched("grafana", "check", "--json", "--no-progress")
        assert checked.returncode in (0, 1), checked.stderr
        checked_report = orjson.loads(checked.stdout)
        assert [v for v in checked_report["violations"] if v["task_id"] in ours] == [], \
            checked_report
        assert checked_report["counts"]["reports_refused"] >= 1
    finally:
        # The waiting task first: cancelling the running one first would place it.
        await cluster.produce("alice", TASKS, cancellation(second.payload.task_id),
                              cancellation(task))
    cluster.wait(lambda: not ours & (set(cluster.running())
                                     | set(cluster.state()["cells"]["cell-0"]["queue"])),
                 "alice's cancellations")
    await cluster.assert_nothing_lost()

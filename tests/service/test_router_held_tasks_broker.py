"""On the real broker: a submission the router reads before the cluster's first node
registration is placed once the node registers, not refused for good.

The node's id is chosen to share the task's partition number, so the registration
is read by the same router partition (the held task is released at the end of a
transaction of its own partition: see ``Router.finish``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.partitioner import murmur2
from service_builders import node, task
from service_kafka import Deployment, wait_healthy

from schemas.events import TaskPlaced

pytestmark = pytest.mark.integration


def _partition(key: str, partitions: int) -> int:
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


async def test_a_task_submitted_before_the_first_node_is_placed_once_it_registers(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    worker = dep.start_worker(processes, "worker")
    wait_healthy(worker, processes)
    task_id = "early-task"
    want = _partition(task_id, dep.partitions)
    node_id = next(n for n in (f"node-{i}" for i in range(100))
                   if _partition(n, dep.partitions) == want)
    await dep.produce("hetsched.tasks", [task(task_id, 1, t=1, seed=dep.prefix)])
    await asyncio.sleep(3.0)  # read and held: no cell has a node yet
    await dep.produce("hetsched.nodes", [node(node_id, "A100", 2, t=2, seed=dep.prefix)])
    decisions = await dep.read("hetsched.decisions", lambda r: len(r) >= 1, 60)
    assert [type(d.payload).__name__ for d in decisions] == ["TaskPlaced"], \
        processes.log_of(worker)
    placed = decisions[0].payload
    assert isinstance(placed, TaskPlaced)
    assert (placed.task_id, placed.node_id) == (task_id, node_id)

"""On the real broker: a submission the router reads before the cluster's first node
registration is placed once the node registers, not refused for good.

The held task is released by a transaction of its own router partition
(``Router.finish``): either the one that reads the registration when the node's id
shares the task's partition number, or, when the node's id hashes elsewhere and the
task's partition reads nothing more, the idle transaction ``eos`` runs for a quiet
partition whose handler ``has_waiting`` (``TransactionalProcessor._quiet``).
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


@pytest.mark.parametrize("same_partition", [True, False],
                         ids=["registration on the task's partition",
                              "registration on another partition, task's partition quiet"])
async def test_a_task_submitted_before_the_first_node_is_placed_once_it_registers(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any,
        same_partition: bool):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    worker = dep.start_worker(processes, "worker")
    wait_healthy(worker, processes)
    task_id = "early-task"
    want = _partition(task_id, dep.partitions)
    node_id = next(n for n in (f"node-{i}" for i in range(100))
                   if (_partition(n, dep.partitions) == want) == same_partition)
    await dep.produce("hetsched.tasks", [task(task_id, 1, t=1, seed=dep.prefix)])
    await asyncio.sleep(3.0)  # read and held: no cell has a node yet
    await dep.produce("hetsched.nodes", [node(node_id, "A100", 2, t=2, seed=dep.prefix)])
    # Well before the router's 60 s hold bound: released because a node is known.
    decisions = await dep.read("hetsched.decisions", lambda r: len(r) >= 1, 30)
    assert [type(d.payload).__name__ for d in decisions] == ["TaskPlaced"], \
        processes.log_of(worker)
    placed = decisions[0].payload
    assert isinstance(placed, TaskPlaced)
    assert (placed.task_id, placed.node_id) == (task_id, node_id)

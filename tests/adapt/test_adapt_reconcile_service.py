"""End to end on the real broker: booked against observed GPU memory (issue 8).

* A simulated node process (agent and executor in one, as in production) carries a
  ``foreign-mem`` fault: a process no task owns holds 60 GiB of its A100's 80. The
  agent's per-process accounting reports it as ``GpuTelemetry.foreign_mem_mib``; the
  worker reserves it, so half a GPU is refused while a fifth still fits.
* A task whose process holds twice the memory it booked is reported by its node
  (``TaskOverUse``) and, with ``HETSCHED_OVERUSE_POLICY=stop``, stopped by the worker.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from service_kafka import Deployment, start_healthy_worker, start_node, wait_for_nodes

from schemas.events import (
    GpuTelemetry,
    TaskPlaced,
    TaskPreempted,
    TaskSubmitted,
    TaskUnschedulable,
    make_event,
)

pytestmark = pytest.mark.integration


def _task(dep: Deployment, task_id: str, share: int) -> Any:
    payload = TaskSubmitted.model_validate({
        "task_id": task_id, "tenant": "team-a",
        "resources": {"gpu_count": 1, "gpu_share_milli": share, "cpu_milli": 500,
                      "memory_mib": 512},
        "features": {"profile": "compute", "expected_duration_s": 600.0},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": 600.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}},
    })
    return make_event(payload, source="cli/test", occurred_at=datetime.now(UTC),
                      id_seed=f"{dep.prefix}reconcile/{task_id}")


async def test_a_strangers_gpu_memory_reported_by_the_node_is_never_booked(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    worker = start_healthy_worker(dep, processes)
    node_id = f"{dep.prefix}node-x"
    start_node(dep, processes, node_id, "A100x1", tmp_path / "node", name="node",
               heartbeat_s="1", args=("--fault", "foreign-mem:0:61440@0"),
               HETSCHED_TRACES=str(tmp_path / "no-traces"))
    wait_for_nodes([worker.web_port], 1)

    def seen(records: list[Any]) -> bool:
        return any(isinstance(r.payload, GpuTelemetry) and r.payload.node_id == node_id
                   and r.payload.foreign_mem_mib for r in records)

    # once the worker's input log holds the report, later submissions come after it
    log = await dep.read("hetsched.input-log", seen, 60)
    assert seen(log), [type(r.payload).__name__ for r in log]
    await dep.produce("hetsched.tasks", [_task(dep, "half", 500), _task(dep, "fifth", 200)])
    decisions = await dep.read(
        "hetsched.decisions",
        lambda r: {d.payload.task_id for d in r} >= {"half", "fifth"}, 60)
    by_task = {d.payload.task_id: type(d.payload) for d in decisions}
    assert by_task["fifth"] is TaskPlaced, by_task
    assert by_task["half"] is TaskUnschedulable, by_task  # 40 GiB > the 20 GiB left
    assert worker.poll() is None


async def test_a_task_over_its_booking_is_reported_by_its_node_and_stopped_by_policy(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    worker = start_healthy_worker(dep, processes, HETSCHED_OVERUSE_POLICY="stop")
    node_id = f"{dep.prefix}node-y"
    start_node(dep, processes, node_id, "A100x1", tmp_path / "node", name="node",
               heartbeat_s="1", args=("--set", "executor.usage_interval_s=1"),
               HETSCHED_TRACES=str(tmp_path / "no-traces"))
    wait_for_nodes([worker.web_port], 1)
    greedy = _task(dep, "greedy", 250)  # books 20 480 MiB of the A100 ...
    work = greedy.payload.executor.simulated.model_copy(update={"gpu_mem_used_mib": 40000})
    greedy = make_event(  # ... and its process holds 40 000
        greedy.payload.model_copy(update={
            "executor": greedy.payload.executor.model_copy(update={"simulated": work})}),
        source="cli/test", occurred_at=datetime.now(UTC), id_seed=f"{dep.prefix}greedy")
    await dep.produce("hetsched.tasks", [greedy])
    status = await dep.read(
        "hetsched.task-status",
        lambda r: any(type(s.payload).__name__ == "TaskOverUse" for s in r), 60)
    (over, *_) = [s.payload for s in status if type(s.payload).__name__ == "TaskOverUse"]
    assert (over.task_id, over.observed_mib, over.booked_mib) == ("greedy", 40000, 20480)
    decisions = await dep.read(
        "hetsched.decisions",
        lambda r: any(isinstance(d.payload, TaskPreempted) for d in r), 60)
    (stop,) = [d.payload for d in decisions if isinstance(d.payload, TaskPreempted)]
    assert stop.task_id == "greedy" and not stop.requeue, stop
    assert worker.poll() is None

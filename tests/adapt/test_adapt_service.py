"""End to end on the real broker: a node dies mid-run, another joins; every task finishes.

A real worker process (heartbeat timeout 4 s, ticks every 1 s) schedules
simulated node processes (``python -m agents.cli run --simulate``) that
heartbeat every 0.5 s. The test SIGKILLs the node running tasks, starts a
fresh node, and waits until every task reported ``TaskFinished``: the dead
node's tasks were evicted on the heartbeat timeout (driven by Tick events)
and re-placed, and the new node received work.
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
    TaskFinished,
    TaskPlaced,
    TaskPreempted,
    TaskStarted,
    TaskSubmitted,
    make_event,
)

pytestmark = pytest.mark.integration

TASK_S = 12.0
"""Long enough that the survivor is still busy when the dead node's tasks come back."""


def _start_node(dep: Deployment, processes: Any, node_id: str, tmp: Any,
                gpus: str = "A100x2") -> Any:
    return start_node(dep, processes, node_id, gpus, tmp / node_id)


def _task(dep: Deployment, task_id: str, i: int, models: tuple[str, ...] = ()) -> Any:
    payload = TaskSubmitted.model_validate({
        "task_id": task_id, "tenant": "team-a",
        "resources": {"gpu_count": 1, "cpu_milli": 1000, "memory_mib": 1024,
                      "gpu_models": list(models)},
        "features": {"profile": "compute", "expected_duration_s": TASK_S},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": TASK_S, "gpu_util_pct": 80.0, "gpu_mem_used_mib": 1024}},
    })
    return make_event(payload, source="cli/test", occurred_at=datetime.now(UTC),
                      id_seed=f"{dep.prefix}adapt/{task_id}/{i}")


async def test_a_killed_nodes_tasks_are_re_placed_and_finish_and_a_new_node_gets_work(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    worker = start_healthy_worker(dep, processes, HETSCHED_HEARTBEAT_TIMEOUT_S="4")
    port = worker.web_port
    victim_id, survivor_id, joiner_id = (f"{dep.prefix}node-{n}" for n in "abc")
    victim = _start_node(dep, processes, victim_id, tmp_path)
    _start_node(dep, processes, survivor_id, tmp_path)
    wait_for_nodes([port], 2)

    tasks = [f"job-{i}" for i in range(4)]
    await dep.produce("hetsched.tasks", [_task(dep, t, i) for i, t in enumerate(tasks)])
    decisions = await dep.read("hetsched.decisions",
                               lambda r: sum(isinstance(d.payload, TaskPlaced) for d in r) >= 4,
                               60)
    first = {d.payload.task_id: d.payload.node_id for d in decisions
             if isinstance(d.payload, TaskPlaced)}
    on_victim = sorted(t for t, n in first.items() if n == victim_id)
    assert on_victim, (first, processes.log_of(worker))

    await dep.read("hetsched.task-status",
                   lambda r: {s.payload.task_id for s in r if isinstance(s.payload, TaskStarted)}
                   >= set(tasks), 60)
    victim.kill()  # SIGKILL mid-run: no goodbye, heartbeats just stop
    victim.wait(10)
    # The joiner is the only L40S node and one task accepts only L40S, so the
    # joiner must receive work whatever the timing of the survivor's tasks and
    # the eviction (which may re-place the dead node's tasks on either node).
    _start_node(dep, processes, joiner_id, tmp_path, gpus="L40Sx2")
    wait_for_nodes([port], 1, names=[joiner_id])
    await dep.produce("hetsched.tasks", [_task(dep, "job-l40s", 9, models=("L40S",))])
    tasks.append("job-l40s")

    status = await dep.read(
        "hetsched.task-status",
        lambda r: {s.payload.task_id for s in r if isinstance(s.payload, TaskFinished)}
        >= set(tasks), 90)
    finished = {s.payload.task_id: s.payload.node_id for s in status
                if isinstance(s.payload, TaskFinished)}
    if not set(finished) >= set(tasks):
        seen = await dep.read("hetsched.decisions", lambda r: False, 2)
        trail = [(type(d.payload).__name__, d.payload.task_id, getattr(d.payload, "node_id", ""),
                  getattr(getattr(d.payload, "reason", None), "code", "")) for d in seen]
        st = [(type(x.payload).__name__, x.payload.task_id, x.payload.node_id,
               getattr(x.payload, "reason", "")) for x in status
              if type(x.payload).__name__ != "TaskUsage"]
        raise AssertionError(f"{finished}\n{trail}\n{st}")
    assert all(finished[t] != victim_id for t in on_victim)

    decisions = await dep.read("hetsched.decisions", lambda r: False, 3)
    evicted = {d.payload.task_id for d in decisions if isinstance(d.payload, TaskPreempted)
               and d.payload.reason.code == "heartbeat_timeout"}
    assert evicted == set(on_victim)
    replaced = [d.payload for d in decisions if isinstance(d.payload, TaskPlaced)
                and d.payload.task_id in on_victim]
    assert len(replaced) == 2 * len(on_victim)  # first placement, then exactly one re-placement
    trail = [(type(d.payload).__name__, d.payload.task_id, getattr(d.payload, "node_id", ""),
              d.occurred_at.isoformat()) for d in decisions]
    assert finished["job-l40s"] == joiner_id
    assert joiner_id in {d.payload.node_id for d in decisions
                         if isinstance(d.payload, TaskPlaced)}, (trail, [
        (type(x.payload).__name__, x.payload.task_id, x.payload.node_id, x.occurred_at.isoformat())
        for x in status if type(x.payload).__name__ != "TaskUsage"])
    assert worker.poll() is None

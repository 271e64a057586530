"""End to end on the real broker: a worker process schedules a small heterogeneous cluster.

The decisions it publishes must be exactly what the pure cell step decides for
the input log it recorded (read back from Kafka), and finishing tasks must free
capacity for the queued ones. Task status comes from the test itself, playing
the executor.
"""

from __future__ import annotations

from typing import Any

import pytest
from service_builders import CLUSTER, TASK_MIX, finished, node, task
from service_kafka import Deployment, get_json, wait_for_nodes, wait_healthy

from schemas.codec import decode, encode
from schemas.events import TaskPlaced, TaskUnschedulable
from streams.adapter import apply
from streams.core.cell import Cell
from streams.core.queue import QueueConfig
from streams.profiles.service import service_scheduler
from streams.settings import WorkerSettings

pytestmark = pytest.mark.integration
PREDICTS = WorkerSettings.predict_runtimes
"""The worker's queue by default (``HETSCHED_PREDICT_RUNTIMES`` unset) predicts run times."""


def replay(input_log: list[bytes]) -> list[bytes]:
    """The pure step over a recorded input log: the decisions it must have produced."""
    cells: dict[str, Cell] = {}
    out = []
    for raw in input_log:
        env = decode(raw)
        cell = cells.setdefault(env.cell, Cell(env.cell, service_scheduler("hetsched"),
                                                QueueConfig(predict_runtimes=PREDICTS)))
        out += [encode(d) for d in apply(cell, env)]
    return out


async def assert_decisions_match_replay(dep: Deployment, decisions: list[bytes]) -> None:
    log = await dep.read("hetsched.input-log", lambda r: False, timeout_s=3, raw=True)
    assert replay(log) == decisions


async def place_the_task_mix(dep: Deployment, scheduler_port: int) -> list[bytes]:
    """Register :data:`CLUSTER`, submit :data:`TASK_MIX`, return the decisions' raw records
    once there are as many as tasks (the scheduler's ``/state`` shows the nodes first:
    tasks before any node are unschedulable)."""
    await dep.produce("hetsched.nodes", [node(n, m, g, t=i) for i, (n, m, g) in
                                         enumerate(CLUSTER)])
    wait_for_nodes([scheduler_port], len(CLUSTER))
    await dep.produce("hetsched.tasks", [task(t, g, s, mdl, t=10 + i, seed=dep.prefix)
                                         for i, (t, g, s, mdl) in enumerate(TASK_MIX)])
    return await dep.read("hetsched.decisions", lambda r: len(r) >= len(TASK_MIX), 60, raw=True)


async def test_a_worker_places_a_mixed_workload_like_the_pure_core(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    worker = dep.start_worker(processes, "worker")
    wait_healthy(worker, processes)
    raw = await place_the_task_mix(dep, worker.web_port)
    decisions = [decode(r).payload for r in raw]
    assert sorted(d.task_id for d in decisions) == sorted(t[0] for t in TASK_MIX), \
        processes.log_of(worker)
    kinds = {d.task_id: type(d).__name__ for d in decisions}
    assert kinds["frac-1"] == kinds["multi-4"] == kinds["t4-only"] == "TaskPlaced"
    assert kinds["h100-only"] == "TaskUnschedulable"
    await assert_decisions_match_replay(dep, raw)

    queued = {d.task_id for d in decisions if isinstance(d, TaskUnschedulable) and d.resolvable}
    assert queued
    # Play the executor: finish every running task until the queue is empty (the two
    # 8-GPU jobs fit the one 8-GPU node only one after the other).
    placed = [d for d in decisions if isinstance(d, TaskPlaced)]
    later: set[str] = set()
    for _ in range(len(queued) + 1):
        if later >= queued:
            break
        await dep.produce("hetsched.task-status", [
            finished(p.task_id, p.node_id, p.decision_id, t=100 + len(raw) + i, seed=dep.prefix)
            for i, p in enumerate(placed)])
        seen = len(raw)
        raw = await dep.read("hetsched.decisions", lambda r, n=seen: len(r) > n, 60, raw=True)
        placed = [p for p in (decode(r).payload for r in raw[seen:]) if isinstance(p, TaskPlaced)]
        later |= {p.task_id for p in placed}
    assert later == queued, processes.log_of(worker)
    await assert_decisions_match_replay(dep, raw)

    state = get_json(worker.web_port, "/state")
    assert set(state["cells"]["cell-0"]["queue"]) == set()
    metrics = get_json_text(worker.web_port)
    assert 'hetsched_decisions_total{type="TaskPlaced"}' in metrics
    assert worker.poll() is None


def get_json_text(port: int) -> str:
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()

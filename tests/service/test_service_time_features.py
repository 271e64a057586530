"""End to end on the real broker: preemption, workflows and fair share through the service.

The pure core's queue (priority, weighted fair share), preemption and workflow
dependencies are tested in ``tests/timesched``; here a real ``hetsched worker``
process schedules real simulated node processes (``python -m agents.cli run
--simulate A100x2``) whose executors run, stop and report the tasks, and the
test reads what happened from the decisions and task-status topics:

* preemption: best-effort work fills the cluster, a guaranteed task arrives;
  the cheapest best-effort task (never the burstable one) is preempted, the
  executor stops it, and it is queued again, re-placed and finishes;
* workflow: stage 2 waits for stage 1's ``TaskFinished``, then lands on stage
  1's node (the test makes that node tie with another on packing);
* fair share: two tenants with equal weights queue more than fits, one
  submitting all its tasks first; placements alternate between them instead
  of following submission order.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from service_kafka import Deployment, start_healthy_worker, start_node, wait_for_nodes

from agents.backends.simulated import relative_speed
from schemas.events import (
    Envelope,
    Event,
    TaskFailed,
    TaskFinished,
    TaskPlaced,
    TaskPreempted,
    TaskSubmitted,
    TaskUnschedulable,
    make_event,
)
from schemas.gpu_catalog import get_model

pytestmark = pytest.mark.integration

A100_SPEED = relative_speed(get_model("A100"), get_model("V100M32"))
"""Simulated tasks state their duration on a V100; the nodes here are A100s."""


def _start(dep: Deployment, processes: Any, nodes: list[str], tmp: Any) -> Any:
    """A worker and ``nodes`` simulated A100x2 nodes, all registered."""
    worker = start_healthy_worker(dep, processes)
    for node_id in nodes:
        start_node(dep, processes, node_id, "A100x2", tmp / node_id)
    wait_for_nodes([worker.web_port], len(nodes))
    return worker


def _task(dep: Deployment, task_id: str, wall_s: float, *, tenant: str = "team-a",
          qos: str = "burstable", priority: int = 0, gpus: int = 1,
          depends_on: tuple[str, ...] = ()) -> Envelope[Event]:
    """A simulated task that runs ``wall_s`` seconds on an A100 (features known: no probe)."""
    payload = TaskSubmitted.model_validate({
        "task_id": task_id, "tenant": tenant, "qos": qos, "priority": priority,
        "resources": {"gpu_count": gpus, "cpu_milli": 1000, "memory_mib": 1024,
                      "gpu_models": ["A100"]},
        "features": {"profile": "compute", "expected_duration_s": wall_s},
        "depends_on": list(depends_on),
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": wall_s * A100_SPEED, "gpu_util_pct": 80.0,
            "gpu_mem_used_mib": 1024}},
    })
    return make_event(payload, source="cli/test", occurred_at=datetime.now(UTC),
                      id_seed=f"{dep.prefix}time/{task_id}")


def _of(records: list[Envelope[Event]], kind: type, task: str | None = None) -> list[Any]:
    return [r.payload for r in records if isinstance(r.payload, kind)
            and (task is None or r.payload.task_id == task)]


def _trail(records: list[Envelope[Event]]) -> list[tuple[str, ...]]:
    """Decisions and status events in topic order, for assertion messages."""
    return [(type(r.payload).__name__, r.payload.task_id, getattr(r.payload, "node_id", "") or "",
             getattr(r.payload, "by_task_id", "") or "") for r in records
            if type(r.payload).__name__ != "TaskUsage"]


async def _placed(dep: Deployment, tasks: set[str], timeout_s: float = 30.0) -> list[Any]:
    """Read the decisions until every task in ``tasks`` has a TaskPlaced."""
    out = await dep.read("hetsched.decisions",
                         lambda r: {p.task_id for p in _of(r, TaskPlaced)} >= tasks, timeout_s)
    assert {p.task_id for p in _of(out, TaskPlaced)} >= tasks, _trail(out)
    return out


async def test_a_guaranteed_task_preempts_the_cheapest_best_effort_task_which_runs_again(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    _start(dep, processes, [f"{dep.prefix}node-{n}" for n in "ab"], tmp_path)

    # Fill the four GPUs; each batch starts after the previous one, so be-3 has run the
    # shortest of the best-effort tasks (the cheapest victim) and bu-1 shorter still
    # (cheaper, but burstable: never a victim of this kind of preemption).
    await dep.produce("hetsched.tasks", [_task(dep, t, 12.0, qos="best_effort")
                                         for t in ("be-1", "be-2")])
    await _placed(dep, {"be-1", "be-2"})
    await dep.produce("hetsched.tasks", [_task(dep, "be-3", 3.0, qos="best_effort")])
    await _placed(dep, {"be-3"})
    await dep.produce("hetsched.tasks", [_task(dep, "bu-1", 12.0)])
    first = await _placed(dep, {"bu-1"})
    first_placed = {p.task_id: p for p in _of(first, TaskPlaced)}
    assert not _of(first, TaskPreempted), _trail(first)

    urgent = _task(dep, "urgent", 2.0, qos="guaranteed", priority=100)
    await dep.produce("hetsched.tasks", [urgent])

    # The urgent task finishes, then be-3 is placed again and finishes its second run.
    status = await dep.read(
        "hetsched.task-status",
        lambda r: {p.task_id for p in _of(r, TaskFinished)} >= {"urgent", "be-3"}, 40)
    decisions = await dep.read("hetsched.decisions", lambda r: False, 2)
    trail = (_trail(decisions), _trail(status))
    assert {p.task_id for p in _of(status, TaskFinished)} >= {"urgent", "be-3"}, trail

    by_urgent = [r.payload for r in decisions if r.causation_id == urgent.event_id]
    assert [type(p) for p in by_urgent] == [TaskPreempted, TaskPlaced], trail
    preempted, placed = by_urgent
    assert (preempted.task_id, preempted.by_task_id, preempted.requeue) == (
        "be-3", "urgent", True), trail
    assert preempted.node_id == first_placed["be-3"].node_id
    assert (placed.task_id, placed.node_id) == ("urgent", preempted.node_id), trail
    assert [g.index for g in placed.gpus] == [g.index for g in first_placed["be-3"].gpus]
    assert {p.task_id for p in _of(decisions, TaskPreempted)} == {"be-3"}, trail

    # The executor stopped the preempted run (it reports the kill under the preemption's
    # id, and that run never finishes); the task ran again under a new placement.
    killed = _of(status, TaskFailed, "be-3")
    assert [(f.reason, f.decision_id) for f in killed] == [
        ("killed", preempted.decision_id)], trail
    be3_runs = _of(decisions, TaskPlaced, "be-3")
    assert len(be3_runs) == 2, trail
    assert [f.decision_id for f in _of(status, TaskFinished, "be-3")] == [
        be3_runs[1].decision_id], trail
    assert [f.decision_id for f in _of(status, TaskFinished, "urgent")] == [placed.decision_id]
    # Re-placed when the urgent task's end freed its GPU (nothing else ended before).
    urgent_done = next(r for r in status if isinstance(r.payload, TaskFinished)
                       and r.payload.task_id == "urgent")
    assert be3_runs[1].cause_event_id == urgent_done.event_id, trail


async def test_a_workflow_stage_waits_for_its_predecessor_and_runs_on_its_node(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    _start(dep, processes, [f"{dep.prefix}node-{n}" for n in "ab"], tmp_path)

    # A short filler takes the node the scheduler prefers among empty ones; stage 1 (two
    # GPUs) must go to the other. When stage 1 finishes both nodes are empty again, so
    # packing ties and only the workflow's locality can pick stage 1's node.
    await dep.produce("hetsched.tasks", [_task(dep, "filler", 1.0)])
    await _placed(dep, {"filler"})
    await dep.produce("hetsched.tasks", [_task(dep, "stage-1", 4.0, gpus=2),
                                         _task(dep, "stage-2", 1.0, depends_on=("stage-1",))])
    status = await dep.read(
        "hetsched.task-status",
        lambda r: {p.task_id for p in _of(r, TaskFinished)} >= {"filler", "stage-1",
                                                                "stage-2"}, 40)
    decisions = await dep.read("hetsched.decisions", lambda r: False, 2)
    trail = (_trail(decisions), _trail(status))
    assert {p.task_id for p in _of(status, TaskFinished)} >= {"stage-1", "stage-2"}, trail

    filler = _of(decisions, TaskPlaced, "filler")[0]
    stage1 = _of(decisions, TaskPlaced, "stage-1")
    assert len(stage1) == 1 and stage1[0].node_id != filler.node_id, trail
    waiting = _of(decisions, TaskUnschedulable, "stage-2")
    assert waiting and waiting[0].verdicts[0].policy == "workflow", trail
    assert "stage-1" in waiting[0].verdicts[0].reasons[0]
    # Placed in answer to stage 1's TaskFinished, not before; then it ran and finished.
    stage1_done = next(r for r in status if isinstance(r.payload, TaskFinished)
                       and r.payload.task_id == "stage-1")
    stage2 = _of(decisions, TaskPlaced, "stage-2")
    assert len(stage2) == 1 and stage2[0].cause_event_id == stage1_done.event_id, trail
    done_order = [p.task_id for p in _of(status, TaskFinished)]
    assert done_order.index("filler") < done_order.index("stage-1"), trail  # the tie above
    assert stage2[0].node_id == stage1[0].node_id, trail
    assert [f.decision_id for f in _of(status, TaskFinished, "stage-2")] == [
        stage2[0].decision_id]


async def test_two_tenants_with_equal_weights_take_turns_not_submission_order(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any, tmp_path: Any):
    dep = Deployment(kafka_bootstrap, project_env, tmp_path)
    _start(dep, processes, [f"{dep.prefix}node-a"], tmp_path)

    # A third tenant fills both GPUs; tenant A queues all its tasks before tenant B
    # queues any, so first-come-first-served would place A's four tasks first.
    await dep.produce("hetsched.tasks", [_task(dep, f"c-{i}", 3.0, tenant="team-c")
                                         for i in range(2)])
    await _placed(dep, {"c-0", "c-1"})
    a = [f"a-{i}" for i in range(4)]
    b = [f"b-{i}" for i in range(4)]
    await dep.produce("hetsched.tasks", [_task(dep, t, 1.0, tenant="team-a") for t in a])
    await dep.read("hetsched.decisions",
                   lambda r: {p.task_id for p in _of(r, TaskUnschedulable)} >= set(a), 20)
    await dep.produce("hetsched.tasks", [_task(dep, t, 1.0, tenant="team-b") for t in b])
    decisions = await _placed(dep, set(a + b), 40)

    queued = {p.task_id for p in _of(decisions, TaskUnschedulable)}
    assert queued >= set(a + b), _trail(decisions)  # every one of them had to wait
    order = [p.task_id[0] for p in _of(decisions, TaskPlaced) if p.task_id[0] in "ab"]
    assert len(order) == 8, _trail(decisions)
    # Equal weights: at every point the two tenants have been served alike (the one
    # with fewer GPUs in use gets the next free GPU).
    for n in range(1, len(order) + 1):
        assert abs(order[:n].count("a") - order[:n].count("b")) <= 1, order

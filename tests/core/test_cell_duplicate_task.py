"""A submission of a task id the cell already has is rejected, and nothing else changes.

Before, ``Cell.submit`` answered a duplicate with nothing at all: the second
submitter got no decision and no dead letter, and a tenant that used an id first
made every later submission of it from another tenant vanish. Now the cell answers
with one ``TaskIdTaken`` (the adapter's ``TaskRejected``): the task's own tenant
learns which task holds the id and its state, any other tenant only that the id is
in use. The same submission read twice (a producer's retry) still decides nothing.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from schemas.codec import decode, encode
from schemas.events import GpuSpec, NodeRegistered, TaskFinished, TaskSubmitted, make_event
from streams.adapter import apply
from streams.audit.records import Record
from streams.core.cell import Cell, TaskIdTaken
from streams.core.events import NodeAdded, TaskArrived
from streams.core.queue import TaskMeta
from streams.core.request import TaskRequest
from streams.profiles.service import service_scheduler
from streams.replay import replay

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _cell() -> Cell:
    cell = Cell("cell-0", service_scheduler("hetsched"))
    cell.add_node(NodeAdded("e-node", "node-a", 64000, 262144, 2, "T4"), now_s=1.0)
    return cell


def _records(cell: Cell) -> dict[str, Any]:
    """Everything the cell persists, and its numpy state, to compare before and after."""
    s = cell.state
    return {"tasks": {t: copy.deepcopy(cell.task_record(t)) for t in cell.tasks},
            "nodes": {n: cell.node_record(n) for n in cell.nodes},
            "meta": cell.meta_record(), "queue": len(cell.queue),
            "gpu_free": s.gpu_free[: s.n].copy(), "cpu_free": s.cpu_free[: s.n].copy(),
            "arrivals": s.arrivals}


def _assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    for key in ("gpu_free", "cpu_free"):
        assert np.array_equal(before.pop(key), after.pop(key)), key
    assert before == after


def _submit(cell: Cell, event_id: str, task: str, tenant: str, now_s: float) -> list[Any]:
    return cell.submit(TaskArrived(event_id, TaskRequest(task, 1000, 1024, 1, 1000)), {},
                       TaskMeta(tenant=tenant), now_s)


def test_a_running_tasks_id_submitted_again_by_its_tenant_is_rejected_naming_it() -> None:
    cell = _cell()
    (placed,) = _submit(cell, "e-first", "train-1", "team-a", 2.0)
    assert placed.node == "node-a"
    cell.dirty_tasks.clear()
    cell.dirty_nodes.clear()
    before = _records(cell)
    out = _submit(cell, "e-second", "train-1", "team-a", 3.0)
    assert out == [TaskIdTaken("train-1", "task train-1 already exists (running on node-a), "
                                          "submitted in event e-first; this submission is "
                                          "ignored: submit it under a new task id")]
    _assert_same(before, _records(cell))
    assert not cell.dirty_tasks and not cell.dirty_nodes and cell.now_s == 2.0


def test_another_tenant_learns_only_that_the_id_is_in_use() -> None:
    cell = _cell()
    _submit(cell, "e-first", "train-1", "team-a", 2.0)
    before = _records(cell)
    (taken,) = _submit(cell, "e-squat", "train-1", "team-b", 3.0)
    assert taken == TaskIdTaken("train-1", "task id already in use")
    _assert_same(before, _records(cell))


def test_the_same_submission_read_again_is_a_retry_and_decides_nothing() -> None:
    cell = _cell()
    _submit(cell, "e-first", "train-1", "team-a", 2.0)
    before = _records(cell)
    assert _submit(cell, "e-first", "train-1", "team-a", 2.0) == []
    _assert_same(before, _records(cell))


@pytest.mark.parametrize(("record_tenant", "asker", "message"), [
    ("team-a", "team-a", "task train-1 already exists (finished), submitted in event e-first; "
                         "this submission is ignored: submit it under a new task id"),
    ("team-a", "team-b", "task id already in use"),
    (None, "team-a", "task id already in use"),
], ids=["its tenant is told it finished", "another tenant is told nothing of it",
        "records that never kept the tenant tell no one"])
def test_a_finished_tasks_id_stays_taken_after_a_restore(record_tenant: str | None,
                                                          asker: str, message: str) -> None:
    cell = _cell()
    _submit(cell, "e-first", "train-1", "team-a", 2.0)
    from streams.core.events import TaskEnded

    cell.end(TaskEnded("e-end", "train-1"), now_s=5.0)
    tasks = {t: dict(cell.task_record(t)) for t in cell.tasks}
    if record_tenant is None:
        del tasks["train-1"]["tenant"]  # written before the tenant of a done task was kept
    rebuilt = Cell.restore("cell-0", service_scheduler("hetsched"), cell.meta_record(),
                           [(n, cell.node_record(n)) for n in cell.nodes], tasks.items())
    assert _submit(rebuilt, "e-again", "train-1", asker, 6.0) == [TaskIdTaken("train-1",
                                                                               message)]
    assert _submit(rebuilt, "e-first", "train-1", "team-a", 6.0) == []


# ---- through the adapter: the schema decision, and replay reproduces it --------------

def _env(payload: Any, t: float, seed: str) -> Any:
    return make_event(payload, source="test", occurred_at=T0 + timedelta(seconds=t),
                      cell="cell-0", id_seed=seed)


def _submission(task: str, tenant: str, t: float, seed: str) -> Any:
    return _env(TaskSubmitted.model_validate({
        "task_id": task, "tenant": tenant,
        "resources": {"gpu_count": 1, "cpu_milli": 1000, "memory_mib": 1024},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": 60.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}}}), t, seed)


def _node() -> Any:
    return _env(NodeRegistered(node_id="node-a", cpu_milli=64000, memory_mib=262144, gpus=[
        GpuSpec(index=i, uuid=f"GPU-a-{i}", model="T4", memory_mib=16384, fp32_tflops=8.1,
                fp16_tflops=65.0, mem_bandwidth_gbps=320.0, power_limit_w=70.0)
        for i in range(2)]), 0, "node")


def test_the_rejections_are_decisions_that_replay_equal() -> None:
    cell = Cell("cell-0", service_scheduler("hetsched"))
    first = _submission("train-1", "team-a", 1, "first")
    log = [_node(), first, _submission("train-1", "team-a", 2, "again"),
           _submission("train-1", "team-b", 3, "squat"), first]
    decided = [(env, d) for env in log for d in apply(cell, env)]
    (placed,) = [d for _, d in decided if d.type == "TaskPlaced"]
    log += [_env(TaskFinished(task_id="train-1", node_id="node-a", exit_code=0, runtime_s=4.0,
                              decision_id=placed.event_id), 5, "fin"),
            _submission("train-1", "team-a", 6, "after")]
    decided += [(env, d) for env in log[5:] for d in apply(cell, env)]
    rejected = [(env, d) for env, d in decided if d.type == "TaskRejected"]
    assert [(env.event_id, d.payload.reason.message) for env, d in rejected] == [
        (log[2].event_id, "task train-1 already exists (running on node-a), submitted in "
                          f"event {log[1].event_id}; this submission is ignored: submit it "
                          "under a new task id"),
        (log[3].event_id, "task id already in use"),
        (log[6].event_id, f"task train-1 already exists (finished), submitted in event "
                          f"{log[1].event_id}; this submission is ignored: submit it under a "
                          "new task id")]
    for env, d in rejected:
        assert d.payload.cause_event_id == d.causation_id == env.event_id
        assert d.correlation_id == env.event_id  # its own chain, not the first task's
        assert d.payload.reason.code == "task_id_in_use"
    assert [d.type for _, d in decided].count("TaskPlaced") == 1
    inputs = [Record("hetsched.input-log", 0, i, None, b"cell-0", encode(e))
              for i, e in enumerate(log)]
    decisions = [Record("hetsched.decisions", 0, i, None, b"cell-0", encode(d))
                 for i, (_, d) in enumerate(decided)]
    for every in (0, 1):
        report = replay(inputs, decisions, service_scheduler("hetsched"), restore_every=every)
        assert report.ok and report.mismatches == 0, report.first
        assert report.matches == report.recorded == len(decided)
        assert report.replayed_hash == report.recorded_hash
    assert decode(encode(rejected[0][1])) == rejected[0][1]

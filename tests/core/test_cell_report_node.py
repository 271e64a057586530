"""A node's finish or failure report ends a task only from the node it is placed on.

The router binds a report's ``node_id`` to the principal that signed it, but not to
where the task runs: node-b could send ``TaskFinished`` for a task running on node-a
under its own node id, the cell freed the task's booking while it still ran on node-a,
and the next submission was placed on the same GPU. Now the cell refuses such a report
(``ReportRefused``, the adapter's ``TaskRejected`` with ``not_placed_here``) and changes
nothing; a report naming no decision of the placement is refused the same way. The
refusal is a decision of the pure step, so replay reproduces it.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from schemas.codec import encode
from schemas.events import (
    GpuSpec,
    NodeRegistered,
    TaskFailed,
    TaskFinished,
    TaskPlaced,
    TaskRejected,
    TaskSubmitted,
    make_event,
)
from streams.adapter import apply, refused_report
from streams.audit.records import Record
from streams.core.cell import Cell, ReportRefused
from streams.core.events import NodeAdded, TaskArrived
from streams.core.queue import TaskMeta
from streams.core.request import TaskRequest
from streams.profiles.service import service_scheduler
from streams.replay import replay

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _records(cell: Cell) -> dict[str, Any]:
    """Everything the cell persists, and its numpy state, to compare before and after."""
    s = cell.state
    return {"tasks": {t: copy.deepcopy(cell.task_record(t)) for t in cell.tasks},
            "nodes": {n: cell.node_record(n) for n in cell.nodes},
            "meta": cell.meta_record(), "queue": len(cell.queue),
            "gpu_free": s.gpu_free[: s.n].copy().tolist(), "arrivals": s.arrivals}


# ---- the cell alone -----------------------------------------------------------------

def _cell() -> Cell:
    cell = Cell("cell-0", service_scheduler("hetsched"))
    cell.add_node(NodeAdded("e-a", "node-a", 64000, 262144, 1, "T4"), now_s=1.0)
    cell.add_node(NodeAdded("e-b", "node-b", 64000, 262144, 1, "T4"), now_s=1.0)
    return cell


def _submit(cell: Cell, event_id: str, task: str, now_s: float) -> list[Any]:
    return cell.submit(TaskArrived(event_id, TaskRequest(task, 1000, 1024, 1, 1000)), {},
                       TaskMeta(tenant="team-a"), now_s)


def test_the_cell_refuses_a_report_from_another_node_and_changes_nothing() -> None:
    cell = _cell()
    (placed,) = _submit(cell, "e-1", "train-1", 2.0)
    other = "node-b" if placed.node == "node-a" else "node-a"
    cell.dirty_tasks.clear()
    before = _records(cell)
    assert cell.refuse_report("train-1", other, "run-1", "run-1") == [
        ReportRefused("train-1", other, placed.node, "run-1")]
    assert cell.refuse_report("train-1", placed.node, None, "run-1") == [
        ReportRefused("train-1", placed.node, placed.node, "run-1")]
    assert _records(cell) == before and not cell.dirty_tasks
    assert cell.refuse_report("train-1", placed.node, "run-1", "run-1") is None
    assert cell.refuse_report("train-1", placed.node, "any", None) is None  # run unknown
    assert cell.refuse_report("unknown", other, None, None) is None


def test_a_queued_task_is_placed_nowhere_so_no_node_may_end_it() -> None:
    cell = _cell()
    _submit(cell, "e-1", "train-1", 2.0)
    _submit(cell, "e-2", "train-2", 2.0)
    _submit(cell, "e-3", "train-3", 2.0)  # both GPUs taken: queued
    assert cell.tasks["train-3"].status == "queued"
    assert cell.refuse_report("train-3", "node-a", None, None) == [
        ReportRefused("train-3", "node-a", None, None)]


# ---- through the adapter: the decision, the dead letter's refusal, replay ------------

def _env(payload: Any, t: float, seed: str, source: str = "test",
         correlation_id: str | None = None) -> Any:
    return make_event(payload, source=source, occurred_at=T0 + timedelta(seconds=t),
                      cell="cell-0", id_seed=seed, correlation_id=correlation_id)


def _node(node: str) -> Any:
    return _env(NodeRegistered(node_id=node, cpu_milli=64000, memory_mib=262144, gpus=[
        GpuSpec(index=0, uuid=f"GPU-{node}-0", model="T4", memory_mib=16384, fp32_tflops=8.1,
                fp16_tflops=65.0, mem_bandwidth_gbps=320.0, power_limit_w=70.0)]), 0, node)


def _submission(task: str, t: float) -> Any:
    return _env(TaskSubmitted.model_validate({
        "task_id": task, "tenant": "team-a",
        "resources": {"gpu_count": 1, "cpu_milli": 1000, "memory_mib": 1024},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": 60.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}}}), t, task)


def test_a_finish_from_another_node_is_rejected_and_the_gpu_stays_booked() -> None:
    cell = Cell("cell-0", service_scheduler("hetsched"))
    log = [_node("node-a"), _submission("train-1", 1)]
    decided = [(env, d) for env in log for d in apply(cell, env)]
    (placed,) = [d.payload for _, d in decided if isinstance(d.payload, TaskPlaced)]
    assert placed.node_id == "node-a"
    before = _records(cell)

    chain = decided[0][1].correlation_id  # the task's: an executor's report names it
    forged = [
        _env(TaskFinished(task_id="train-1", node_id="node-b", decision_id=placed.decision_id,
                          runtime_s=1.0), 2, "forged-finish", "executor/node-b", chain),
        _env(TaskFailed(task_id="train-1", node_id="node-b", decision_id=placed.decision_id,
                        reason="gpu_failed", retryable=True), 3, "forged-lost",
             "executor/node-b"),
        _env(TaskFailed(task_id="train-1", node_id="node-a", reason="exit_nonzero"), 4,
             "no-decision", "executor/node-a"),
    ]
    for env in forged:
        (answer,) = apply(cell, env)
        decided.append((env, answer))
        assert isinstance(answer.payload, TaskRejected)
        assert answer.payload.reason.code == "not_placed_here"
        assert answer.payload.cause_event_id == answer.causation_id == env.event_id
        # Its own chain: ``submit --wait`` of the task must not take it for the task's.
        assert answer.correlation_id == env.event_id
        assert answer.payload.task_id == "train-1"
        assert _records(cell) == before  # still running on node-a, its GPU still booked
    messages = [d.payload.reason.message for _, d in decided[-3:]]
    assert messages[:2] == [
        "TaskFinished of task train-1 from node node-b ignored: the task is not placed on "
        "node-b",
        "TaskFailed of task train-1 from node node-b ignored: the task is not placed on "
        "node-b"]
    assert messages[2] == ("TaskFailed of task train-1 from node node-a ignored: it names no "
                           "decision of the task's placement")
    # Every node reads the decisions: where the task runs is for the dead letter only.
    assert all("node-a" not in m for m in messages[:2])
    refusal = refused_report(cell, decided[-3][1], forged[0])
    assert refusal is not None and refusal.code == "not_placed_here"
    assert refusal.field == "payload.node_id" and refusal.value == "node-b"
    assert f"placed on node node-a by decision {placed.decision_id}" in refusal.message
    assert "train-1" in refusal.message and "node-b" in refusal.message
    placement = next(d for _, d in decided if d.type == "TaskPlaced")
    assert refused_report(cell, placement, log[1]) is None  # a placement refuses nothing

    # node-b joins with a free GPU, a second task takes it; a third finds none free
    # (train-1 still holds node-a's), and queues.
    more = [_node("node-b"), _submission("train-2", 5), _submission("train-3", 6)]
    for env in more:
        decided += [(env, d) for d in apply(cell, env)]
    log += forged + more
    kinds = [(d.type, d.payload.task_id, getattr(d.payload, "node_id", None))
             for _, d in decided[-2:]]
    assert kinds == [("TaskPlaced", "train-2", "node-b"), ("TaskUnschedulable", "train-3",
                                                          None)]
    # node-a's own finish of its placement ends train-1 and frees its GPU for train-3.
    real = _env(TaskFinished(task_id="train-1", node_id="node-a",
                             decision_id=placed.decision_id, runtime_s=7.0), 7, "real",
                "executor/node-a")
    after = apply(cell, real)
    decided += [(real, d) for d in after]
    log.append(real)
    assert [(d.type, d.payload.task_id, d.payload.node_id) for d in after] == [
        ("TaskPlaced", "train-3", "node-a")]
    assert cell.tasks["train-1"].status == "done" and cell.tasks["train-1"].ok

    inputs = [Record("hetsched.input-log", 0, i, None, b"cell-0", encode(e))
              for i, e in enumerate(log)]
    decisions = [Record("hetsched.decisions", 0, i, None, b"cell-0", encode(d))
                 for i, (_, d) in enumerate(decided)]
    for every in (0, 1):
        report = replay(inputs, decisions, service_scheduler("hetsched"), restore_every=every)
        assert report.ok and report.mismatches == 0, report.first
        assert report.matches == report.recorded == len(decided)


def test_a_queued_task_is_not_ended_by_any_nodes_report() -> None:
    cell = Cell("cell-0", service_scheduler("hetsched"))
    for env in (_node("node-a"), _submission("train-1", 1), _submission("train-2", 2)):
        apply(cell, env)
    assert cell.tasks["train-2"].status == "queued"
    report = _env(TaskFinished(task_id="train-2", node_id="node-a",
                               decision_id="01M90Y2WVPHHFS9C8WCD9Q0GKZ", runtime_s=1.0), 3,
                  "queued-finish")
    (answer,) = apply(cell, report)
    assert answer.payload.reason.code == "not_placed_here"
    assert cell.tasks["train-2"].status == "queued" and "train-2" in cell.queue
    refusal = refused_report(cell, answer, report)
    assert refusal is not None and "placed on no node" in refusal.message
    assert np.all(cell.state.gpu_free[: cell.state.n] >= 0)

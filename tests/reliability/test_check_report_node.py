"""``check`` flags a placed task ended by a report its placement's node never sent.

A node could send ``TaskFinished`` for a task running on another node under its own
node id; the cell took it as the task's end, freed its booking while it still ran,
and placed the next task on the same GPU. ``check`` saw a finished task and a free
GPU and said every invariant held. Now a report from another node than the
placement's (or naming no decision of it) that the cell did not refuse
(``TaskRejected`` ``not_placed_here``) is a ``task_ended_by_other_node`` violation,
and the task keeps its booking, so the next placement on its GPU is an over-commit.
"""

from __future__ import annotations

from typing import Any

from reliability_builders import PREFIX, append, event

from schemas.events import (
    DecisionReason,
    GpuAssignment,
    TaskFailed,
    TaskFinished,
    TaskPlaced,
    TaskRejected,
    TaskSubmitted,
)
from schemas.events.base import Event
from schemas.ids import derive_event_id
from schemas.topics import DECISIONS, INPUT_LOG, TASKS
from streams.audit.records import Record
from streams.audit.workload import T0, node_event
from streams.check import findings as f
from streams.check.findings import Report
from streams.check.invariants import check

EXECUTOR = {"kind": "simulated", "simulated": {"duration_s": 1.0, "gpu_util_pct": 50.0,
                                                "gpu_mem_used_mib": 100}}


class Log:
    """A one-cell log written input by input, each decision after its cause."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.n = 0
        for node in ("node-a", "node-b"):
            env = node_event(node, 64000, 524288, 2, "A100", T0)
            append(self.records, INPUT_LOG, env.model_copy(update={"cell": "cell-0"}))

    def input(self, payload: Event) -> str:
        self.n += 1
        env = event(payload, f"input-{self.n}")
        append(self.records, INPUT_LOG, env)
        return str(env.event_id)

    def decide(self, cause: str, payload_type: type[Event], **fields: Any) -> str:
        self.n += 1
        decision_id = derive_event_id(T0, f"decision-{self.n}")
        payload = payload_type(decision_id=decision_id, cause_event_id=cause, **fields)
        append(self.records, DECISIONS, event(payload, f"decision-{self.n}",
                                              causation_id=cause, event_id=decision_id))
        return str(decision_id)

    def submit_and_place(self, task: str, node: str, gpu: int) -> str:
        submitted = TaskSubmitted.model_validate({
            "task_id": task, "tenant": "t", "resources": {"gpu_count": 1},
            "executor": EXECUTOR})
        append(self.records, TASKS, event(submitted, f"submitted-{task}"))
        return self.decide(self.input(submitted), TaskPlaced, task_id=task, node_id=node,
                           gpus=[GpuAssignment(index=gpu)], executor=EXECUTOR,
                           reason=DecisionReason(code="test"))

    def refuse(self, cause: str, task: str) -> None:
        self.decide(cause, TaskRejected, task_id=task, reason=DecisionReason(
            code="not_placed_here", message="refused"))

    def check(self) -> Report:
        return check(self.records, PREFIX, settled=True)


def test_a_finish_from_another_node_taken_by_the_cell_is_a_violation() -> None:
    log = Log()
    run = log.submit_and_place("task-1", "node-a", gpu=0)
    log.input(TaskFinished(task_id="task-1", node_id="node-b", decision_id=run, runtime_s=1.0))
    report = log.check()
    assert report.by_invariant()[f.ENDED_BY_OTHER_NODE] == 1, report.render()
    (violation,) = report.violations
    assert violation.task_id == "task-1" and violation.cell == "cell-0"
    assert violation.message == (
        f"TaskFinished from node-b (decision {run}) was taken for task task-1, but its "
        f"placement {run} is on node-a, which had not reported it")
    assert report.task_states["task-1"] == "running"  # it still runs on node-a
    # The cell freed the GPU and placed the next task on it: a double booking.
    log.submit_and_place("task-2", "node-a", gpu=0)
    report = log.check()
    assert report.by_invariant()[f.OVER_COMMIT] == 1, report.render()
    assert report.max_share_milli == 2000


def test_a_failure_that_names_no_decision_of_the_placement_is_a_violation() -> None:
    log = Log()
    run = log.submit_and_place("task-1", "node-a", gpu=0)
    log.input(TaskFailed(task_id="task-1", node_id="node-a", reason="gpu_failed"))
    report = log.check()
    assert [v.invariant for v in report.violations] == [f.ENDED_BY_OTHER_NODE]
    assert f"names no decision of its placement {run} there" in report.violations[0].message
    assert report.task_states["task-1"] == "running"


def test_a_report_the_cell_refused_changes_nothing_and_holds() -> None:
    log = Log()
    run = log.submit_and_place("task-1", "node-a", gpu=0)
    forged = log.input(TaskFinished(task_id="task-1", node_id="node-b", decision_id=run,
                                    runtime_s=1.0))
    log.refuse(forged, "task-1")
    report = log.check()
    assert report.ok, report.render()
    assert report.task_states["task-1"] == "running"
    assert report.counts["reports_refused"] == 1
    log.submit_and_place("task-2", "node-a", gpu=1)  # the other GPU: no over-commit
    log.input(TaskFinished(task_id="task-1", node_id="node-a", decision_id=run, runtime_s=2.0))
    report = log.check()
    assert report.ok, report.render()
    assert report.task_states == {"task-1": "finished", "task-2": "running"}


def test_each_refused_report_is_counted_and_a_taken_id_is_no_refused_report() -> None:
    """Two refused reports count two (a count set instead of added passed), and a
    TaskRejected for a task id in use, answered to a submission, is not a refused
    report: only ``not_placed_here`` rejections are (``or`` for ``and`` passed)."""
    log = Log()
    run = log.submit_and_place("task-1", "node-a", gpu=0)
    for n in (1, 2):
        forged = log.input(TaskFinished(task_id="task-1", node_id="node-b", decision_id=run,
                                        runtime_s=float(n)))
        log.refuse(forged, "task-1")
    again = log.input(TaskSubmitted.model_validate({
        "task_id": "task-1", "tenant": "t", "resources": {"gpu_count": 1},
        "executor": EXECUTOR}))
    log.decide(again, TaskRejected, task_id="task-1", reason=DecisionReason(
        code="task_id_in_use", message="task task-1 already exists"))
    report = log.check()
    assert report.ok, report.render()
    assert report.counts["reports_refused"] == 2
    assert report.task_states["task-1"] == "running"

"""``check`` takes an executor's report the way the cell does: by the run it names.

A preempted task placed again gets the executor's ``TaskFailed(killed)`` for its
old run after its new placement; a moved task's old run may report a finish; a run
lost to its node is queued again. The checker took each of those reports as the
end of the task (a demo run said 6 failed where all 356 finished), and released the
new placement's booking with it.
"""

from __future__ import annotations

from typing import Any

from reliability_builders import PREFIX, append, event

from schemas.events import (
    DecisionReason,
    GpuAssignment,
    TaskFailed,
    TaskFinished,
    TaskMigrating,
    TaskPlaced,
    TaskPreempted,
    TaskStarted,
    TaskSubmitted,
    Tick,
)
from schemas.events.base import Event
from schemas.ids import derive_event_id
from schemas.topics import DECISIONS, INPUT_LOG, TASKS
from streams.audit.records import Record
from streams.audit.workload import T0, node_event
from streams.check import findings as f
from streams.check.invariants import check
from streams.check.task_runs import REQUEUED_FAILURES
from streams.core.adapt.engine import RETRYABLE_FAILURES

TASK = "task-1"
EXECUTOR = {"kind": "simulated", "simulated": {"duration_s": 1.0, "gpu_util_pct": 50.0,
                                                "gpu_mem_used_mib": 100}}
REASON = DecisionReason(code="test")


class Story:
    """A one-cell log written input by input, each decision after the input that caused it."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.n = 0
        node = node_event("node-a", 64000, 524288, 4, "A100", T0)
        append(self.records, INPUT_LOG, node.model_copy(update={"cell": "cell-0"}))
        submitted = TaskSubmitted.model_validate({
            "task_id": TASK, "tenant": "t", "resources": {"gpu_count": 1},
            "executor": EXECUTOR})
        append(self.records, TASKS, event(submitted, "submitted-topic"))
        self.cause = self.input(submitted)

    def input(self, payload: Event) -> str:
        self.n += 1
        env = event(payload, f"input-{self.n}")
        append(self.records, INPUT_LOG, env)
        return str(env.event_id)

    def tick(self) -> str:
        """An input that causes a decision without naming the task (a preemption's cause)."""
        return self.input(Tick(seq=self.n, interval_s=1.0))

    def decide(self, cause: str, kind: type[Event], **fields: Any) -> str:
        self.n += 1
        decision_id = derive_event_id(T0, f"decision-{self.n}")
        payload = kind(decision_id=decision_id, cause_event_id=cause, task_id=TASK,
                       reason=REASON, **fields)
        append(self.records, DECISIONS, event(payload, f"decision-{self.n}", causation_id=cause,
                                              event_id=decision_id))
        return str(decision_id)

    def place(self, cause: str, gpu: int) -> str:
        return self.decide(cause, TaskPlaced, node_id="node-a",
                           gpus=[GpuAssignment(index=gpu)], executor=EXECUTOR)

    def started(self, run: str) -> str:
        return self.input(TaskStarted(task_id=TASK, node_id="node-a", decision_id=run))

    def finished(self, run: str) -> str:
        return self.input(TaskFinished(task_id=TASK, node_id="node-a", decision_id=run,
                                       runtime_s=1.0))

    def failed(self, run: str | None, reason: str) -> str:
        return self.input(TaskFailed(task_id=TASK, node_id="node-a", decision_id=run,
                                     reason=reason, retryable=True))

    def state(self) -> tuple[str, dict[str, int], int]:
        report = check(self.records, PREFIX)
        assert report.ok, report.render()
        return report.task_states[TASK], dict(report.failure_reasons), report.max_share_milli


def preempted_and_placed_again() -> tuple[Story, str, str, str]:
    """Placed (run 1), preempted, placed again (run 2) before the kill report came:
    the story, run 1, the preemption, run 2."""
    s = Story()
    first = s.place(s.cause, gpu=0)
    s.started(first)
    kill = s.decide(s.tick(), TaskPreempted, node_id="node-a", requeue=True)
    second = s.place(s.tick(), gpu=1)
    return s, first, kill, second


def test_the_kill_report_of_a_preemption_confirms_it_and_the_new_run_finishes() -> None:
    s, _, kill, second = preempted_and_placed_again()
    s.failed(kill, "killed")
    assert s.state()[:2] == ("running", {})  # the new run still holds its GPU
    s.finished(second)
    assert s.state()[:2] == ("finished", {})


def test_a_kill_report_does_not_release_the_new_runs_booking() -> None:
    """Run 2's booking was released with the kill report of run 1, so a second task
    placed on run 2's GPU was not an over-commit."""
    s, _, kill, _ = preempted_and_placed_again()
    s.failed(kill, "killed")
    intruder = TaskPlaced(decision_id=derive_event_id(T0, "intruder"), cause_event_id=s.tick(),
                          task_id="task-2", node_id="node-a", gpus=[GpuAssignment(index=1)],
                          executor=EXECUTOR, reason=REASON)
    append(s.records, DECISIONS, event(intruder, "intruder", causation_id=intruder.cause_event_id,
                                       event_id=intruder.decision_id))
    report = check(s.records, PREFIX)
    assert report.by_invariant()[f.OVER_COMMIT] == 1, report.render()
    assert report.counts["reports_confirms_preemption"] == 1


def test_a_report_of_a_stopped_or_replaced_run_is_stale() -> None:
    s, first, _, second = preempted_and_placed_again()
    s.finished(first)  # the preempted run's own finish, late
    assert s.state()[0] == "running"
    s.started(second)
    moved = s.decide(s.tick(), TaskMigrating, from_node_id="node-a",
                     from_gpus=[GpuAssignment(index=1)], to_node_id="node-a",
                     to_gpus=[GpuAssignment(index=2)], executor=EXECUTOR)
    s.failed(second, "exit_nonzero")  # the moved run's failure: the task runs on
    assert s.state()[:2] == ("running", {})
    s.finished(moved)
    assert s.state()[:2] == ("finished", {})


def test_a_run_lost_to_its_node_queues_the_task_again() -> None:
    s = Story()
    run = s.place(s.cause, gpu=0)
    lost = s.failed(run, "node_failed")
    assert s.state()[:2] == ("queued", {})
    again = s.place(lost, gpu=1)
    s.finished(again)
    assert s.state()[:2] == ("finished", {})


def test_a_failure_of_the_current_run_or_of_no_run_fails_the_task() -> None:
    s = Story()
    s.failed(s.place(s.cause, gpu=0), "oom")
    assert s.state()[:2] == ("failed", {"oom": 1})
    s = Story()
    s.failed(None, "launch_error")
    assert s.state()[:2] == ("failed", {"launch_error": 1})


def test_the_failures_that_requeue_are_the_cells() -> None:
    assert REQUEUED_FAILURES == RETRYABLE_FAILURES

"""The checker's GPU ledger across preemptions, and its 1000-milli bound, milli for milli.

A preemption must free the victim's GPUs in the checker's ledger exactly as the
cell frees them: if it did not, the victim placed again on its own GPU would
read as an over-commit, and if it freed too much a real double booking after a
preemption would go unseen. The bound is a whole GPU: 1000 milli booked on one
GPU is full, 1001 is over-committed.
"""

from __future__ import annotations

from reliability_builders import PREFIX, append, event

from schemas.events import (
    DecisionReason,
    GpuAssignment,
    TaskPlaced,
    TaskPreempted,
    TaskSubmitted,
    Tick,
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
REASON = DecisionReason(code="test")


class Ledger:
    """A one-cell, one-node log written input by input, each decision after its cause."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.n = 0
        node = node_event("node-a", 64000, 524288, 4, "A100", T0)
        append(self.records, INPUT_LOG, node.model_copy(update={"cell": "cell-0"}))

    def _input(self, payload: Event) -> str:
        self.n += 1
        env = event(payload, f"input-{self.n}")
        append(self.records, INPUT_LOG, env)
        return str(env.event_id)

    def _decide(self, kind: type[Event], task: str, **fields: object) -> None:
        self.n += 1
        cause = self._input(Tick(seq=self.n, interval_s=1.0))
        decision_id = derive_event_id(T0, f"decision-{self.n}")
        payload = kind(decision_id=decision_id, cause_event_id=cause, task_id=task,
                       reason=REASON, **fields)
        append(self.records, DECISIONS, event(payload, f"decision-{self.n}",
                                              causation_id=cause, event_id=decision_id))

    def submit(self, task: str) -> None:
        sub = TaskSubmitted.model_validate({"task_id": task, "tenant": "t",
                                            "resources": {"gpu_count": 1},
                                            "executor": EXECUTOR})
        append(self.records, TASKS, event(sub, f"submitted-{task}"))
        self._input(sub)

    def place(self, task: str, gpu: int, milli: int = 1000) -> None:
        self._decide(TaskPlaced, task, node_id="node-a",
                     gpus=[GpuAssignment(index=gpu, share_milli=milli)], executor=EXECUTOR)

    def preempt(self, task: str, requeue: bool = True) -> None:
        self._decide(TaskPreempted, task, node_id="node-a", requeue=requeue)

    def report(self) -> Report:
        return check(self.records, PREFIX)

    def violated(self) -> dict[str, int]:
        return {k: v for k, v in self.report().by_invariant().items() if v}


def test_a_preempted_task_placed_again_on_its_own_gpu_books_it_once() -> None:
    log = Ledger()
    log.submit("victim")
    log.place("victim", gpu=0)
    for _ in range(3):  # preempted, queued again, placed on the same whole GPU, again
        log.preempt("victim")
        assert log.report().task_states["victim"] == "queued"
        log.place("victim", gpu=0)
    report = log.report()
    assert report.ok, report.render()
    assert report.task_states["victim"] == "running" and report.max_share_milli == 1000


def test_the_gpu_a_preemption_freed_takes_another_task_whole() -> None:
    log = Ledger()
    log.submit("victim")
    log.submit("urgent")
    log.place("victim", gpu=0)
    log.preempt("victim")
    log.place("urgent", gpu=0)
    report = log.report()
    assert report.ok, report.render()
    assert report.task_states == {"victim": "queued", "urgent": "running"}


def test_a_requeued_task_placed_on_the_gpu_its_preemptor_holds_is_an_over_commit() -> None:
    log = Ledger()
    log.submit("victim")
    log.submit("urgent")
    log.place("victim", gpu=0)
    log.preempt("victim")
    log.place("urgent", gpu=0)
    log.place("victim", gpu=0)  # the real double booking: urgent still holds GPU 0
    assert log.violated() == {f.OVER_COMMIT: 1}


def test_a_task_placed_again_after_its_preemption_cannot_be_placed_a_third_time() -> None:
    log = Ledger()
    log.submit("victim")
    log.place("victim", gpu=0)
    log.preempt("victim")
    log.place("victim", gpu=1)
    log.place("victim", gpu=2)  # no preemption in between: it still holds GPU 1
    assert log.violated() == {f.DOUBLE_PLACEMENT: 1}


def test_a_preemption_without_requeue_frees_the_gpu_and_cancels_the_task() -> None:
    log = Ledger()
    log.submit("victim")
    log.submit("next")
    log.place("victim", gpu=0)
    log.preempt("victim", requeue=False)
    log.place("next", gpu=0)
    report = log.report()
    assert report.ok, report.render()
    assert report.task_states == {"victim": "cancelled", "next": "running"}


def test_one_gpu_may_be_booked_to_exactly_1000_milli() -> None:
    log = Ledger()
    for task, milli in (("x", 500), ("y", 250), ("z", 250)):
        log.submit(task)
        log.place(task, gpu=0, milli=milli)
    report = log.report()
    assert report.ok, report.render()
    assert report.max_share_milli == 1000


def test_one_milli_past_a_whole_gpu_is_an_over_commit() -> None:
    log = Ledger()
    for task, milli in (("x", 500), ("y", 250), ("z", 251)):
        log.submit(task)
        log.place(task, gpu=0, milli=milli)
    report = log.report()
    assert log.violated() == {f.OVER_COMMIT: 1}
    assert report.max_share_milli == 1001

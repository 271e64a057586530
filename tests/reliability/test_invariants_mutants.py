"""The checker's fold on small scripted logs, at the points mutation testing found unheld.

``./dev mutate`` showed that no test moved a booking by a migration or a resize,
read a preemption's or an unschedulable verdict's state, counted a repeated report,
a repeated undecodable record or a record read twice, read an input without a cell,
or read what a finding says. Each test here writes the smallest log that does, and
checks the report's states, counts and findings word for word.
"""

from __future__ import annotations

from typing import Any

import pytest
from reliability_builders import PREFIX, append, event

from schemas.codec import decode, encode
from schemas.events import (
    Envelope,
    NodeDraining,
    NodeFailed,
    NodeLeft,
    TaskCancelled,
    TaskFailed,
    TaskFinished,
    TaskMigrating,
    TaskPlaced,
    TaskPlacedV2,
    TaskPreempted,
    TaskResized,
    TaskStarted,
    TaskSubmitted,
    TaskUnschedulable,
)
from schemas.topics import DECISIONS, INPUT_LOG, TASK_STATUS, TASKS
from streams.audit.records import Record
from streams.audit.workload import T0, node_event
from streams.check import findings as f
from streams.check.findings import Report, Violation
from streams.check.invariants import check

SIM = {"duration_s": 1.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 100}
EXECUTOR = {"kind": "simulated", "simulated": SIM}
REASON = {"code": "best_score"}


def submission(task: str) -> TaskSubmitted:
    return TaskSubmitted.model_validate({"task_id": task, "tenant": "t",
                                         "resources": {"gpu_count": 1}, "executor": EXECUTOR})


class Log:
    """A cell's input log and decisions, written in the order the worker would."""

    def __init__(self, cell: str | None = "cell-0") -> None:
        self.records: list[Record] = []
        self.cell = cell
        self.n = 0

    def _seed(self) -> str:
        self.n += 1
        return f"s{self.n}"

    def node(self, name: str, gpus: int = 2) -> Envelope[Any]:
        env = node_event(name, 64000, 524288, gpus, "A100", T0)
        env = env.model_copy(update={"cell": self.cell})
        append(self.records, INPUT_LOG, env)
        return env

    def input(self, payload: Any) -> Envelope[Any]:
        env = event(payload, self._seed(), cell=self.cell)
        append(self.records, INPUT_LOG, env)
        return env

    def submit(self, task: str) -> Envelope[Any]:
        return self.input(submission(task))

    def decision_id(self) -> str:
        return event(submission("x"), self._seed()).event_id

    def decide(self, cls: type, cause: Envelope[Any], **fields: Any) -> Any:
        did = self.decision_id()
        reason = {"reason": REASON} if "reason" in cls.model_fields else {}
        payload = cls.model_validate({"decision_id": did, "cause_event_id": cause.event_id,
                                      **reason, **fields})
        append(self.records, DECISIONS, event(payload, self._seed(), cell=self.cell,
                                              causation_id=cause.event_id, event_id=did))
        return payload

    def place(self, task: str, node: str, gpus: list[tuple[int, int]],
              cause: Envelope[Any] | None = None) -> TaskPlaced:
        cause = cause or self.submit(task)
        return self.decide(TaskPlaced, cause, task_id=task, node_id=node,
                           gpus=_gpus(gpus), executor=EXECUTOR)

    def check(self, **kw: bool) -> Report:
        return check(self.records, PREFIX, **kw)


def _gpus(pairs: list[tuple[int, int]]) -> list[dict[str, int]]:
    return [{"index": i, "share_milli": s} for i, s in pairs]


def _only(report: Report, invariant: str) -> Violation:
    found = [v for v in report.violations if v.invariant == invariant]
    assert len(found) == 1 and len(report.violations) == 1, report.render()
    return found[0]


def test_a_migration_moves_the_booking_to_the_new_node():
    log = Log()
    log.node("n1")
    log.node("n2")
    log.place("mover", "n1", [(0, 1000)])
    mig = log.decide(TaskMigrating, log.submit("trigger"), task_id="mover",
                     from_node_id="n1", from_gpus=_gpus([(0, 1000)]), to_node_id="n2",
                     to_gpus=_gpus([(1, 1000)]), executor=EXECUTOR)
    log.place("fills-old-gpu", "n1", [(0, 1000)])
    assert log.check().ok, log.check().render()
    intruder = log.place("intruder", "n2", [(1, 1)])
    v = _only(log.check(), f.OVER_COMMIT)
    assert (v.cell, v.task_id) == ("cell-0", "intruder")
    assert v.message == (f"GPU 1 of n2 booked 1001 milli after TaskPlaced "
                         f"{intruder.decision_id} of task intruder")
    assert mig.task_id == "mover"


def test_a_migration_onto_a_full_gpu_is_an_over_commit_named_by_the_migration():
    log = Log()
    log.node("n1")
    log.node("n2")
    log.place("holder", "n2", [(0, 600)])
    log.place("mover", "n1", [(0, 500)])
    mig = log.decide(TaskMigrating, log.submit("trigger"), task_id="mover",
                     from_node_id="n1", from_gpus=_gpus([(0, 500)]), to_node_id="n2",
                     to_gpus=_gpus([(0, 500)]), executor=EXECUTOR)
    v = _only(log.check(), f.OVER_COMMIT)
    assert v.message == (f"GPU 0 of n2 booked 1100 milli after TaskMigrating "
                         f"{mig.decision_id} of task mover")
    assert log.check().max_share_milli == 1100


def test_a_migration_to_a_node_never_registered_breaks_membership():
    log = Log()
    log.node("n1")
    log.place("mover", "n1", [(0, 1000)])
    mig = log.decide(TaskMigrating, log.submit("trigger"), task_id="mover",
                     from_node_id="n1", from_gpus=_gpus([(0, 1000)]), to_node_id="ghost",
                     to_gpus=_gpus([(0, 1000)]), executor=EXECUTOR)
    v = _only(log.check(), f.MEMBERSHIP)
    assert (v.cell, v.task_id) == ("cell-0", "mover")
    assert v.message == (f"TaskMigrating {mig.decision_id} of task mover targets node "
                         "ghost: never registered in this cell")


def test_a_placement_on_a_failed_node_names_the_nodes_status():
    log = Log()
    log.node("n1")
    log.input(NodeFailed(node_id="n1", reason="operator"))
    placed = log.place("late", "n1", [(0, 1000)])
    v = _only(log.check(), f.MEMBERSHIP)
    assert v.message == (f"TaskPlaced {placed.decision_id} of task late targets node n1: "
                         "failed")


def test_a_resize_replaces_the_tasks_booking_and_starts_a_new_run():
    log = Log()
    log.node("n1")
    log.place("elastic", "n1", [(0, 1000)])
    resized = log.decide(TaskResized, log.submit("trigger"), task_id="elastic",
                         node_id="n1", gpus=_gpus([(1, 400)]), direction="down")
    log.place("next", "n1", [(0, 1000), (1, 600)])
    report = log.check()
    assert report.ok, report.render()
    assert report.max_share_milli == 1000
    # a finish of the resized run ends the task and frees its share
    log.input(TaskFinished(task_id="elastic", node_id="n1", decision_id=resized.decision_id,
                           runtime_s=1.0))
    log.place("after", "n1", [(1, 400)])
    report = log.check()
    assert report.ok, report.render()
    assert report.task_states["elastic"] == "finished"


def test_a_resize_onto_a_full_gpu_is_an_over_commit_named_by_the_resize():
    log = Log()
    log.node("n1")
    log.place("elastic", "n1", [(0, 500)])
    log.place("other", "n1", [(1, 800)])
    resized = log.decide(TaskResized, log.submit("trigger"), task_id="elastic",
                         node_id="n1", gpus=_gpus([(1, 300)]), direction="down")
    v = _only(log.check(), f.OVER_COMMIT)
    assert (v.cell, v.task_id) == ("cell-0", "elastic")
    assert v.message == (f"GPU 1 of n1 booked 1100 milli after TaskResized "
                         f"{resized.decision_id} of task elastic")


def test_a_second_placement_finding_names_the_node_the_task_still_holds():
    log = Log()
    log.node("n1")
    log.node("n2")
    log.place("twice", "n1", [(0, 500)])
    again = log.place("twice", "n2", [(0, 500)])
    v = _only(log.check(), f.DOUBLE_PLACEMENT)
    assert (v.cell, v.task_id) == ("cell-0", "twice")
    assert v.message == (f"task twice placed on n2 by {again.decision_id} while it still "
                         "holds GPUs on n1")


def test_a_preemption_queues_or_cancels_the_task_as_it_says():
    log = Log()
    log.node("n1")
    log.place("requeued", "n1", [(0, 1000)])
    log.place("stopped", "n1", [(1, 1000)])
    cause = log.submit("urgent")
    log.decide(TaskPreempted, cause, task_id="requeued", node_id="n1", requeue=True)
    log.decide(TaskPreempted, cause, task_id="stopped", node_id="n1", requeue=False)
    log.decide(TaskPlaced, cause, task_id="urgent", node_id="n1",
               gpus=_gpus([(0, 1000)]), executor=EXECUTOR)
    report = log.check()
    assert report.ok, report.render()
    assert report.task_states["requeued"] == "queued"
    assert report.task_states["stopped"] == "cancelled"
    assert report.task_states["urgent"] == "running"


def test_an_unschedulable_verdict_queues_or_rejects_the_task_as_it_says():
    log = Log()
    log.node("n1")
    verdict = [{"policy": "fit", "code": "unschedulable"}]
    for task, resolvable in (("waits", True), ("never", False)):
        log.decide(TaskUnschedulable, log.submit(task), task_id=task, resolvable=resolvable,
                   verdicts=verdict)
    states = log.check(settled=True).task_states
    assert states["waits"] == "queued" and states["never"] == "unschedulable"


def test_repeated_failure_reasons_add_up():
    """(A report about a task that is not placed is refused by the cell since reports
    are taken only from the placement's node: tests/reliability/test_check_report_node.py.)"""
    log = Log()
    log.node("n1")
    for task in ("a", "b"):
        placed = log.place(task, "n1", [(0 if task == "a" else 1, 1000)])
        log.input(TaskFailed(task_id=task, node_id="n1", decision_id=placed.decision_id,
                             reason="oom", exit_code=1))
    report = log.check()
    assert report.task_states == {"a": "failed", "b": "failed"}
    assert report.failure_reasons["oom"] == 2
    assert report.counts["reports_ends"] == 2


def test_a_requeued_run_loses_its_reports_and_frees_its_gpus():
    log = Log()
    log.node("n1")
    placed = log.place("lost", "n1", [(0, 1000)])
    log.input(TaskFailed(task_id="lost", node_id="n1", decision_id=placed.decision_id,
                         reason="gpu_failed", exit_code=1))
    log.input(TaskFinished(task_id="lost", node_id="n1", decision_id=placed.decision_id,
                           runtime_s=1.0))
    log.place("next", "n1", [(0, 1000)])
    report = log.check()
    assert report.ok, report.render()
    assert report.task_states["lost"] == "queued"
    assert report.counts["reports_requeues"] == 1 and report.counts["reports_stale"] == 1


def test_a_lost_submission_says_where_it_never_arrived():
    log = Log()
    log.submit("undecided")
    sub = submission("unlogged")
    for task in ("undecided", "unlogged"):
        body = sub.model_copy(update={"task_id": task})
        append(log.records, TASKS, event(body, f"sub-{task}", cell=None))
    report = log.check(settled=True)
    lost = {v.task_id: v for v in report.violations if v.invariant == f.LOST_TASK}
    assert lost["undecided"].message == "task undecided was submitted but never reached " \
                                        "any decision"
    assert lost["unlogged"].message == "task unlogged was submitted but never reached " \
                                       "the input log"
    assert report.counts["orphan_decisions"] == 0


def test_a_decision_whose_cause_is_not_in_the_log_is_counted_an_orphan():
    log = Log()
    log.node("n1")
    stray = event(submission("s"), "stray")
    log.decide(TaskPlaced, stray, task_id="s", node_id="n1", gpus=_gpus([(0, 1000)]),
               executor=EXECUTOR)
    assert log.check().counts["orphan_decisions"] == 1


def test_records_read_twice_and_undecodable_ones_are_counted_once_each():
    log = Log()
    log.node("n1")
    placed = log.place("a", "n1", [(0, 1000)])
    append(log.records, TASKS, event(submission("a"), "sub-a", cell=None))
    for offset in (7, 8):
        log.records.append(Record(PREFIX + TASKS, 0, offset, None, b"a", b"not json"))
    wrong_topic = event(placed, "misfiled", cell=None)
    append(log.records, TASKS, wrong_topic)  # a decision has no place on the tasks topic
    twice = log.records + [r for r in log.records if r.topic != PREFIX + INPUT_LOG]
    report = check(twice, PREFIX)
    assert report.ok, report.render()
    assert report.counts[f"undecodable:{TASKS}"] == 3
    assert report.counts[TASKS] == 1 and report.counts["decisions"] == 1
    assert report.task_states == {"a": "running"}


def test_inputs_read_twice_are_folded_once():
    log = Log()
    log.node("n1")
    log.place("a", "n1", [(0, 1000)])
    doubled = [r for r in log.records for _ in range(2)]
    report = check(doubled, PREFIX)
    assert report.ok, report.render()
    assert report.counts[INPUT_LOG] == 2


def _without_cell(records: list[Record], key: bytes | None) -> list[Record]:
    out = []
    for r in records:
        if r.topic in (PREFIX + INPUT_LOG, PREFIX + DECISIONS):
            env = decode(r.value or b"")
            assert isinstance(env, Envelope)
            r = Record(r.topic, r.partition, r.offset, r.timestamp_ms, key,
                       encode(env.model_copy(update={"cell": None})))
        out.append(r)
    return out


def _scripted() -> Log:
    log = Log()
    log.node("n1")
    log.place("a", "n1", [(0, 1000)])
    log.place("b", "n1", [(0, 1)])  # an over-commit, to see it found
    return log


def test_records_without_a_cell_are_folded_in_their_keys_cell():
    report = check(_without_cell(_scripted().records, b"cell-0"), PREFIX)
    v = _only(report, f.OVER_COMMIT)
    assert v.cell == "cell-0"
    assert report.task_states == {"a": "running", "b": "running"}


def test_records_with_neither_cell_nor_key_are_folded_in_one_unnamed_cell():
    report = check(_without_cell(_scripted().records, None), PREFIX)
    v = _only(report, f.OVER_COMMIT)
    assert v.cell == ""
    assert report.task_states == {"a": "running", "b": "running"}


def test_starts_in_the_input_log_are_checked_when_no_task_status_was_read():
    log = Log()
    log.node("n1")
    placed = log.place("a", "n1", [(0, 1000)])
    start = TaskStarted(task_id="a", node_id="n1", decision_id=placed.decision_id)
    first = log.input(start)
    second = log.input(start)
    ghost_id = log.decision_id()
    log.input(TaskStarted(task_id="g", node_id="n1", decision_id=ghost_id))
    report = log.check()
    assert report.counts["starts"] == 3
    assert report.counts["start_causation_mismatch"] == 3  # none caused by its decision
    dup = _first(report, f.DUPLICATE_APPLY)
    events = ", ".join(sorted((first.event_id, second.event_id)))
    assert dup.message == (f"decision {placed.decision_id} was started 2 times on n1 "
                           f"(events {events})")
    phantom = _first(report, f.PHANTOM_START)
    assert phantom.message == (f"TaskStarted names decision {ghost_id}, not on the "
                               "decisions topic")


def test_a_tombstone_in_the_input_log_is_skipped_and_the_log_goes_on():
    log = Log()
    log.node("n1")
    for offset in (1, 2):  # compacted away: the next inputs come after them
        log.records.append(Record(PREFIX + INPUT_LOG, 0, offset, None, b"cell-0", None))
    log.place("a", "n1", [(0, 1000)])
    report = log.check()
    assert report.ok, report.render()
    assert report.task_states == {"a": "running"}
    assert report.counts[INPUT_LOG] == 2


def _first(report: Report, invariant: str) -> Violation:
    return next(v for v in report.violations if v.invariant == invariant)


@pytest.mark.parametrize(("event_cls", "status"), [(NodeDraining, "draining"),
                                                     (NodeLeft, "left")])
def test_a_placement_on_a_drained_or_departed_node_names_that_status(event_cls, status):
    log = Log()
    log.node("n1")
    fields = {"reason": "maintenance"}
    log.input(event_cls(node_id="n1", **fields))
    placed = log.place("late", "n1", [(0, 1000)])
    v = _only(log.check(), f.MEMBERSHIP)
    assert v.message == (f"TaskPlaced {placed.decision_id} of task late targets node n1: "
                         f"{status}")


@pytest.mark.parametrize("state_before", ["running", "queued", "in_flight"])
def test_a_cancellation_frees_the_tasks_gpus_and_ends_it(state_before):
    log = Log()
    log.node("n1")
    cause = log.submit("c")
    if state_before != "in_flight":
        placed = log.place("c", "n1", [(0, 1000)], cause=cause)
        if state_before == "queued":
            log.decide(TaskPreempted, log.submit("urgent"), task_id="c", node_id="n1")
            assert placed.task_id == "c"
    log.input(TaskCancelled(task_id="c"))
    log.place("next", "n1", [(0, 1000)])
    report = log.check()
    assert report.ok, report.render()
    assert report.task_states["c"] == "cancelled"


def test_a_cancellation_of_a_finished_task_changes_nothing():
    log = Log()
    log.node("n1")
    placed = log.place("done", "n1", [(0, 1000)])
    log.input(TaskFinished(task_id="done", node_id="n1", decision_id=placed.decision_id,
                           runtime_s=1.0))
    log.input(TaskCancelled(task_id="done"))
    assert log.check().task_states["done"] == "finished"


def test_a_report_naming_no_run_ends_a_task_waiting_in_the_queue():
    log = Log()
    log.node("n1")
    log.place("waiting", "n1", [(0, 1000)])
    log.decide(TaskPreempted, log.submit("urgent"), task_id="waiting", node_id="n1")
    log.input(TaskFailed(task_id="waiting", reason="oom", exit_code=1))
    assert log.check().task_states["waiting"] == "failed"


def test_after_a_resize_a_report_on_the_run_before_it_is_stale():
    log = Log()
    log.node("n1")
    placed = log.place("elastic", "n1", [(0, 1000)])
    log.decide(TaskResized, log.submit("trigger"), task_id="elastic", node_id="n1",
               gpus=_gpus([(0, 500)]), direction="down")
    log.input(TaskFinished(task_id="elastic", node_id="n1", decision_id=placed.decision_id,
                           runtime_s=1.0))
    report = log.check()
    assert report.task_states["elastic"] == "running"
    assert report.counts["reports_stale"] == 1


def test_a_repeated_input_event_at_another_offset_is_folded_once():
    log = Log()
    log.node("n1")
    placed = log.place("a", "n1", [(0, 1000)])
    failed = log.input(TaskFailed(task_id="a", node_id="n1", decision_id=placed.decision_id,
                                  reason="oom", exit_code=1))
    append(log.records, INPUT_LOG, failed)  # a producer retry: same event, next offset
    report = log.check()
    assert report.failure_reasons["oom"] == 1 and report.counts["reports_ends"] == 1


def _rewrapped(log: Log, payload: Any, seed: str, cause: Envelope[Any]) -> Envelope[Any]:
    """``payload`` again under a new envelope event id (decision id unchanged)."""
    env = event(payload, seed, cell=log.cell, causation_id=cause.event_id)
    append(log.records, DECISIONS, env)
    return env


def test_decisions_are_known_by_their_decision_id_not_their_envelope_id():
    log = Log()
    log.node("n1")
    placed = log.place("a", "n1", [(0, 1000)])
    log.place("b", "n1", [(1, 1000)])
    again = _rewrapped(log, placed, "again", log.submit("later"))
    assert again.event_id != placed.decision_id
    log.place("c", "n1", [])  # a decision after the duplicate is still read
    log.input(TaskStarted(task_id="a", node_id="n1", decision_id=placed.decision_id))
    report = log.check()
    v = _only(report, f.DUPLICATE_DECISION)
    assert (v.cell, v.task_id) == ("cell-0", "a")
    assert v.message == f"decision {placed.decision_id} (TaskPlaced of task a) appears twice"
    assert report.counts["decisions"] == 3
    assert report.task_states == {"a": "running", "b": "running", "later": "in_flight",
                                  "c": "running"}


def test_decisions_whose_envelope_id_differs_from_the_decision_id_are_started_cleanly():
    log = Log()
    log.node("n1")
    cause = log.submit("a")
    placed = log.decide(TaskPlaced, cause, task_id="a", node_id="n1",
                        gpus=_gpus([(0, 1000)]), executor=EXECUTOR)
    log.records.pop()  # written again below under an envelope id of its own
    _rewrapped(log, placed, "own-id", cause)
    log.input(TaskStarted(task_id="a", node_id="n1", decision_id=placed.decision_id))
    report = log.check()
    assert report.ok, report.render()
    assert report.task_states == {"a": "running"}


def test_topics_without_a_prefix_are_read_by_default():
    records = [Record(r.topic.removeprefix(PREFIX), r.partition, r.offset, r.timestamp_ms,
                      r.key, r.value) for r in _scripted().records]
    report = check(records)
    assert _only(report, f.OVER_COMMIT).task_id == "b"


def test_starts_are_all_read_past_the_other_reports_on_the_status_topic():
    log = Log()
    log.node("n1")
    placed = log.place("a", "n1", [(0, 1000)])
    finished = TaskFinished(task_id="a", node_id="n1", decision_id=placed.decision_id,
                            runtime_s=1.0)
    start = TaskStarted(task_id="a", node_id="n1", decision_id=placed.decision_id)
    for seed, payload in (("fin", finished), ("s1", start), ("s2", start)):
        append(log.records, TASK_STATUS, event(payload, seed, cell=None,
                                               causation_id=placed.decision_id))
    report = log.check()
    assert set(report.by_invariant()) >= {f.DUPLICATE_APPLY}
    assert report.by_invariant()[f.DUPLICATE_APPLY] == 1 and report.counts["starts"] == 2


def test_a_gangs_placement_starts_once_on_each_members_node():
    log = Log()
    log.node("n1")
    log.node("n2")
    members = [{"rank": r, "node_id": n, "gpus": _gpus([(0, 1000), (1, 1000)])}
               for r, n in enumerate(("n1", "n2"))]
    placed = log.decide(TaskPlacedV2, log.submit("g"), task_id="g", node_id="n1",
                        gpus=_gpus([(0, 1000), (1, 1000)]), members=members, executor=EXECUTOR)
    for node in ("n1", "n2"):
        log.input(TaskStarted(task_id="g", node_id=node, decision_id=placed.decision_id))
    assert log.check().violations == []
    log.input(TaskStarted(task_id="g", node_id="n2", decision_id=placed.decision_id))
    dup = _only(log.check(), f.DUPLICATE_APPLY)
    assert "was started 2 times on n2" in dup.message

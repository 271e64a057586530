"""The demo report's task counts: each task in one state, taken from ``check``'s fold.

The report counted every ``TaskFailed`` it read (a preemption's kill report too) and
the worker's queue and running tasks at another moment, so its numbers did not sum
to the tasks submitted; it also counted an executor's ``TaskOverUse`` as a decision.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from schemas.events import TaskFailed, TaskOverUse, make_event
from streams.check.findings import Report
from streams.demo.accounting import Accounting
from streams.demo.report import markdown, summarise
from streams.demo.tracker import Tracker

T0 = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
RUN = "01JDQ5V0000000000000000001"


def accounting() -> Accounting:
    report = Report(task_states={"a": "finished", "b": "finished", "c": "failed", "d": "queued",
                                 "e": "in_flight"})
    report.failure_reasons["oom"] += 1
    return Accounting(report, Path("var/demo/x/audit.jsonl.gz"), "demo-x.")


def test_the_reports_states_are_the_accountings_and_sum_to_the_submitted() -> None:
    summary = summarise(Tracker(), {"speedup": 300}, accounting())
    tasks = summary["tasks"]
    assert tasks["submitted"] == 5 == sum(tasks["by_state"].values())
    assert tasks["by_state"] == {"queued": 1, "running": 0, "finished": 2, "failed": 1,
                                 "cancelled": 0, "unschedulable": 0, "refused": 0,
                                 "in_flight": 1, "lost": 0}
    text = markdown(summary)
    assert ("submitted 5: queued 1, finished 2, failed 1, in flight 1 (failed by reason: "
            "oom 1).") in text
    assert "`hetsched check --topic-prefix demo-x.`" in text
    assert "`hetsched explain TASK var/demo/x/audit.jsonl.gz`" in text


def test_without_an_accounting_the_report_says_why_and_claims_no_states() -> None:
    tracker = Tracker()
    tracker.note_submitted("a", "t", T0)
    summary = summarise(tracker, {"speedup": 300}, None, "KafkaConnectionError: no broker")
    assert summary["tasks"]["by_state"] is None
    assert "could not be read from the run's topics: KafkaConnectionError: no broker" in \
        markdown(summary)


def test_executor_reports_are_not_counted_as_decisions() -> None:
    tracker = Tracker()
    for payload in (TaskFailed(task_id="a", node_id="n", decision_id=RUN, reason="killed"),
                    TaskOverUse(task_id="a", node_id="n", decision_id=RUN, gpu_index=0,
                                observed_mib=2, booked_mib=1, margin_pct=0)):
        tracker.note_event(make_event(payload, source="test", occurred_at=T0))
    assert tracker.decisions == {}

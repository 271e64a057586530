"""``explain``: one task's story from the log, with every decision's candidates and terms.

Works on raw JSON (not the typed models) so it explains any log it can parse,
including records of versions this build does not know.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from schemas.topics import DECISIONS, INPUT_LOG
from streams.audit.payload_lines import reason_lines, summary
from streams.audit.records import Head, Record, logical_topic

STEPS = {
    "TaskSubmitted": "submitted", "TaskCancelled": "cancelled", "TaskStarted": "started",
    "TaskUsage": "usage", "TaskFinished": "finished", "TaskFailed": "failed",
    "TaskProbe": "probed", "TaskUnschedulable": "queued", "TaskPlaced": "placed",
    "TaskResized": "resized", "TaskMigrating": "migrated", "TaskPreempted": "preempted",
    "TaskOverUse": "over-use", "TaskRejected": "rejected",
}


def timeline(log: Iterable[Record], task_id: str, prefix: str = "") -> list[dict[str, Any]]:
    """The task's events and decisions, by event time; at one time, inputs before
    decisions (a decision follows its cause), then by partition and offset, whatever
    order the log's topics come in.

    Reads ``log`` twice, holding only the task's records: the first pass keeps them and
    the ids of the inputs that caused its decisions, the second finds those inputs
    (a decision's cause can be any task's event, a tick, or a node's). ``log`` is a
    list or an audit file (``LogFile``: each iteration a new pass), not an iterator.
    """
    if iter(log) is log:
        raise TypeError("timeline reads the log twice: give a list or a LogFile, "
                        "not an iterator")
    rows: list[dict[str, Any]] = []
    order: list[tuple[str, bool, int, int]] = []  # each row's sort key
    wanted: set[str] = set()
    for r in log:
        doc = r.doc
        if doc is None:
            continue
        payload = doc.get("payload")  # an object in every legal shape; left out otherwise
        if not isinstance(payload, dict) or payload.get("task_id") != task_id:
            continue
        topic = logical_topic(r.topic, prefix)
        if topic not in (INPUT_LOG, DECISIONS):
            continue
        cause_id = doc.get("causation_id") if topic == DECISIONS else None
        if isinstance(cause_id, str):
            wanted.add(cause_id)
        kind, at = doc.get("type"), doc.get("occurred_at")
        at = at if isinstance(at, str) else ""  # any log it can parse: compare strings only
        step = STEPS.get(kind, "?") if isinstance(kind, str) else "?"
        rows.append({"at": at, "step": step, "type": kind, "doc": doc,
                     "decision": topic == DECISIONS, "cause": cause_id, "position": r.where})
        order.append((at, topic == DECISIONS, r.partition, r.offset))
    causes = _causes(log, wanted, prefix) if wanted else {}
    for row in rows:
        cause = causes.get(row["cause"]) if row["cause"] is not None else None
        row["cause"] = cause._asdict() if cause is not None else None
    return [row for _, row in sorted(zip(order, rows, strict=True), key=itemgetter(0))]


def _causes(log: Iterable[Record], wanted: set[str], prefix: str) -> dict[str, Head]:
    """The heads of the input-log records whose event id is ``wanted`` (the last one of
    a repeated id)."""
    return {head.event_id: head for r in log
            if (head := r.head) is not None and head.event_id is not None
            and head.event_id in wanted and logical_topic(r.topic, prefix) == INPUT_LOG}


def render(task_id: str, rows: list[dict[str, Any]], top: int = 5) -> str:
    if not rows:
        return f"task {task_id}: not in this log"
    lines = [f"task {task_id}"]
    decided = {_decision_id(row): row for row in rows if row["decision"]}
    for row in rows:
        p = row["doc"]["payload"]
        lines.append(f"{row['at']}  {row['step']:10} {summary(row['type'], p)}"
                     f"   [{row['position']}]")
        lines += _cause(row, decided)
        lines += reason_lines(p, top)
    return "\n".join(lines)


def _decision_id(row: dict[str, Any]) -> str | None:
    """The decision a row is or reports on (None: none, or not a string)."""
    decision_id = row["doc"]["payload"].get("decision_id")
    return decision_id if isinstance(decision_id, str) else None


def _cause(row: dict[str, Any], decided: dict[Any, dict[str, Any]]) -> list[str]:
    """What links ``row`` to the rest of the story: a decision's cause (the input that
    made it), or the decision an input reports on (a finish names the placement's
    run)."""
    decision_id = _decision_id(row)
    if decision_id is None:
        return []
    if not row["decision"]:
        about = decided.get(decision_id)
        where = f"{about['step']} at {about['at']}" if about is not None else "not in this log"
        return [f"    reports on decision {decision_id} ({where})"]
    c = row["cause"]
    if c is not None:
        return [f"    decision {decision_id} caused by {c.get('type')} {c.get('event_id')} "
                f"({c.get('source')}, {c.get('occurred_at')})"]
    return [f"    decision {decision_id} caused by {row['doc'].get('causation_id')} "
            "(not in this log)"]

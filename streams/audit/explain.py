"""``explain``: one task's story from the log, with every decision's candidates and terms.

Works on raw JSON (not the typed models) so it explains any log it can parse,
including records of versions this build does not know.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from schemas.topics import DECISIONS, INPUT_LOG
from streams.audit.records import Head, Record, logical_topic

STEPS = {
    "TaskSubmitted": "submitted", "TaskCancelled": "cancelled", "TaskStarted": "started",
    "TaskUsage": "usage", "TaskFinished": "finished", "TaskFailed": "failed",
    "TaskProbe": "probed", "TaskUnschedulable": "queued", "TaskPlaced": "placed",
    "TaskResized": "resized", "TaskMigrating": "migrated", "TaskPreempted": "preempted",
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
        if doc is None or (doc.get("payload") or {}).get("task_id") != task_id:
            continue
        topic = logical_topic(r.topic, prefix)
        if topic not in (INPUT_LOG, DECISIONS):
            continue
        cause_id = doc.get("causation_id") if topic == DECISIONS else None
        if isinstance(cause_id, str):
            wanted.add(cause_id)
        kind, at = doc.get("type"), doc.get("occurred_at")
        at = at if isinstance(at, str) else ""  # any log it can parse: compare strings only
        rows.append({"at": at, "step": STEPS.get(kind or "", "?"), "type": kind, "doc": doc,
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
    decided = {row["doc"]["payload"].get("decision_id"): row for row in rows if row["decision"]}
    for row in rows:
        p = row["doc"]["payload"]
        lines.append(f"{row['at']}  {row['step']:10} {_summary(row['type'], p)}"
                     f"   [{row['position']}]")
        lines += _cause(row, decided)
        lines += _reason(p, top)
    return "\n".join(lines)


def _cause(row: dict[str, Any], decided: dict[Any, dict[str, Any]]) -> list[str]:
    """What links ``row`` to the rest of the story: a decision's cause (the input that
    made it), or the decision an input reports on (a finish names the placement's
    run)."""
    decision_id = row["doc"]["payload"].get("decision_id")
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


def _summary(event_type: str, p: dict[str, Any]) -> str:
    gpus = ",".join(f"{g['index']}({g.get('share_milli', 1000)}m)" for g in p.get("gpus", []))
    if event_type in ("TaskPlaced", "TaskProbe", "TaskResized"):
        return f"on {p.get('node_id')} GPUs [{gpus}] cpu {p.get('cpu_milli', '-')}m"
    if event_type == "TaskMigrating":
        return f"{p.get('from_node_id')} -> {p.get('to_node_id')}"
    if event_type == "TaskUnschedulable":
        how = "waits in the queue" if p.get("resolvable") else "can never run in this cell"
        return f"{how}; {p.get('nodes_considered', 0)} nodes considered"
    if event_type == "TaskSubmitted":
        r = p.get("resources", {})
        return (f"tenant {p.get('tenant')} asks {r.get('gpu_count', 0)} GPU x "
                f"{r.get('gpu_share_milli', 1000)}m models {r.get('gpu_models') or 'any'}")
    if event_type == "TaskPreempted":
        return f"on {p.get('node_id')}: {p.get('reason', {}).get('message', '')}"
    node = p.get("node_id")
    return f"on {node}" if node else ""


def _reason(p: dict[str, Any], top: int) -> list[str]:
    out = []
    for v in p.get("verdicts", []):
        out.append(f"    {v.get('policy')}: {v.get('code')}: {'; '.join(v.get('reasons', []))}")
    reason = p.get("reason") or {}
    if reason.get("message"):
        out.append(f"    reason: {reason.get('code')}: {reason['message']}")
    cands = reason.get("candidates") or []
    if not cands:
        return out
    if top == 0:
        out.append(f"      {len(cands)} candidates (--top to list them)")
        return out
    terms = sorted({t for c in cands for t in c.get("terms", {})})
    head = ["node", "GPUs", "score", *terms]
    table = [[c["node_id"], ",".join(map(str, c.get("gpu_indices", []))), f"{c['score']:.4f}",
              *(f"{c.get('terms', {}).get(t, 0.0):.4f}" for t in terms)]
             for c in cands[:top]]
    widths = [max(len(r[i]) for r in [head, *table]) for i in range(len(head))]
    for r in [head, *table]:
        out.append("      " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))
    if len(cands) > top:
        out.append(f"      ... {len(cands) - top} more candidates")
    return out

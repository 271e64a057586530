"""The task view's document (``/task/<id>``): one task's timeline and why it waits.

"Why is my task pending?" is answered as ``hetsched explain`` answers it, with its
code: :func:`streams.audit.explain.timeline` orders the task's records (kept by the
dashboard's feed, :mod:`.journal`) and :func:`streams.audit.explain.render` prints
them; for a task whose latest decision is ``TaskUnschedulable`` the verdicts it
recorded (policy by policy: code, reasons, nodes filtered out) are given apart, as
``explain`` prints them under that decision. The worker's cells add where the task
stands now (queued, running, waiting on predecessors), also for a task whose
records the feed did not see (submitted before this worker started).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streams.audit.explain import render, timeline
from streams.audit.records import Record
from streams.core.cell import Cell

TOP_CANDIDATES = 3
"""Candidates per decision in the explain text (``hetsched explain --top``)."""


def task_response(task_id: str, records: list[Record], prefix: str,
                  cells: Iterable[tuple[str, Cell]]) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of ``/task/<task_id>``: 200 with the document, or 404
    with an ``error`` naming the id when neither the records nor the cells know it."""
    if not task_id:
        return 404, {"error": "no task id: ask /task/<task id>, the id percent-encoded"}
    now = _where_now(task_id, cells)
    rows = timeline(records, task_id, prefix) if records else []
    if now is None and not rows:
        return 404, {"task": task_id, "error": (
            f"unknown task {task_id!r}: not in this worker's cells, and not among the "
            "tasks its dashboard has read since the worker started")}
    body: dict[str, Any] = {
        "task": task_id, "now": now,
        "timeline": [_row(row) for row in rows], "pending": _pending(rows)}
    try:
        body["explain"] = render(task_id, rows, top=TOP_CANDIDATES)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        # A record shape explain cannot print yet must not cost the operator the
        # timeline and verdicts above, which come from the records themselves.
        body["explain"] = None
        body["explain_error"] = f"hetsched explain could not print this task: {exc!r}"
    return 200, body


def _where_now(task_id: str, cells: Iterable[tuple[str, Cell]]) -> dict[str, Any] | None:
    """The task's status in the worker's cells (None: no owned cell knows it)."""
    for name, cell in cells:
        rec = cell.tasks.get(task_id)
        if rec is not None:
            return {"cell": name, "status": rec.status, "node": rec.node,
                    "gpus": list(rec.gpus), "waiting_on": list(rec.waiting_on),
                    "preemptions": rec.preemptions,
                    "members": [{"node": n, "gpus": list(g)} for n, g in rec.members]}
    return None


def _row(row: dict[str, Any]) -> dict[str, Any]:
    """One timeline row as JSON: the fields of explain's row and the record's payload."""
    doc = row["doc"]
    return {"at": row["at"], "step": row["step"], "type": row["type"],
            "decision": row["decision"], "position": row["position"],
            "source": doc.get("source"), "payload": doc.get("payload"),
            "cause": row["cause"]}


def _pending(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Why the task waits: its latest decision's verdicts when that decision is a
    ``TaskUnschedulable`` (None when it was placed since, or never decided)."""
    decisions = [row for row in rows if row["decision"]]
    if not decisions or decisions[-1]["type"] != "TaskUnschedulable":
        return None
    last = decisions[-1]
    p = last["doc"].get("payload") or {}
    return {"at": last["at"], "resolvable": p.get("resolvable"),
            "message": p.get("message", ""), "nodes_considered": p.get("nodes_considered", 0),
            "verdicts": p.get("verdicts", []), "reason": p.get("reason"),
            "position": last["position"]}

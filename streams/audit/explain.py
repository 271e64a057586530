"""``explain``: one task's story from the log, with every decision's candidates and terms.

Works on raw JSON (not the typed models) so it explains any log it can parse,
including records of versions this build does not know.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from schemas.topics import DECISIONS, INPUT_LOG
from streams.audit.records import Record, logical_topic

STEPS = {
    "TaskSubmitted": "submitted", "TaskCancelled": "cancelled", "TaskStarted": "started",
    "TaskUsage": "usage", "TaskFinished": "finished", "TaskFailed": "failed",
    "TaskProbe": "probed", "TaskUnschedulable": "queued", "TaskPlaced": "placed",
    "TaskResized": "resized", "TaskMigrating": "migrated", "TaskPreempted": "preempted",
}


def timeline(records: Iterable[Record], task_id: str, prefix: str = "") -> list[dict[str, Any]]:
    """The task's events and decisions, by event time then log position."""
    recs = list(records)
    causes = {r.event_id: r.head for r in recs
              if logical_topic(r.topic, prefix) == INPUT_LOG and r.event_id}
    rows = []
    for r in recs:
        doc = r.doc
        if doc is None or (doc.get("payload") or {}).get("task_id") != task_id:
            continue
        topic = logical_topic(r.topic, prefix)
        if topic not in (INPUT_LOG, DECISIONS):
            continue
        cause = causes.get(doc.get("causation_id") or "") if topic == DECISIONS else None
        cause_doc = cause._asdict() if cause is not None else None
        kind = doc.get("type")
        rows.append({"at": doc.get("occurred_at", ""), "step": STEPS.get(kind or "", "?"),
                     "type": kind, "doc": doc, "cause": cause_doc,
                     "position": r.where})
    return sorted(rows, key=lambda row: row["at"])


def render(task_id: str, rows: list[dict[str, Any]], top: int = 5) -> str:
    if not rows:
        return f"task {task_id}: not in this log"
    lines = [f"task {task_id}"]
    for row in rows:
        doc, p = row["doc"], row["doc"]["payload"]
        lines.append(f"{row['at']}  {row['step']:10} {_summary(row['type'], p)}"
                     f"   [{row['position']}]")
        if row["cause"] is not None:
            c = row["cause"]
            lines.append(f"    decision {p.get('decision_id')} caused by {c.get('type')} "
                         f"{c.get('event_id')} ({c.get('source')}, {c.get('occurred_at')})")
        elif row["type"] in STEPS and "decision_id" in p:
            lines.append(f"    decision {p.get('decision_id')} caused by "
                         f"{doc.get('causation_id')} (not in this log)")
        lines += _reason(p, top)
    return "\n".join(lines)


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

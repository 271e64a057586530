"""What the dashboard shows besides the cells: decisions, telemetry, tenants, history,
and each recent task's records for the task view.

Filled by a read-committed consumer of this deployment's input log and decisions
topic (its own, group-less, so it never joins the scheduler's consumer group), and
by a sampler of the owned cells every two seconds. The input log holds every
submission, status report and telemetry sample the scheduler was given, so the
task view tells the same story as ``hetsched explain`` (:mod:`.journal`).

The consumer reads every submission, telemetry sample and decision in the
worker process the scheduler runs in, so :meth:`Feed.note_raw` reads a record's
JSON for the few fields shown and keeps the last decisions as bytes: only those
(at most :data:`SHOWN_DECISIONS`) are decoded into events, when the page or the
sampler asks (:meth:`Feed.recent_decisions`). A full decode per record was ~6 %
of the worker's CPU at 200 submissions/s (py-spy, bench/service.py).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from schemas.topics import DECISION_EVENTS
from streams.audit.records import Record
from streams.dashboard.journal import TaskJournal

SHOWN_DECISIONS = 50


def explain(payload: Any) -> str:
    """A one-line reason: the decision's code and message, or the refusing verdicts."""
    kind = type(payload).__name__
    if kind == "TaskUnschedulable":
        why = "; ".join(r for v in payload.verdicts for r in v.reasons) or payload.message
        return ("queued: " if payload.resolvable else "refused: ") + why
    reason = getattr(payload, "reason", None)
    return "" if reason is None else f"{reason.code} {reason.message}".strip()


def candidates(payload: Any) -> list[dict[str, Any]]:
    reason = getattr(payload, "reason", None)
    if reason is None:
        return []
    return [{"node": c.node_id, "gpus": c.gpu_indices, "score": round(c.score, 4),
             "terms": {k: round(v, 4) for k, v in c.terms.items()}}
            for c in reason.candidates[:3]]


@dataclass
class Feed:
    decisions: deque[dict[str, Any]] = field(
        default_factory=lambda: deque(maxlen=SHOWN_DECISIONS))
    telemetry: dict[str, dict[str, float]] = field(default_factory=dict)
    tenants: dict[str, str] = field(default_factory=dict)
    history: deque[dict[str, float]] = field(default_factory=lambda: deque(maxlen=900))
    placed: int = 0
    journal: TaskJournal = field(default_factory=TaskJournal)
    """Each recent task's records, for the task view (``/task/<id>``)."""
    _undecoded: deque[bytes] = field(default_factory=lambda: deque(maxlen=SHOWN_DECISIONS))
    """Decisions read by :meth:`note_raw` not yet in :attr:`decisions` (oldest first)."""

    def note_record(self, record: Record, decode: Callable[[bytes], Any]) -> None:
        """:meth:`note_raw` of a record read from Kafka, which the task journal also
        keeps when it names a task."""
        if record.value is not None:
            self.note_raw(record.value, decode, record)

    def note_raw(self, raw: bytes, decode: Callable[[bytes], Any],
                 record: Record | None = None) -> None:
        """:meth:`note` of one record as read, without decoding it into an event unless
        needed: telemetry and submissions by their JSON fields, a decision kept as bytes
        (counted now, decoded by :meth:`recent_decisions`). A record whose fields are not
        where this expects them goes through ``decode`` and :meth:`note`. ``record``
        (``raw`` with its position) is kept in :attr:`journal` when it names a task."""
        doc = orjson.loads(raw)
        kind, p = doc.get("type"), doc.get("payload")
        if record is not None and isinstance(p, dict) and isinstance(p.get("task_id"), str):
            self.journal.keep(p["task_id"], record.knowing_head(doc))
        try:
            if kind == "GpuTelemetry":
                self.telemetry[f"{p['node_id']}/{int(p['gpu_index'])}"] = {
                    "util": float(p["gpu_util_pct"]), "temp": float(p["temperature_c"])}
            elif kind == "TaskSubmitted":
                self.tenants[str(p["task_id"])] = str(p["tenant"])
            elif kind in DECISION_EVENTS:  # status reports name a decision_id too
                if kind == "TaskPlaced":
                    self.placed += 1
                self._undecoded.append(raw)
            return
        except (KeyError, TypeError, ValueError):
            pass
        self.note(decode(raw))

    def recent_decisions(self, decode: Callable[[bytes], Any]) -> list[dict[str, Any]]:
        """The last decisions, newest first (decodes those :meth:`note_raw` kept)."""
        while self._undecoded:
            with contextlib.suppress(Exception):  # not shown, as a record note() refuses
                self._note_decision(decode(self._undecoded.popleft()), count=False)
        return list(self.decisions)

    def note(self, envelope: Any) -> None:
        p, kind = envelope.payload, envelope.type
        if kind == "GpuTelemetry":
            self.telemetry[f"{p.node_id}/{p.gpu_index}"] = {
                "util": p.gpu_util_pct, "temp": p.temperature_c}
        elif kind == "TaskSubmitted":
            self.tenants[p.task_id] = p.tenant
        elif kind in DECISION_EVENTS:
            self._note_decision(envelope)

    def _note_decision(self, envelope: Any, count: bool = True) -> None:
        p, kind = envelope.payload, envelope.type
        if count and kind == "TaskPlaced":
            self.placed += 1
        node = getattr(p, "node_id", None) or getattr(p, "to_node_id", None)
        gpus = getattr(p, "gpus", None) or getattr(p, "to_gpus", None) or []
        members = getattr(p, "members", None) or []
        row = {
            "at": envelope.occurred_at.isoformat(), "type": kind, "task": p.task_id,
            "tenant": self.tenants.get(p.task_id, ""), "node": node,
            "gpus": [{"index": g.index, "share_milli": g.share_milli} for g in gpus],
            "reason": explain(p), "candidates": candidates(p)}
        if members:  # a gang is one task: one row naming every member's node
            row["node"] = ", ".join(m.node_id for m in members)
            row["members"] = [{"rank": m.rank, "node": m.node_id,
                               "gpus": [g.index for g in m.gpus]} for m in members]
        self.decisions.appendleft(row)

    def sample(self, share: float, queue: int) -> None:
        """One point of the allocation / queue curves (``pages.allocation``)."""
        self.history.append({"t": time.time(), "allocation": round(share, 4), "queue": queue})

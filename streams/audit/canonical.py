"""Canonical bytes of a placed or unschedulable decision document, without pydantic.

Audit replay spends most of its non-core time validating each decision it makes
and dumping it again (``schemas.codec.encode`` of ``Model.model_validate(doc)``),
only to compare the bytes with the recorded ones. :func:`fast_bytes` writes the
same canonical JSON straight from the document ``streams.adapter`` builds: every
field of the dumped model (defaults filled in), the event time as pydantic writes
it, sorted keys by orjson as ``encode`` does.

It is never the authority. Replay uses these bytes only where they are equal to
the recorded decision's, which the worker produced by the validated path; any
other decision (no record, a difference, a non-canonical record) is validated
and encoded the usual way (``streams.replay``). And if the schema's fields are
not the ones written here (a field added, renamed or dropped), :data:`ENABLED`
is False and :func:`fast_bytes` always answers None.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from pydantic import TypeAdapter

from schemas.codec import MAX_EVENT_BYTES
from schemas.events import (
    Candidate,
    DecisionReason,
    Envelope,
    GpuAssignment,
    PolicyVerdict,
    TaskPlaced,
    TaskUnschedulable,
    message_model,
)
from schemas.events.base import UtcDatetime

ENVELOPE_FIELDS = ("event_id", "type", "version", "source", "occurred_at", "cell",
                   "causation_id", "correlation_id", "payload")
PLACED_FIELDS = ("decision_id", "cause_event_id", "task_id", "node_id", "gpus", "cpu_milli",
                 "memory_mib", "executor", "reason")
UNSCHEDULABLE_FIELDS = ("decision_id", "cause_event_id", "task_id", "resolvable", "verdicts",
                        "nodes_considered", "message")
GPU_FIELDS = ("index", "uuid", "share_milli", "memory_mib")
REASON_FIELDS = ("code", "message", "candidates", "metrics")
CANDIDATE_FIELDS = ("node_id", "gpu_indices", "score", "terms")
VERDICT_FIELDS = ("policy", "code", "reasons", "nodes")

_PLACED = message_model(TaskPlaced.EVENT_TYPE, TaskPlaced.EVENT_VERSION)
_UNSCHEDULABLE = message_model(TaskUnschedulable.EVENT_TYPE, TaskUnschedulable.EVENT_VERSION)
_TIME = TypeAdapter(UtcDatetime)


def _fields_as_written() -> bool:
    """The models' fields are exactly the ones :func:`fast_bytes` writes."""
    expected: list[tuple[Any, tuple[str, ...]]] = [
        (_PLACED, ENVELOPE_FIELDS), (_UNSCHEDULABLE, ENVELOPE_FIELDS),
        (TaskPlaced, PLACED_FIELDS), (TaskUnschedulable, UNSCHEDULABLE_FIELDS),
        (GpuAssignment, GPU_FIELDS), (DecisionReason, REASON_FIELDS),
        (Candidate, CANDIDATE_FIELDS), (PolicyVerdict, VERDICT_FIELDS),
    ]
    return all(model is not None and set(model.model_fields) == set(fields)
               for model, fields in expected)


ENABLED = _fields_as_written()
"""False when the schema changed under this module: replay then validates every decision."""


def _time(value: datetime) -> str:
    return _TIME.dump_python(value, mode="json")  # type: ignore[no-any-return]


def _gpu(g: dict[str, Any]) -> dict[str, Any]:
    return {"index": g["index"], "uuid": g.get("uuid"), "share_milli": g.get("share_milli", 1000),
            "memory_mib": g.get("memory_mib")}


def _reason(r: dict[str, Any]) -> dict[str, Any]:
    return {"code": r["code"], "message": r.get("message", ""),
            "candidates": r.get("candidates", []), "metrics": r.get("metrics", {})}


def _verdict(v: dict[str, Any]) -> dict[str, Any]:
    return {"policy": v["policy"], "code": v["code"], "reasons": v.get("reasons", []),
            "nodes": v.get("nodes", 0)}


def fast_bytes(message_cls: type[Envelope[Any]], doc: dict[str, Any]) -> bytes | None:
    """``encode(message_cls.model_validate(doc))`` for the documents ``streams.adapter``
    builds, unvalidated; None for any other model, when disabled, or over the size limit.

    The documents come from ``streams.adapter.decision_document`` only: every
    candidate already has all its fields, numbers are Python ints and floats.
    """
    if not ENABLED:
        return None
    p = doc["payload"]
    if message_cls is _PLACED:
        payload = {"decision_id": p["decision_id"], "cause_event_id": p["cause_event_id"],
                   "task_id": p["task_id"], "node_id": p["node_id"],
                   "gpus": [_gpu(g) for g in p["gpus"]], "cpu_milli": p.get("cpu_milli", 0),
                   "memory_mib": p.get("memory_mib", 0), "executor": p["executor"],
                   "reason": _reason(p["reason"])}
    elif message_cls is _UNSCHEDULABLE:
        payload = {"decision_id": p["decision_id"], "cause_event_id": p["cause_event_id"],
                   "task_id": p["task_id"], "resolvable": p["resolvable"],
                   "verdicts": [_verdict(v) for v in p["verdicts"]],
                   "nodes_considered": p.get("nodes_considered", 0),
                   "message": p.get("message", "")}
    else:
        return None
    raw = orjson.dumps({
        "event_id": doc["event_id"], "type": doc["type"], "version": doc["version"],
        "source": doc["source"], "occurred_at": _time(doc["occurred_at"]),
        "cell": doc.get("cell"), "causation_id": doc.get("causation_id"),
        "correlation_id": doc.get("correlation_id"), "payload": payload,
    }, option=orjson.OPT_SORT_KEYS)
    return raw if len(raw) <= MAX_EVENT_BYTES else None

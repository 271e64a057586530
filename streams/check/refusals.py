"""Submissions the cluster refused, read from the dead-letter topic. Pure.

A submission the router dead-letters (a forged tenant, an unsigned record, an
unknown principal, a body that does not validate) never reaches a cell's log, so
a check that read only the submissions and the logs took it for lost. It was not
lost: it was refused, with a reason, in a record operators read. The checker
counts such a task as ``refused`` by reason, so ``task_lost`` means lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from schemas.codec import decode, decode_deadletter
from schemas.deadletter import DeadLetter
from schemas.events import Envelope, TaskSubmitted
from schemas.topics import TASKS
from streams.audit.records import logical_topic

_CODE = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class RefusedSubmission:
    """One dead-lettered record of the submissions topic that names a task."""

    task_id: str
    event_id: str | None
    """The submission's event id, when its envelope could be read."""
    reason: str


def refused_submission(value: bytes, prefix: str) -> RefusedSubmission | None:
    """The refused submission a dead-letter record tells of, or None (a dead letter
    of another topic, of a record that names no task, or not a dead letter at all)."""
    try:
        letter = decode_deadletter(value)
    except ValueError:
        return None
    if letter.source_topic is None or logical_topic(letter.source_topic, prefix) != TASKS:
        return None
    original = letter.original()
    env = decode(original)
    if isinstance(env, Envelope):
        if not isinstance(env.payload, TaskSubmitted):
            return None  # a cancellation: it ends nothing, refused or not
        return RefusedSubmission(env.payload.task_id, env.event_id, refusal_reason(letter))
    task_id = _raw_task_id(original)
    if task_id is None or letter.event_type not in (None, TaskSubmitted.EVENT_TYPE):
        return None
    return RefusedSubmission(task_id, letter.event_id, refusal_reason(letter))


def refusal_reason(letter: DeadLetter) -> str:
    """Why the record was refused: the security code (``tenant_forged``, ``unsigned``,
    ``unknown_principal``...), else the dead letter's reason and the first field."""
    if letter.errors:
        first = letter.errors[0]
        if _CODE.fullmatch(first.error) and letter.message.startswith(f"{first.error}:"):
            return first.error
        return f"{letter.reason} ({first.field})"
    return letter.reason


def _raw_task_id(original: bytes) -> str | None:
    """``payload.task_id`` of a record that did not validate, if it has one."""
    try:
        doc = orjson.loads(original)
    except orjson.JSONDecodeError:
        return None
    payload = doc.get("payload") if isinstance(doc, dict) else None
    task_id = payload.get("task_id") if isinstance(payload, dict) else None
    return task_id if isinstance(task_id, str) and task_id else None

"""One Kafka record as the audit tools see it: position, time, key and raw value.

Kept as raw bytes so nothing is lost between Kafka, the export file and the
replay: the replay decodes the same bytes the worker decoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson


@dataclass(frozen=True)
class Record:
    """A record of one topic-partition at one offset (``value`` None: a tombstone)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None

    @cached_property
    def doc(self) -> dict[str, Any] | None:
        """The value parsed as a JSON object, or None (not JSON, not an object, tombstone)."""
        if self.value is None:
            return None
        try:
            doc = orjson.loads(self.value)
        except orjson.JSONDecodeError:
            return None
        return doc if isinstance(doc, dict) else None

    @property
    def event_id(self) -> str | None:
        doc = self.doc
        value = doc.get("event_id") if doc else None
        return value if isinstance(value, str) else None

    @property
    def cell(self) -> str | None:
        """The cell of an input-log or decision record, as the scheduler processor finds it."""
        doc = self.doc
        cell = doc.get("cell") if doc else None
        if isinstance(cell, str) and cell:
            return cell
        return self.key.decode(errors="replace") if self.key else None


def logical_topic(topic: str, prefix: str) -> str:
    """The catalog name of a deployment's topic (``prefix`` stripped)."""
    return topic[len(prefix):] if prefix and topic.startswith(prefix) else topic

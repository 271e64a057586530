"""One Kafka record as the audit tools see it: position, time, key and raw value.

Kept as raw bytes so nothing is lost between Kafka, the export file and the
replay: the replay decodes the same bytes the worker decoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import orjson


class Head(NamedTuple):
    """The envelope fields the audit tools index and check records by (str or None)."""

    event_id: str | None
    type: str | None
    cell: str | None
    causation_id: str | None
    occurred_at: str | None
    source: str | None


def _text(doc: dict[str, Any], name: str) -> str | None:
    value = doc.get(name)
    return value if isinstance(value, str) else None


def head_of(doc: dict[str, Any] | None) -> Head | None:
    """The :class:`Head` of a parsed envelope (None for None)."""
    if doc is None:
        return None
    return Head(_text(doc, "event_id"), _text(doc, "type"), _text(doc, "cell"),
                _text(doc, "causation_id"), _text(doc, "occurred_at"), _text(doc, "source"))


@dataclass(frozen=True)
class Record:
    """A record of one topic-partition at one offset (``value`` None: a tombstone).

    Only the envelope's head is kept once parsed (``head``); ``doc`` parses the
    value again on each call. A parsed envelope holds several times its bytes in
    Python objects, and the audit tools hold every record of a log at once.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None

    @property
    def doc(self) -> dict[str, Any] | None:
        """The value parsed as a JSON object, or None (not JSON, not an object, tombstone)."""
        if self.value is None:
            return None
        try:
            doc = orjson.loads(self.value)
        except orjson.JSONDecodeError:
            return None
        return doc if isinstance(doc, dict) else None

    @cached_property
    def head(self) -> Head | None:
        """The envelope's top-level ids, type, cell, time and source; None where ``doc`` is."""
        return head_of(self.doc)

    def parsed(self) -> dict[str, Any] | None:
        """``doc``, keeping the head from the same parse (an exporter that writes the
        parsed value spares the integrity check a second parse for the head)."""
        doc = self.doc
        if doc is not None and "head" not in self.__dict__:
            self.knowing_head(doc)
        return doc

    def knowing_head(self, doc: dict[str, Any]) -> Record:
        """This record with its head taken from ``doc``, the value already parsed (a
        reader that had to parse it anyway spares ``head`` parsing it again)."""
        self.__dict__["head"] = head_of(doc)  # where cached_property keeps its value
        return self

    @property
    def where(self) -> str:
        """``topic[partition]@offset``: how the audit tools name a record's position."""
        return f"{self.topic}[{self.partition}]@{self.offset}"

    @property
    def event_id(self) -> str | None:
        head = self.head
        return head.event_id if head else None

    @property
    def cell(self) -> str | None:
        """The cell of an input-log or decision record, as the scheduler processor finds it."""
        head = self.head
        if head is not None and head.cell:
            return head.cell
        return self.key.decode(errors="replace") if self.key else None


def logical_topic(topic: str, prefix: str) -> str:
    """The catalog name of a deployment's topic (``prefix`` stripped)."""
    return topic[len(prefix):] if prefix and topic.startswith(prefix) else topic

"""Dead-letter records: what happened to a message the decoder refused.

A refused message is never silently dropped: it goes to ``hetsched.deadletter``
with the reason, each failing field (location, value, message), where it came
from (topic, partition, offset) and its original bytes, so an operator can fix
the producer and re-drive it. The record is plain JSON (not an envelope):
it must be writable even when nothing of the original could be parsed.
"""

from __future__ import annotations

import base64
from typing import Final, Literal

from pydantic import Field, JsonValue

from schemas.events.base import StrictModel

DEADLETTER_VERSION: Final = 1

DeadLetterReason = Literal[
    "invalid_json",
    "not_an_object",
    "invalid_envelope",
    "unknown_type",
    "unknown_version",
    "validation_failed",
    "wrong_topic",
    "internal_error",
]


class FieldError(StrictModel):
    """One validation failure: where, what was there, and what is wrong."""

    field: str
    """Dotted location in the message, e.g. ``payload.resources.gpu_count``."""
    value: JsonValue = None
    """The offending value (JSON), truncated to a string when large."""
    error: str


class DeadLetter(StrictModel):
    """A message the decoder refused, with everything needed to diagnose it."""

    version: Literal[1] = 1
    """Version of this record's schema (``DEADLETTER_VERSION``)."""
    reason: DeadLetterReason
    message: str
    """Human summary of the failure."""
    errors: list[FieldError] = Field(default_factory=list)
    source_topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    timestamp_ms: int | None = None
    """Kafka record timestamp of the original message, if known."""
    key_b64: str | None = None
    """Original record key, base64."""
    original_b64: str
    """Original record value, base64 (standard alphabet, padded)."""
    event_type: str | None = None
    """The ``type`` the message claimed, when it could be read."""
    event_version: int | None = None
    event_id: str | None = None

    def original(self) -> bytes:
        """The original record value."""
        return base64.b64decode(self.original_b64)

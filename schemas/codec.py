"""The one wire codec: orjson bytes <-> typed envelopes, or a dead letter.

Every producer calls :func:`encode`; every consumer calls :func:`decode` (or
:func:`decode_or_deadletter` with the record's position). Decoding never
raises on bad input: it returns a :class:`~schemas.deadletter.DeadLetter`
instead, so a stream can route the poison message aside and go on.

Encoding is canonical (sorted keys, UTC ``Z`` times), so the same event always
has the same bytes; audit replay can compare decisions byte for byte.
"""

from __future__ import annotations

import base64
from typing import Any, TypeGuard

import orjson
from pydantic import BaseModel, ValidationError

from schemas.deadletter import DeadLetter, DeadLetterReason, FieldError
from schemas.events import Envelope, Event, known_versions, message_model

_MAX_VALUE_CHARS = 256
_MAX_ERRORS = 50

MAX_EVENT_BYTES = 512 * 1024
"""Largest encoded event accepted on any topic (512 KiB).

Real events are a few KiB. The limit sits well under Kafka's default
``message.max.bytes`` (about 1 MiB) so that the dead letter of an oversized
record, which carries the original bytes in base64 (4/3 of the size), still
fits on the dead-letter topic. Oversized input is dead-lettered as
``validation_failed`` with a ``too_large:`` message (the v1 reason list is part
of the contract); :func:`encode` refuses to produce such an event at all."""


class EventTooLargeError(ValueError):
    """An event encodes to more than :data:`MAX_EVENT_BYTES`."""


class DecodeError(ValueError):
    """Raised by :func:`decode_event`; carries the dead letter it would have been."""

    def __init__(self, dead_letter: DeadLetter) -> None:
        super().__init__(f"{dead_letter.reason}: {dead_letter.message}")
        self.dead_letter = dead_letter


def encode(envelope: Envelope[Any]) -> bytes:
    """Serialize an envelope to canonical JSON bytes (at most :data:`MAX_EVENT_BYTES`)."""
    raw = orjson.dumps(envelope.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
    if len(raw) > MAX_EVENT_BYTES:
        raise EventTooLargeError(
            f"{envelope.type} {envelope.event_id} encodes to {len(raw)} bytes; "
            f"the limit is {MAX_EVENT_BYTES} (schemas.codec.MAX_EVENT_BYTES)"
        )
    return raw


def trimmed(raw: bytes) -> bytes:
    """``raw`` in an allocation of its own size, for bytes kept for long.

    orjson (3.12 and later) returns bytes that keep the whole buffer it grew while
    writing: 4 KiB or more behind a 700-byte event. Fine for a record sent and
    dropped; a value held for long (an audit log in memory, a replay's decisions)
    is copied once so that it holds only its bytes."""
    return bytes(memoryview(raw))


def encode_deadletter(dead_letter: DeadLetter) -> bytes:
    """Serialize a dead-letter record (plain JSON, not an envelope)."""
    return orjson.dumps(dead_letter.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)


def decode_deadletter(raw: bytes) -> DeadLetter:
    """Parse a record from the dead-letter topic (raises on invalid input)."""
    return DeadLetter.model_validate_json(raw)


def decode(
    raw: bytes | None,
    *,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
    key: bytes | None = None,
    timestamp_ms: int | None = None,
) -> Envelope[Event] | DeadLetter:
    """Bytes to a typed envelope, or a dead letter explaining why not. Never raises.

    When ``topic`` is one of the catalog's topics, an event type that does not
    belong on it is refused as ``wrong_topic``. ``raw`` None is a record's null
    value (a tombstone): its dead letter says so, and what a record on ``topic``
    must be instead (the catalog's entry, also under a deployment's prefix).
    """
    # Where the record came from matters only to a dead letter: kept as a tuple and
    # spelled out by ``_dead`` (nothing built per record that decodes).
    position = (topic, partition, offset, timestamp_ms, key)
    try:
        return _decode(raw, topic, position)
    except Exception as exc:  # the contract is "never raises": last-resort net
        return _dead(raw or b"", position, "internal_error", f"{type(exc).__name__}: {exc}")


def decode_or_deadletter(
    raw: bytes | None,
    topic: str | None,
    partition: int | None,
    offset: int | None,
    *,
    key: bytes | None = None,
    timestamp_ms: int | None = None,
) -> Envelope[Event] | DeadLetter:
    """:func:`decode` with the record's position spelled out."""
    return decode(
        raw, topic=topic, partition=partition, offset=offset, key=key, timestamp_ms=timestamp_ms
    )


def decode_event(raw: bytes, *, topic: str | None = None) -> Envelope[Event]:
    """Like :func:`decode` but raises :class:`DecodeError` for trusted internal paths."""
    result = decode(raw, topic=topic)
    if isinstance(result, DeadLetter):
        raise DecodeError(result)
    return result


_Position = tuple[str | None, int | None, int | None, int | None, bytes | None]
"""(topic, partition, offset, timestamp_ms, key) of a record, for its dead letter."""


def _decode(
    raw: bytes | None, topic: str | None, position: _Position
) -> Envelope[Event] | DeadLetter:
    if raw is None:
        return _dead(b"", position, "invalid_json", _null_value(topic))
    if not isinstance(raw, bytes | bytearray | memoryview):
        return _dead(b"", position, "invalid_json", f"value is {type(raw).__name__}, not bytes")
    if len(raw) > MAX_EVENT_BYTES:
        size = len(raw)
        return _dead(
            raw, position, "validation_failed",
            f"too_large: record is {size} bytes; the limit is {MAX_EVENT_BYTES}",
            [FieldError(field="(record)", value=size,
                        error=f"larger than {MAX_EVENT_BYTES} bytes")],
        )
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _not_json(raw, position, exc)
    if not isinstance(doc, dict):
        return _dead(raw, position, "not_an_object", f"top level is {_json_kind(doc)}")
    event_type, version = doc.get("type"), doc.get("version")
    if not isinstance(event_type, str) or not _is_int(version):
        errors = [
            FieldError(field=name, value=_safe(doc.get(name)), error=msg)
            for name, ok, msg in (
                ("type", isinstance(event_type, str), "must be a string"),
                ("version", _is_int(version), "must be an integer"),
            )
            if not ok
        ]
        return _dead(raw, position, "invalid_envelope", "type/version missing", errors,
                     _claimed(doc))
    model = message_model(event_type, version)
    if model is None:
        versions = known_versions(event_type)
        if versions:
            msg = f"{event_type} version {version} unknown (known: {versions})"
            return _dead(raw, position, "unknown_version", msg, claimed=_claimed(doc))
        return _dead(raw, position, "unknown_type", f"unknown type {event_type!r}",
                     claimed=_claimed(doc))
    allowed = _allowed_types(topic)
    if allowed is not None and event_type not in allowed:
        msg = f"{event_type} is not carried on {topic}"
        return _dead(raw, position, "wrong_topic", msg, claimed=_claimed(doc))
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        errors = [
            FieldError(
                field=".".join(str(p) for p in err["loc"]) or "$",
                value=_safe(err.get("input")),
                error=err["msg"],
            )
            for err in exc.errors(include_url=False)[:_MAX_ERRORS]
        ]
        msg = f"{exc.error_count()} validation error(s) in {event_type} v{version}"
        return _dead(raw, position, "validation_failed", msg, errors, _claimed(doc))


def _not_json(raw: bytes | bytearray | memoryview, position: _Position,
              exc: orjson.JSONDecodeError) -> DeadLetter:
    """The dead letter of a value orjson refused. Invalid UTF-8 is named with its byte
    offset: orjson says only 'str is not valid UTF-8: surrogates not allowed', at char
    0, whatever the bad byte (checked here, off the path of valid records)."""
    data = bytes(raw)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as bad:
        at = bad.start
        detail = f"0x{data[at]:02x}: {bad.reason}"
        return _dead(
            data, position, "invalid_json",
            f"value is not valid UTF-8 at byte offset {at} ({detail}); "
            "every value must be UTF-8 JSON",
            [FieldError(field="(record)", value=at,
                        error=f"not valid UTF-8 at this byte offset ({detail})")],
        )
    return _dead(data, position, "invalid_json", str(exc))


def _null_value(topic: str | None) -> str:
    """What a dead letter says of a null value (a tombstone) on ``topic``."""
    from schemas.topics import DEADLETTER, catalog_spec  # local, as in _allowed_types

    spec = catalog_spec(topic)
    if spec is not None and spec.name == DEADLETTER:
        instead = "a DeadLetter record"
    elif spec is not None and spec.event_types:
        types = list(dict.fromkeys(spec.event_types))
        listed = types[0] if len(types) == 1 else ", ".join(types[:-1]) + " or " + types[-1]
        instead = f"a {listed} event envelope"
    else:
        instead = "an event envelope"
    on = f" on {topic}" if topic else ""
    return (f"value is null (a tombstone), not JSON: a record{on} must be a JSON object, "
            f"{instead} (docs/api.md)")


def _claimed(doc: dict[str, Any]) -> dict[str, Any]:
    """What a refused record says it is (type, version, id), for its dead letter."""
    event_type, version = doc.get("type"), doc.get("version")
    return {
        "event_type": event_type if isinstance(event_type, str) else None,
        "event_version": version if _is_int(version) else None,
        "event_id": doc["event_id"] if isinstance(doc.get("event_id"), str) else None,
    }


def _allowed_types(topic: str | None) -> frozenset[str] | None:
    if topic is None:
        return None
    from schemas.topics import BY_NAME  # local: topics imports nothing from here

    spec = BY_NAME.get(topic)
    return None if spec is None or not spec.event_types else frozenset(spec.event_types)


def _dead(
    raw: bytes | bytearray | memoryview,
    position: _Position,
    reason: DeadLetterReason,
    message: str,
    errors: list[FieldError] | None = None,
    claimed: dict[str, Any] | None = None,
) -> DeadLetter:
    topic, partition, offset, timestamp_ms, key = position
    return DeadLetter(
        reason=reason,
        message=message[:1000],
        errors=errors or [],
        original_b64=_b64(bytes(raw)),
        source_topic=topic,
        partition=partition,
        offset=offset,
        timestamp_ms=timestamp_ms,
        key_b64=_b64(key) if key is not None else None,
        **(claimed or {}),
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_kind(value: object) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _safe(value: Any) -> Any:
    """The value as JSON, or a truncated string when it is large or not JSON."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        return repr(value)[:_MAX_VALUE_CHARS]
    if len(text) > _MAX_VALUE_CHARS:
        return text[:_MAX_VALUE_CHARS] + "..."
    return value

"""Oversized records: refused with a reason on the way in, never produced on the way out."""

from __future__ import annotations

import base64

import orjson
import pytest

from schemas.codec import MAX_EVENT_BYTES, EventTooLargeError, decode, encode
from schemas.deadletter import DeadLetter
from schemas.events import Envelope


def _valid(golden_docs: dict[str, bytes]) -> bytes:
    return golden_docs["TaskSubmitted.v1.json"]


def test_a_record_over_the_limit_is_dead_lettered_with_its_size(golden_docs) -> None:
    doc = orjson.loads(_valid(golden_docs))
    doc["payload"]["executor"]["env"] = {"PAD": "x" * MAX_EVENT_BYTES}
    raw = orjson.dumps(doc)
    result = decode(raw, topic="hetsched.tasks", partition=3, offset=17)
    assert isinstance(result, DeadLetter)
    assert result.reason == "validation_failed"
    assert result.message.startswith(f"too_large: record is {len(raw)} bytes")
    assert result.errors[0].field == "(record)" and result.errors[0].value == len(raw)
    assert (result.source_topic, result.partition, result.offset) == ("hetsched.tasks", 3, 17)
    assert base64.b64decode(result.original_b64) == raw  # nothing is lost


def test_its_dead_letter_still_fits_on_a_default_broker(golden_docs) -> None:
    raw = b'{"pad": "' + b"x" * MAX_EVENT_BYTES + b'"}'
    dead = decode(raw)
    assert isinstance(dead, DeadLetter)
    assert len(orjson.dumps(dead.model_dump(mode="json"))) < 1_048_588  # message.max.bytes


def test_a_record_at_the_limit_is_still_decoded(golden_docs) -> None:
    raw = _valid(golden_docs)
    assert len(raw) <= MAX_EVENT_BYTES
    assert isinstance(decode(raw), Envelope)


def test_encode_refuses_an_oversized_event(golden_docs) -> None:
    envelope = decode(_valid(golden_docs))
    assert isinstance(envelope, Envelope)
    big = envelope.model_copy(update={"payload": envelope.payload.model_copy(update={
        "executor": envelope.payload.executor.model_copy(
            update={"env": {"PAD": "x" * MAX_EVENT_BYTES}})})})
    with pytest.raises(EventTooLargeError, match="the limit is"):
        encode(big)

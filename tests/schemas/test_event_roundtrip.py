"""Every event type survives model -> bytes -> model, and golden fixtures stay readable."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from schemas import (
    EVENT_MODELS,
    DeadLetter,
    Envelope,
    Tick,
    decode,
    encode,
    make_event,
    registered,
)
from schemas.generate import parse_schema_file


def test_every_registered_event_version_has_a_golden_fixture(golden_paths: list[Path]) -> None:
    assert sorted(parse_schema_file(p.name) for p in golden_paths) == registered()


def test_every_event_model_is_registered() -> None:
    assert sorted((m.EVENT_TYPE, m.EVENT_VERSION) for m in EVENT_MODELS) == registered()


def test_the_golden_fixture_decodes_to_its_declared_type(golden: Path) -> None:
    event = decode(golden.read_bytes())
    assert isinstance(event, Envelope), event
    assert (event.type, event.version) == parse_schema_file(golden.name)
    assert event.type == type(event.payload).EVENT_TYPE


def test_model_to_bytes_to_model_is_equal(golden: Path) -> None:
    event = decode(golden.read_bytes())
    assert isinstance(event, Envelope)
    again = decode(encode(event))
    assert again == event
    assert type(again) is type(event)


def test_encoding_is_canonical_and_loses_nothing(golden: Path) -> None:
    event = decode(golden.read_bytes())
    assert isinstance(event, Envelope)
    raw = encode(event)
    assert raw == encode(decode(raw))  # type: ignore[arg-type]
    assert orjson.loads(raw) == orjson.loads(golden.read_bytes())


def test_event_time_is_normalised_to_utc(golden_docs: dict[str, bytes]) -> None:
    doc = orjson.loads(golden_docs["Tick.v1.json"])
    doc["occurred_at"] = "2025-03-01T14:00:00+02:00"
    event = decode(orjson.dumps(doc))
    assert isinstance(event, Envelope)
    assert event.occurred_at == datetime(2025, 3, 1, 12, tzinfo=UTC)
    assert b'"occurred_at":"2025-03-01T12:00:00Z"' in encode(event)


def test_make_event_with_a_seed_is_deterministic() -> None:
    at = datetime(2025, 1, 1, tzinfo=UTC)
    first = make_event(Tick(seq=1, interval_s=10.0), source="t", occurred_at=at, id_seed="c/1")
    second = make_event(Tick(seq=1, interval_s=10.0), source="t", occurred_at=at, id_seed="c/1")
    assert first == second
    assert encode(first) == encode(second)


def test_a_root_event_correlates_with_itself_and_a_caused_one_keeps_the_given_chain() -> None:
    at = datetime(2025, 1, 1, tzinfo=UTC)
    root = make_event(Tick(seq=1, interval_s=1.0), source="t", occurred_at=at)
    assert root.correlation_id == root.event_id
    child = make_event(
        Tick(seq=2, interval_s=1.0),
        source="t",
        occurred_at=at,
        causation_id=root.event_id,
        correlation_id=root.correlation_id,
    )
    assert (child.causation_id, child.correlation_id) == (root.event_id, root.event_id)


def test_make_event_refuses_a_naive_time() -> None:
    with pytest.raises(ValueError):
        make_event(Tick(seq=1, interval_s=1.0), source="t", occurred_at=datetime(2025, 1, 1))


def test_decoding_a_dead_letter_record_as_an_event_gives_a_dead_letter() -> None:
    assert isinstance(decode(b'{"reason": "invalid_json"}'), DeadLetter)

"""Each kind of bad input becomes a dead letter that says exactly what was wrong."""

from __future__ import annotations

import base64

import orjson
import pytest

from schemas import DeadLetter, DecodeError, Envelope, decode, decode_event, decode_or_deadletter
from schemas.codec import decode_deadletter, encode_deadletter


def _tweak(raw: bytes, change) -> bytes:
    doc = orjson.loads(raw)
    change(doc)
    return orjson.dumps(doc)


def _dead(raw: bytes, **kw) -> DeadLetter:
    result = decode(raw, **kw)
    assert isinstance(result, DeadLetter), result
    return result


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param(b"", "invalid_json", id="an empty value is invalid json"),
        pytest.param(b"\x00\xff{", "invalid_json", id="binary garbage is invalid json"),
        pytest.param(b'{"type": "Tick",', "invalid_json", id="truncated json is invalid json"),
        pytest.param(b"[]", "not_an_object", id="an array is not an object"),
        pytest.param(b'"Tick"', "not_an_object", id="a string is not an object"),
        pytest.param(b"{}", "invalid_envelope", id="an object without type is no envelope"),
        pytest.param(b'{"type":"Tick","version":"1"}', "invalid_envelope", id="a string version"),
        pytest.param(b'{"type":"Tick","version":true}', "invalid_envelope", id="a bool version"),
        pytest.param(b'{"type":"Nope","version":1}', "unknown_type", id="an unknown type"),
        pytest.param(b'{"type":"Tick","version":99}', "unknown_version", id="an unknown version"),
    ],
)
def test_bad_input_gives_a_dead_letter_with_its_reason(raw: bytes, reason: str) -> None:
    dead = _dead(raw, topic="hetsched.tasks", partition=2, offset=41, key=b"k")
    assert dead.reason == reason
    assert dead.original() == raw
    assert (dead.source_topic, dead.partition, dead.offset) == ("hetsched.tasks", 2, 41)
    assert base64.b64decode(dead.key_b64 or "") == b"k"


def test_a_validation_failure_names_the_field_the_value_and_the_error(
    golden_docs: dict[str, bytes],
) -> None:
    raw = _tweak(
        golden_docs["TaskSubmitted.v1.json"],
        lambda d: d["payload"]["resources"].update(gpu_count="2"),
    )
    dead = _dead(raw)
    assert dead.reason == "validation_failed"
    assert (dead.event_type, dead.event_version) == ("TaskSubmitted", 1)
    assert dead.event_id is not None
    [error] = dead.errors
    assert error.field == "payload.resources.gpu_count"
    assert error.value == "2"
    assert "integer" in error.error


def test_a_gpu_model_the_catalog_lacks_is_dead_lettered_naming_the_known_ones(
    golden_docs: dict[str, bytes],
) -> None:
    """A client in any language learns at once that ``H999`` is no model, instead of a
    queued task refused later as "gpu model not allowed"."""
    raw = _tweak(
        golden_docs["TaskSubmitted.v1.json"],
        lambda d: d["payload"]["resources"].update(gpu_models=["H999"]),
    )
    dead = _dead(raw, topic="hetsched.tasks")
    assert dead.reason == "validation_failed"
    [error] = dead.errors
    assert error.field == "payload.resources.gpu_models"
    assert error.value == ["H999"]
    assert "unknown GPU model 'H999' (known: A10, A100, G1, G2, G3, H100, K80, L4, L40S, P100, " \
        "RTX2080Ti, RTX6000, T4, V100M16, V100M32)" in error.error


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param(
            lambda d: d.update(occurred_at="2025-03-01T12:00:00"), "occurred_at", id="naive time"
        ),
        pytest.param(
            lambda d: d.update(occurred_at=1740830400), "occurred_at", id="epoch number time"
        ),
        pytest.param(lambda d: d.update(event_id="not-a-ulid"), "event_id", id="a malformed id"),
        pytest.param(
            lambda d: d["payload"].update(surprise=1), "payload.surprise", id="unknown field"
        ),
        pytest.param(lambda d: d["payload"].pop("tenant"), "payload.tenant", id="missing field"),
        pytest.param(
            lambda d: d["payload"].update(priority=True), "payload.priority", id="bool as int"
        ),
        pytest.param(lambda d: d["payload"].update(qos="gold"), "payload.qos", id="unknown enum"),
        pytest.param(
            lambda d: d["payload"]["resources"].update(gpu_share_milli=250),
            "payload.resources",
            id="fractional share on two GPUs",
        ),
    ],
)
def test_each_validation_failure_is_located(change, field: str, golden_docs) -> None:
    dead = _dead(_tweak(golden_docs["TaskSubmitted.v1.json"], change))
    assert dead.reason == "validation_failed"
    assert field in [e.field for e in dead.errors]


def test_an_event_on_the_wrong_topic_is_refused(golden_docs: dict[str, bytes]) -> None:
    raw = golden_docs["TaskPlaced.v1.json"]
    assert _dead(raw, topic="hetsched.tasks").reason == "wrong_topic"
    assert isinstance(decode(raw, topic="hetsched.decisions"), Envelope)
    assert isinstance(decode(raw, topic="someone.elses.topic"), Envelope)


def test_nan_cannot_sneak_in(golden_docs: dict[str, bytes]) -> None:
    raw = golden_docs["Tick.v1.json"].replace(b'"interval_s": 10.0', b'"interval_s": NaN')
    assert _dead(raw).reason == "invalid_json"


def test_a_huge_offending_value_is_truncated(golden_docs: dict[str, bytes]) -> None:
    raw = _tweak(golden_docs["Tick.v1.json"], lambda d: d["payload"].update(seq="x" * 10_000))
    [error] = _dead(raw).errors
    assert isinstance(error.value, str)
    assert len(error.value) < 300


def test_decode_or_deadletter_carries_the_position() -> None:
    dead = decode_or_deadletter(b"nope", "t", 1, 2, timestamp_ms=5)
    assert isinstance(dead, DeadLetter)
    assert (dead.source_topic, dead.partition, dead.offset, dead.timestamp_ms) == ("t", 1, 2, 5)


def test_decode_event_raises_with_the_dead_letter_attached() -> None:
    with pytest.raises(DecodeError) as info:
        decode_event(b"nope")
    assert info.value.dead_letter.reason == "invalid_json"


def test_a_dead_letter_record_round_trips() -> None:
    dead = _dead(b'{"type":"Nope","version":1}', topic="x", partition=0, offset=9)
    assert decode_deadletter(encode_deadletter(dead)) == dead


@pytest.mark.parametrize(
    ("doc", "reason", "claimed"),
    [
        pytest.param({"type": "Tick", "version": "1", "event_id": "x"}, "invalid_envelope",
                     ("Tick", None, "x"), id="invalid envelope"),
        pytest.param({"type": "Nope", "version": 1, "event_id": 5}, "unknown_type",
                     ("Nope", 1, None), id="unknown type"),
        pytest.param({"type": "Tick", "version": 99}, "unknown_version", ("Tick", 99, None),
                     id="unknown version"),
        pytest.param({"type": "Tick", "version": 1, "event_id": "e"}, "validation_failed",
                     ("Tick", 1, "e"), id="validation failed"),
        pytest.param({"type": "TaskSubmitted", "version": 1, "event_id": "e"}, "wrong_topic",
                     ("TaskSubmitted", 1, "e"), id="wrong topic"),
    ],
)
def test_dead_letters_carry_the_records_position_and_claims(doc, reason, claimed) -> None:
    # The codec spells out the position and what the record claims to be only when
    # it refuses the record: every refusal path still writes all of them.
    topic = "not-a-catalog-topic"  # any type may come on it
    if reason == "wrong_topic":
        from schemas.topics import BY_NAME

        topic = next(t for t, spec in BY_NAME.items()
                     if spec.event_types and "TaskSubmitted" not in spec.event_types)
    dead = _dead(orjson.dumps(doc), topic=topic, partition=3, offset=7, key=b"kk",
                 timestamp_ms=1234)
    assert dead.reason == reason
    assert (dead.source_topic, dead.partition, dead.offset, dead.timestamp_ms) == (
        topic, 3, 7, 1234)
    assert base64.b64decode(dead.key_b64 or "") == b"kk"
    assert (dead.event_type, dead.event_version, dead.event_id) == claimed


@pytest.mark.parametrize(
    ("raw", "offset", "detail"),
    [
        pytest.param(b'{"type": "caf\xe9"}', 13, "0xe9: invalid continuation byte",
                     id="latin-1 text"),
        pytest.param(b'{"type": "\xed\xa0\x80"}', 10, "0xed: invalid continuation byte",
                     id="an encoded surrogate (CESU-8)"),
        pytest.param(b"\x00\xff{", 1, "0xff: invalid start byte", id="binary garbage"),
    ],
)
def test_invalid_utf8_says_so_and_at_which_byte(raw: bytes, offset: int, detail: str) -> None:
    """Issue 34, defect 4: not orjson's 'str is not valid UTF-8: surrogates not allowed'."""
    dead = _dead(raw, topic="hetsched.tasks")
    assert dead.reason == "invalid_json"
    assert dead.message == (f"value is not valid UTF-8 at byte offset {offset} ({detail}); "
                            "every value must be UTF-8 JSON")
    assert [(e.field, e.value) for e in dead.errors] == [("(record)", offset)]
    assert dead.original() == raw


def test_valid_utf8_that_is_not_json_keeps_the_json_error() -> None:
    assert _dead(b'{"type": "caf\xc3\xa9",').message.startswith("unexpected end of data")


@pytest.mark.parametrize(
    ("topic", "instead"),
    [
        pytest.param("hetsched.tasks", "a TaskSubmitted or TaskCancelled event envelope",
                     id="the tasks topic"),
        pytest.param("demo-3.hetsched.tasks",
                     "a TaskSubmitted or TaskCancelled event envelope", id="under a prefix"),
        pytest.param("hetsched.telemetry", "a GpuTelemetry or LinkMetrics event envelope",
                     id="telemetry"),
        pytest.param("hetsched.deadletter", "a DeadLetter record", id="dead letters"),
        pytest.param(None, "an event envelope", id="no topic known"),
    ],
)
def test_a_null_value_says_it_is_null_and_what_the_topic_needs_instead(
    topic: str | None, instead: str,
) -> None:
    """Issue 34, defect 4: a tombstone is not 'a zero-length, empty document'."""
    dead = _dead(None, topic=topic, partition=0, offset=3)  # type: ignore[arg-type]
    assert dead.reason == "invalid_json"
    on = f" on {topic}" if topic else ""
    assert dead.message == (f"value is null (a tombstone), not JSON: a record{on} must be "
                            f"a JSON object, {instead} (docs/api.md)")
    assert dead.original_b64 == "" and dead.offset == 3


def test_an_empty_value_is_still_an_empty_document() -> None:
    assert "zero-length" in _dead(b"").message


async def test_a_null_value_read_by_consume_events_is_dead_lettered_as_null() -> None:
    """The path executors and tools take (``schemas.consume``): before the fix the null
    became b"" on the way and read 'Input is a zero-length, empty document'."""
    from types import SimpleNamespace

    from schemas.consume import consume_events

    class Consumer:
        def __aiter__(self):
            return self

        async def __anext__(self):
            if getattr(self, "done", False):
                raise StopAsyncIteration
            self.done = True
            return SimpleNamespace(topic="hetsched.tasks", partition=1, offset=5, key=b"t1",
                                   value=None, timestamp=7, headers=())

    class Producer:
        sent: list[tuple[str, bytes]] = []  # noqa: RUF012

        async def send_and_wait(self, topic: str, value: bytes, key: bytes | None = None):
            self.sent.append((topic, value))

    producer = Producer()
    assert [r async for r in consume_events(Consumer(), producer)] == []  # type: ignore[arg-type]
    [(topic, raw)] = producer.sent
    letter = decode_deadletter(raw)
    assert topic == "hetsched.deadletter" and letter.offset == 5
    assert letter.message.startswith("value is null (a tombstone), not JSON: a record on "
                                     "hetsched.tasks must be a JSON object")


@pytest.mark.parametrize("prefix", ["", "demo-1a2b3c4d."])
async def test_a_tombstone_on_the_compacted_inventory_is_skipped_under_any_prefix(
        prefix: str) -> None:
    """A null value on node-inventory deletes a node (compaction), it is not malformed:
    before, a deployment's prefixed inventory topic was not recognised as compacted and
    every node removal there was dead-lettered."""
    from types import SimpleNamespace

    from schemas.consume import consume_events

    records = [SimpleNamespace(topic=f"{prefix}{topic}", partition=0, offset=n, key=b"n1",
                               value=None, timestamp=7, headers=())
               for n, topic in enumerate(("hetsched.node-inventory", "hetsched.nodes"))]

    class Consumer:
        def __aiter__(self):
            return self

        async def __anext__(self):
            if not records:
                raise StopAsyncIteration
            return records.pop(0)

    class Producer:
        def __init__(self) -> None:
            self.sent: list[bytes] = []

        async def send_and_wait(self, topic: str, value: bytes, key: bytes | None = None):
            self.sent.append(value)

    producer = Producer()
    assert [r async for r in consume_events(Consumer(), producer)] == []  # type: ignore[arg-type]
    [raw] = producer.sent  # only the nodes topic's null, which is not compacted
    assert decode_deadletter(raw).source_topic == f"{prefix}hetsched.nodes"

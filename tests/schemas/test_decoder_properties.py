"""Property: whatever arrives, the decoder returns an event or a dead letter, never raises."""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import DeadLetter, Envelope, decode, encode
from schemas.topics import CATALOG

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=30,
)
topics = st.one_of(st.none(), st.sampled_from([s.name for s in CATALOG]), st.text(max_size=10))


def _check(raw: bytes, topic: str | None) -> None:
    result = decode(raw, topic=topic, partition=0, offset=0)
    assert isinstance(result, Envelope | DeadLetter)
    if isinstance(result, DeadLetter):
        assert result.original() == raw
    else:
        assert decode(encode(result)) == result


@given(raw=st.binary(max_size=512), topic=topics)
def test_random_bytes_decode_or_dead_letter(raw: bytes, topic: str | None) -> None:
    _check(raw, topic)


@given(doc=json_values, topic=topics)
def test_random_json_documents_decode_or_dead_letter(doc: object, topic: str | None) -> None:
    _check(orjson.dumps(doc), topic)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=300)
@given(data=st.data())
def test_mutated_valid_events_decode_or_dead_letter(data, golden_docs: dict[str, bytes]) -> None:
    """Near-misses are the interesting inputs: one field of a real event replaced."""
    name = data.draw(st.sampled_from(sorted(golden_docs)))
    doc = orjson.loads(golden_docs[name])
    target = doc if data.draw(st.booleans()) else doc["payload"]
    key = data.draw(st.sampled_from(sorted(target)) | st.text(max_size=8))
    if data.draw(st.booleans()):
        target[key] = data.draw(json_values)
    else:
        target.pop(key, None)
    _check(orjson.dumps(doc), data.draw(topics))


@given(prefix=st.binary(max_size=8), cut=st.integers(min_value=0, max_value=2000))
def test_truncated_or_prefixed_events_decode_or_dead_letter(
    prefix: bytes, cut: int, golden_docs: dict[str, bytes]
) -> None:
    raw = golden_docs["TaskSubmitted.v1.json"]
    _check(prefix + raw[:cut], None)

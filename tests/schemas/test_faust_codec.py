"""The Faust codecs speak the same wire format as schemas.codec."""

from __future__ import annotations

from faust.serializers import codecs

from schemas import DeadLetter, decode, encode
from schemas.faust_codec import HETSCHED, ORJSON, register_codecs


def test_the_envelope_codec_round_trips_and_never_raises(golden_docs: dict[str, bytes]) -> None:
    register_codecs()
    event = decode(golden_docs["TaskSubmitted.v1.json"])
    raw = codecs.dumps(HETSCHED, event)
    assert raw == encode(event)  # type: ignore[arg-type]
    assert codecs.loads(HETSCHED, raw) == event
    assert isinstance(codecs.loads(HETSCHED, b"\xff"), DeadLetter)


def test_the_orjson_codec_handles_plain_values() -> None:
    register_codecs()
    value = {"b": [1, 2.5, None], "a": "x"}
    raw = codecs.dumps(ORJSON, value)
    assert raw == b'{"a":"x","b":[1,2.5,null]}'
    assert codecs.loads(ORJSON, raw) == value

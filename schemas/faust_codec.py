"""Faust codecs backed by orjson, so Faust agents use the project's wire format.

Importing this module imports Faust (heavy), which is why it is separate from
:mod:`schemas.codec`. Call :func:`register_codecs` once before creating topics:

* ``"orjson"`` -- plain JSON values <-> bytes (tables, changelogs).
* ``"hetsched"`` -- envelopes <-> bytes via :mod:`schemas.codec`. Loading
  never raises: a bad record arrives as a :class:`~schemas.deadletter.DeadLetter`
  for the agent to forward to ``hetsched.deadletter`` (fill in the position
  with ``dl.model_copy(update={...})`` from ``stream.current_event``), instead
  of Faust logging and skipping it.
"""

from __future__ import annotations

from typing import Any

import orjson
from faust.serializers import codecs
from pydantic import BaseModel

from schemas.codec import decode, encode
from schemas.deadletter import DeadLetter
from schemas.events import Envelope

ORJSON = "orjson"
HETSCHED = "hetsched"


class OrjsonCodec(codecs.Codec):
    """JSON with orjson; pydantic models are dumped in JSON mode."""

    def _dumps(self, obj: Any) -> bytes:
        if isinstance(obj, BaseModel):
            obj = obj.model_dump(mode="json")
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)

    def _loads(self, s: bytes) -> Any:
        return orjson.loads(s)


class EnvelopeCodec(codecs.Codec):
    """Typed envelopes; decoding yields an Envelope or a DeadLetter, never raises."""

    def _dumps(self, obj: Any) -> bytes:
        if isinstance(obj, Envelope):
            return encode(obj)
        if isinstance(obj, DeadLetter):
            return orjson.dumps(obj.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
        raise TypeError(f"expected an Envelope, got {type(obj).__name__}")

    def _loads(self, s: bytes) -> Any:
        return decode(s)


def register_codecs() -> None:
    """Register both codecs with Faust (idempotent)."""
    codecs.register(ORJSON, OrjsonCodec())
    codecs.register(HETSCHED, EnvelopeCodec())

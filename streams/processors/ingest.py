"""The cheap path for the bulk of the input: decoding GpuTelemetry, encoding with a cell.

Telemetry is most of what the router reads and the scheduler then reads again from
the input log (issue 11 asks 20,000 events/s per worker). Two functions, each
provably equal to the general path it replaces (the scheduler uses the first):

* :func:`valid_telemetry` returns exactly the envelope
  :func:`schemas.codec.decode` would return for a valid ``GpuTelemetry`` v1
  record: the same parser (``orjson.loads``), the same envelope checks
  (a JSON object, ``type`` a string, ``version`` an int and not a bool), the
  same message model and the same ``model_validate``. It skips decode's
  generic bookkeeping (position dict, type lookup, topic table). Anything else
  -- invalid, oversized, another type or version -- gives None and the caller
  runs :func:`~schemas.codec.decode`, which builds the dead letter (reason,
  field, value) exactly as before: the slow path is the only one that ever
  refuses a record.
* :func:`routed_bytes` returns ``encode(envelope.model_copy(update={"cell":
  cell}))`` byte for byte without copying the model: the canonical encoding
  is orjson with sorted keys of ``model_dump(mode="json")``, and the copy's
  dump differs from the original's only in the ``cell`` value, a string.

Splicing ``cell`` into the record's own bytes would be cheaper still, but it
is byte-equivalent only when the producer's bytes are already canonical
(defaults present, floats written as floats, time in UTC ``Z`` form), and
proving that costs about as much as the dump (see BENCHMARKS.md, "Load and
scale").
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from schemas.codec import MAX_EVENT_BYTES, EventTooLargeError
from schemas.events import GpuTelemetry
from schemas.events.envelope import message_model

_TELEMETRY = message_model(GpuTelemetry.EVENT_TYPE, GpuTelemetry.EVENT_VERSION)
assert _TELEMETRY is not None


def valid_telemetry(raw: bytes) -> Any | None:
    """The decoded envelope when ``raw`` is a valid ``GpuTelemetry`` v1 record, else None
    (then :func:`schemas.codec.decode` decides: another event, or a dead letter)."""
    if type(raw) is not bytes or len(raw) > MAX_EVENT_BYTES:
        return None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(doc) is not dict or doc.get("type") != GpuTelemetry.EVENT_TYPE:
        return None
    version = doc.get("version")
    if type(version) is not int or version != GpuTelemetry.EVENT_VERSION:
        return None
    try:
        return _TELEMETRY.model_validate(doc)
    except ValidationError:
        return None


def routed_bytes(envelope: Any, cell: str) -> bytes:
    """``encode(envelope.model_copy(update={"cell": cell}))``, without the copy."""
    doc = envelope.model_dump(mode="json")
    doc["cell"] = cell
    raw = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    if len(raw) > MAX_EVENT_BYTES:
        raise EventTooLargeError(
            f"{envelope.type} {envelope.event_id} encodes to {len(raw)} bytes; "
            f"the limit is {MAX_EVENT_BYTES} (schemas.codec.MAX_EVENT_BYTES)")
    return raw

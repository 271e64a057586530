"""The cheap path for the bulk of the input: decoding GpuTelemetry, encoding with a cell.

Telemetry is most of what the router reads and the scheduler then reads again from
the input log (issue 11 asks 20,000 events/s per worker). Two functions, each
provably equal to the general path it replaces (the scheduler uses the first),
and :class:`RoutedTelemetry`, through which a worker's scheduler takes the envelope
its own router validated instead of validating the same record a second time:

* :func:`valid_telemetry` returns exactly the envelope
  :func:`schemas.codec.decode` would return for a valid ``GpuTelemetry`` v1
  record: the same parser (``orjson.loads``), the same envelope checks
  (a JSON object, ``type`` a string, ``version`` an int and not a bool), the
  same message model and the same validator ``model_validate`` calls. It skips decode's
  generic bookkeeping (position dict, type lookup, topic table). Anything else
  -- invalid, oversized, another type or version -- gives None and the caller
  runs :func:`~schemas.codec.decode`, which builds the dead letter (reason,
  field, value) exactly as before: the slow path is the only one that ever
  refuses a record.
* :func:`routed_bytes` returns ``encode(envelope.model_copy(update={"cell":
  cell}))`` byte for byte without copying the model: the canonical encoding
  is orjson with sorted keys of ``model_dump(mode="json")``, and the copy's
  dump differs from the original's only in the ``cell`` value, a string. For a
  ``GpuTelemetry`` envelope it skips ``model_dump`` too (5 -> 2 µs, session 6):
  orjson encodes the models' field dicts directly, which gives the same bytes
  because every field of that message is a string, int, float, None, a list of
  those, a nested model of those, or the event time, a UTC datetime that orjson
  writes as pydantic does with ``OPT_UTC_Z`` (no custom serializer, alias or
  computed field; ``tests/service/test_router_ingest.py`` compares the two over
  generated values).

Splicing ``cell`` into the record's own bytes would be cheaper still, but it
is byte-equivalent only when the producer's bytes are already canonical
(defaults present, floats written as floats, time in UTC ``Z`` form), and
proving that costs about as much as the dump (see BENCHMARKS.md, "Load and
scale").
"""

from __future__ import annotations

from collections import deque
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from schemas.codec import MAX_EVENT_BYTES, EventTooLargeError
from schemas.events import GpuTelemetry
from schemas.events.envelope import message_model

_TELEMETRY = message_model(GpuTelemetry.EVENT_TYPE, GpuTelemetry.EVENT_VERSION)
assert _TELEMETRY is not None
# What with_cell and routed_bytes rely on: no extra fields, no private attributes.
assert _TELEMETRY.model_config.get("extra") == "forbid" and not _TELEMETRY.__private_attributes__
_VALIDATE = _TELEMETRY.__pydantic_validator__.validate_python


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
        return _VALIDATE(doc)  # what model_validate(doc) calls, without its wrapper
    except ValidationError:
        return None


_TELEMETRY_DUMP = orjson.OPT_SORT_KEYS | orjson.OPT_UTC_Z
"""How :func:`routed_bytes` writes a GpuTelemetry envelope's fields: keys sorted as
``encode`` does, a UTC time as pydantic's JSON mode does (``...Z``)."""


def _model_fields(obj: Any) -> Any:
    """orjson's fallback for what it does not encode itself: a nested model, as its
    fields (all of them: strict models without extras, private or computed fields)."""
    if isinstance(obj, BaseModel):
        return obj.__dict__
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def routed_bytes(envelope: Any, cell: str) -> bytes:
    """``encode(envelope.model_copy(update={"cell": cell}))``, without the copy (and for
    a GpuTelemetry envelope without ``model_dump``: see the module doc)."""
    if type(envelope) is _TELEMETRY:
        doc = dict(envelope.__dict__)
        doc["cell"] = cell
        raw = orjson.dumps(doc, default=_model_fields, option=_TELEMETRY_DUMP)
    else:
        doc = envelope.model_dump(mode="json")
        doc["cell"] = cell
        raw = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    if len(raw) > MAX_EVENT_BYTES:
        raise EventTooLargeError(
            f"{envelope.type} {envelope.event_id} encodes to {len(raw)} bytes; "
            f"the limit is {MAX_EVENT_BYTES} (schemas.codec.MAX_EVENT_BYTES)")
    return raw


def with_cell(envelope: Any, cell: str) -> Any:
    """``envelope.model_copy(update={"cell": cell})`` (same fields, same fields-set), in
    half the time: pydantic's copy is generic (extras, private attributes, a copy of
    the dict then an update); a message model has neither extras nor private
    attributes, so this is the shallow copy with the cell set."""
    copy = object.__new__(type(envelope))  # what a model's __new__ is: object's
    _set = object.__setattr__
    fields = dict(envelope.__dict__)
    fields["cell"] = cell
    _set(copy, "__dict__", fields)
    _set(copy, "__pydantic_extra__", None)
    _set(copy, "__pydantic_fields_set__", envelope.__pydantic_fields_set__ | {"cell"})
    _set(copy, "__pydantic_private__", None)
    return copy


ROUTED_TELEMETRY_LIMIT = 4096
"""Envelopes :class:`RoutedTelemetry` keeps at most: ~15 MiB (3.6 KiB per telemetry
envelope with its record, tracemalloc). About three router fetches at the default 200
records per partition over 8 partitions; what the scheduler reads later is validated
again. Kept small also for the garbage collector: every entry is a few dozen tracked
objects that each full collection walks."""


class RoutedTelemetry:
    """The envelopes of the GpuTelemetry records a worker's router appended to the input
    log, by the record's exact bytes, for the same worker's scheduler to take.

    Why it is sound to skip the scheduler's validation on a hit: the key is the whole
    record the scheduler read, and the value is what validating exactly those bytes
    returns. The router stores ``envelope`` and its ``cell`` under
    ``routed_bytes(envelope, cell)`` (:meth:`remember`), :meth:`take` returns the
    envelope with the cell set, and ``decode`` of the canonical encoding of a valid
    envelope is that envelope again: the same field values of the same types, the same
    payload class (pinned by ``tests/service/test_routed_telemetry.py``).
    Nothing else matters about the record's origin: an append of an aborted router
    transaction, read by nobody, is evicted like any other; a record written by a router
    in another process, or before a restart, is simply not found and validated as
    before. So the scheduler applies exactly what it applied without this.

    Each entry is taken once (:meth:`take` removes it), so an envelope is never shared
    by two inputs, and memory is bounded by ``limit`` entries, the oldest evicted
    first: a scheduler far behind its router (a backlog: the router's rounds run ahead)
    misses and validates, which costs what it always did. Not thread-safe; both
    processors run on the worker's one event loop.
    """

    def __init__(self, limit: int = ROUTED_TELEMETRY_LIMIT) -> None:
        self.limit = limit
        self._by_record: dict[bytes, Any] = {}
        self._order: deque[bytes] = deque()
        """Keys in the order remembered (taken ones too, until they age out)."""

    def __len__(self) -> int:
        return len(self._by_record)

    def remember(self, raw: bytes, envelope: Any, cell: str) -> None:
        """``envelope`` with ``cell`` set, a valid envelope whose canonical encoding is
        ``raw`` (:func:`routed_bytes`), was appended. The copy with the cell is made by
        :meth:`take`, only for what is taken."""
        if not self.limit:  # keeps nothing: no scheduler in this process to take it
            return
        # A copy of the key: orjson's output keeps its 4-8 KiB write buffer allocated,
        # ten times the record (measured with tracemalloc, orjson 3.13).
        key = bytes(memoryview(raw))
        self._by_record[key] = (envelope, cell)
        order = self._order
        order.append(key)
        if len(order) > self.limit:
            self._by_record.pop(order.popleft(), None)

    def take(self, raw: bytes) -> Any | None:
        """The envelope decoding ``raw`` returns if this worker's router appended ``raw``
        lately (and nobody took it yet), else None (then validate as ever)."""
        found = self._by_record.pop(raw, None)
        if found is None:
            return None
        envelope, cell = found
        return envelope if envelope.cell == cell else with_cell(envelope, cell)

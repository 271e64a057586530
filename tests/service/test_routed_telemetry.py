"""Telemetry is validated once per worker (issue 11): the scheduler takes the envelope its
own router validated for exactly the record it reads (``ingest.RoutedTelemetry``).

These tests pin that this changes nothing the cell sees: the envelope taken is the one
``decode`` returns for the routed bytes (field values and their types, payload class),
for canonical and non-canonical producer records alike; records the router of this
worker did not append (another process, evicted, already taken) are validated as before;
memory stays bounded. Also the router's telemetry path: its ``ROUTED`` counter moves
once per transaction.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from router_fakes import RecordingTxn, offline_router, registration

from schemas.codec import decode, encode
from schemas.deadletter import DeadLetter
from schemas.events import GpuTelemetry, make_event
from streams.processors import scheduling
from streams.processors.ingest import RoutedTelemetry
from streams.processors.routing import Router
from streams.processors.scheduling import CellStore
from streams.profiles.service import service_scheduler

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
AT = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)


def _telemetry_doc(**payload: Any) -> dict[str, Any]:
    env = make_event(GpuTelemetry(node_id="n1", gpu_index=0, gpu_uuid="GPU-n1-0",
                                  gpu_util_pct=50.0, mem_used_mib=1024, temperature_c=40.0,
                                  power_w=60.0), source="agent/n1", occurred_at=AT)
    doc = orjson.loads(encode(env))
    doc["payload"].update(payload)
    return doc


def _msg(topic: str, raw: bytes, offset: int = 0, key: bytes = b"n1") -> Any:
    return SimpleNamespace(topic=topic, partition=0, offset=offset, key=key, value=raw,
                           headers=(), timestamp=None)


def _worker() -> tuple[Router, CellStore]:
    """A router and a scheduler on one context, as ``streams.app`` builds a worker's."""
    router = offline_router(cells=1, partitions=1)
    store = CellStore(router.ctx, service_scheduler(router.ctx.settings.profile), "t-sum")
    store.restore(0, {})
    asyncio.run(router.process(_msg("hetsched.nodes", encode(registration("n1", "cell-0",
                                                                           AT))), RecordingTxn()))
    return router, store


def _route(router: Router, raw: bytes) -> bytes:
    """The input-log record the router appends for the telemetry record ``raw``."""
    txn = RecordingTxn()
    asyncio.run(router.process(_msg("hetsched.telemetry", raw), txn))
    [(topic, key, routed)] = txn.sent
    assert (topic, key) == ("hetsched.input-log", b"cell-0")
    return routed


def _schedule(store: CellStore, routed: bytes, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The envelopes that reach ``apply`` for the input-log record ``routed``."""
    seen: list[Any] = []
    monkeypatch.setattr(scheduling, "apply", lambda cell, value: seen.append(value) or [])
    asyncio.run(store.process(_msg("hetsched.input-log", routed, key=b"cell-0"), RecordingTxn()))
    return seen


def _identical(got: Any, want: Any) -> None:
    """Equal, and equal down to the types of the values (``150`` is not ``150.0``)."""
    assert got == want
    assert type(got) is type(want) and type(got.payload) is type(want.payload)
    assert repr(got.model_dump()) == repr(want.model_dump())


def _never(*_: Any, **__: Any) -> Any:
    raise AssertionError("validated a second time")


# Valid producer records, canonical or not: the router's bytes are canonical either way.
PRODUCER_RECORDS = [
    encode(decode(orjson.dumps(_telemetry_doc()))),  # type: ignore[arg-type]
    orjson.dumps(_telemetry_doc(mem_util_pct=20.0, xid_errors=[31, 79], ecc_dbe_total=2,
                                throttle_reasons=["hw_slowdown"], foreign_mem_mib=7)),
    # an int for a float, another UTC offset, defaults left out, keys unsorted, indented
    orjson.dumps({**{k: v for k, v in _telemetry_doc(power_w=60, temperature_c=-0.0).items()
                     if k not in ("causation_id", "cell")},
                  "occurred_at": "2026-11-29T13:00:00.5+01:00"}, option=orjson.OPT_INDENT_2),
]


def test_the_scheduler_takes_the_routers_envelope_and_it_is_what_decode_returns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    router, store = _worker()
    for raw in PRODUCER_RECORDS:
        routed = _route(router, raw)
        want = decode(routed)
        assert not isinstance(want, DeadLetter)
        with monkeypatch.context() as m:
            m.setattr(scheduling, "valid_telemetry", _never)
            m.setattr(scheduling, "decode", _never)
            [got] = _schedule(store, routed, m)
        _identical(got, want)
    assert len(router.ctx.routed) == 0  # each taken once


def test_a_record_this_worker_did_not_route_is_validated_as_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    router, store = _worker()
    routed = _route(router, PRODUCER_RECORDS[1])
    _, other_store = _worker()  # another worker: its own context
    calls: list[bytes] = []
    real = scheduling.valid_telemetry
    monkeypatch.setattr(scheduling, "valid_telemetry", lambda raw: calls.append(raw) or real(raw))
    [got] = _schedule(other_store, routed, monkeypatch)
    assert calls == [routed]
    _identical(got, decode(routed))
    # In this worker the first read takes it; a second read of the same bytes (a round
    # re-read after an abort) validates again.
    [first] = _schedule(store, routed, monkeypatch)
    [again] = _schedule(store, routed, monkeypatch)
    assert calls == [routed, routed]
    _identical(first, again)


@FUZZ
@given(util=st.floats(0, 100) | st.integers(0, 100), power=st.floats(0, 1e6) | st.integers(0, 9),
       temp=st.floats(-1e3, 1e3) | st.integers(-50, 120), xids=st.lists(st.integers(0, 99)),
       when=st.sampled_from(["2026-11-29T12:00:00Z", "2026-11-29T12:00:00.000001+05:30",
                             "2026-11-29T23:59:59.999999-11:00", "2026-11-29 12:00:00Z"]),
       cell=st.sampled_from([None, "cell-0", "other-cell"]))
def test_any_valid_record_reaches_the_cell_as_decode_of_its_routed_bytes(
        util: Any, power: Any, temp: Any, xids: list[int], when: str, cell: str | None) -> None:
    doc = _telemetry_doc(gpu_util_pct=util, power_w=power, temperature_c=temp, xid_errors=xids)
    doc.update(occurred_at=when, cell=cell)
    router, store = _worker()
    routed = _route(router, orjson.dumps(doc))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(scheduling, "valid_telemetry", _never)
        [got] = _schedule(store, routed, m)
    _identical(got, decode(routed))


def test_memory_is_bounded_oldest_first_and_each_entry_is_taken_once() -> None:
    routed = RoutedTelemetry(limit=3)
    envelopes = [SimpleNamespace(cell="cell-0", n=i) for i in range(5)]
    for i, envelope in enumerate(envelopes):
        routed.remember(b"r%d" % i, envelope, "cell-0")
    assert len(routed) == 3
    assert [routed.take(b"r%d" % i) for i in range(5)] == [None, None, *envelopes[2:]]
    assert routed.take(b"r4") is None and len(routed) == 0
    routed.remember(b"x", envelopes[0], "cell-0")
    routed.remember(b"x", envelopes[1], "cell-0")  # the same bytes twice: the later one
    assert len(routed) == 1 and routed.take(b"x") is envelopes[1]


def test_routed_events_are_counted_once_the_transaction_finishes() -> None:
    """``hetsched_routed_total`` advances per transaction (one ``inc`` per type)."""
    from prometheus_client import REGISTRY

    def counted() -> float:
        return REGISTRY.get_sample_value("hetsched_routed_total",
                                         {"type": "GpuTelemetry"}) or 0.0

    router, _ = _worker()
    txn = RecordingTxn()
    before = counted()

    async def batch() -> None:
        for offset, raw in enumerate(PRODUCER_RECORDS):
            await router.process(_msg("hetsched.telemetry", raw, offset), txn)
        assert counted() == before  # not yet: once per transaction
        await router.finish(0, txn)  # type: ignore[arg-type]

    asyncio.run(batch())
    assert counted() == before + len(PRODUCER_RECORDS)


def test_a_table_of_limit_zero_keeps_nothing() -> None:
    """A router-only process (``HETSCHED_PROCESSORS=router``) has no scheduler to take
    envelopes: its table remembers none (streams.app)."""
    from streams.processors.ingest import RoutedTelemetry

    table = RoutedTelemetry(limit=0)
    table.remember(b"record", object(), "cell-0")
    assert len(table) == 0
    assert table.take(b"record") is None


def test_the_cell_is_set_without_pydantics_generic_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ingest.with_cell`` (session 6) is ``model_copy(update={"cell": ...})``: the same
    fields and fields-set, still frozen, the original untouched; ``take`` uses it."""
    from pydantic import BaseModel, ValidationError

    from streams.processors.ingest import with_cell

    for raw in PRODUCER_RECORDS:
        env = decode(raw)
        want = env.model_copy(update={"cell": "cell-7"})
        got = with_cell(env, "cell-7")
        _identical(got, want)
        assert got.model_fields_set == want.model_fields_set
        assert env.cell is None and got.payload is env.payload
        with pytest.raises(ValidationError):
            got.cell = "other"  # frozen, as every message
        table = RoutedTelemetry()
        table.remember(b"routed", env, "cell-7")
        with monkeypatch.context() as m:
            m.setattr(BaseModel, "model_copy", _never)
            _identical(table.take(b"routed"), want)

"""The scheduler's telemetry decode hands the cell exactly what ``decode`` would (issue 11).

``CellStore.process`` decodes GpuTelemetry records that end like the router's canonical
output with ``streams.processors.ingest.valid_telemetry`` instead of
``schemas.codec.decode``. These tests pin that the envelope reaching ``apply`` (and so the
core) is the one decode returns, for the router's records and for mutated ones, and that
whatever decode refuses is still dead-lettered with the field named.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from router_fakes import RecordingTxn

from schemas.codec import decode, encode_deadletter
from schemas.deadletter import DeadLetter
from schemas.events import GpuTelemetry, make_event
from streams.processors import scheduling
from streams.processors.context import Context
from streams.processors.ingest import routed_bytes
from streams.processors.scheduling import CellStore
from streams.profiles.service import service_scheduler
from streams.settings import WorkerSettings

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
AT = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)


def _routed(**extra: Any) -> bytes:
    payload = GpuTelemetry(node_id="n1", gpu_index=0, gpu_uuid="GPU-n1-0", gpu_util_pct=50.0,
                           mem_used_mib=1024, temperature_c=40.0, power_w=60.0, **extra)
    return routed_bytes(make_event(payload, source="agent/n1", occurred_at=AT), "cell-0")


def _store() -> CellStore:
    settings_ = WorkerSettings(bootstrap="-", app_id="t", web_port=0, web_host="-",
                               data_dir=Path("."), cells=1, partitions=1, replication=1,
                               tick_s=1.0, profile="hetsched")
    ctx = Context(settings_, SimpleNamespace(items=lambda: []))  # type: ignore[arg-type]
    store = CellStore(ctx, service_scheduler(settings_.profile), "t-summaries")
    store.restore(0, {})
    return store


def _through_store(raw: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], Any]:
    """(envelopes that reached ``apply``, the recording transaction) for one record."""
    seen: list[Any] = []
    monkeypatch.setattr(scheduling, "apply", lambda cell, value: seen.append(value) or [])
    txn = RecordingTxn()
    msg = SimpleNamespace(topic="t.hetsched.input-log", partition=0, offset=7, key=b"cell-0",
                          value=raw, timestamp=None, headers=())
    asyncio.run(_store().process(msg, txn))  # type: ignore[arg-type]
    return seen, txn


def _same_as_decode(raw: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    seen, txn = _through_store(raw, monkeypatch)
    expected = decode(raw)
    if isinstance(expected, DeadLetter):
        assert seen == []
        [(_, _, letter)] = txn.sent
        got = orjson.loads(letter)
        want = orjson.loads(encode_deadletter(expected))
        assert (got["reason"], got["errors"]) == (want["reason"], want["errors"])
    else:
        assert seen == [expected]
        assert type(seen[0].payload) is type(expected.payload)


def test_the_routers_records_reach_the_cell_as_decode_returns_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for raw in (_routed(), _routed(mem_util_pct=20.0, xid_errors=[31, 79], ecc_dbe_total=2,
                                   throttle_reasons=["hw_slowdown"], foreign_mem_mib=7)):
        assert raw.endswith(scheduling._TELEMETRY_TAIL)  # the fast path is taken
        _same_as_decode(raw, monkeypatch)


def test_invalid_telemetry_in_the_input_log_is_still_dead_lettered_with_the_field(
        monkeypatch: pytest.MonkeyPatch) -> None:
    doc = orjson.loads(_routed())
    doc["payload"]["gpu_index"] = -1
    raw = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    assert raw.endswith(scheduling._TELEMETRY_TAIL)
    seen, txn = _through_store(raw, monkeypatch)
    assert seen == []
    [(_, _, letter)] = txn.sent
    got = orjson.loads(letter)
    assert got["reason"] == "validation_failed"
    assert [e["field"] for e in got["errors"]] == ["payload.gpu_index"]
    _same_as_decode(raw, monkeypatch)


@FUZZ
@given(data=st.data())
def test_mutated_records_reach_the_cell_as_decode_returns_them(data: st.DataObject) -> None:
    raw = bytearray(_routed(mem_util_pct=12.5, xid_errors=[13]))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.sampled_from(b'0123456789.-+eE"{}[],:nulltruefalse xZ'))
    with pytest.MonkeyPatch.context() as monkeypatch:
        _same_as_decode(bytes(raw), monkeypatch)


def test_inputs_are_counted_by_type_once_the_transaction_finishes() -> None:
    """``hetsched_inputs_total`` advances per transaction (one ``inc`` per type), by the
    number of records the transaction processed."""
    from prometheus_client import REGISTRY

    def counted(kind: str) -> float:
        return REGISTRY.get_sample_value("hetsched_inputs_total", {"type": kind}) or 0.0

    store = _store()
    txn = RecordingTxn()
    raws = [_routed(), _routed(ecc_sbe_total=2), _routed(mem_util_pct=12.0)]
    before = counted("GpuTelemetry")

    async def batch() -> None:
        for offset, raw in enumerate(raws):
            msg = SimpleNamespace(topic="t.hetsched.input-log", partition=0, offset=offset,
                                  key=b"cell-0", value=raw, timestamp=None, headers=())
            await store.process(msg, txn)  # type: ignore[arg-type]
        assert counted("GpuTelemetry") == before  # not yet: once per transaction
        await store.finish(0, txn)  # type: ignore[arg-type]

    asyncio.run(batch())
    assert counted("GpuTelemetry") == before + 3

"""The router's telemetry fast path decides exactly as the general path (issue 11).

``streams.processors.ingest`` skips ``schemas.codec.decode``'s bookkeeping and the
model copy for ``GpuTelemetry``; these tests hold it to the general path: the same
envelope for every valid record, nothing for any record decode refuses (which the
router then dead-letters with field and value as before), and the same routed bytes.
"""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from router_fakes import RecordingTxn, offline_router, registration

from schemas.codec import MAX_EVENT_BYTES, decode, encode
from schemas.deadletter import DeadLetter
from schemas.events import GpuTelemetry, TaskSubmitted, make_event
from streams.processors.ingest import routed_bytes, valid_telemetry
from streams.processors.routing import Router

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
AT = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)


def _telemetry(node: str = "n1", **extra: Any) -> Any:
    payload = GpuTelemetry(node_id=node, gpu_index=0, gpu_uuid=f"GPU-{node}-0",
                           gpu_util_pct=50.0, mem_used_mib=1024, temperature_c=40.0,
                           power_w=60.0, **extra)
    return make_event(payload, source=f"agent/{node}", occurred_at=AT)


def _doc(**changes: Any) -> dict[str, Any]:
    doc = orjson.loads(encode(_telemetry()))
    payload = changes.pop("payload", {})
    doc.update(changes)
    doc["payload"].update(payload)
    return doc


def _same_as_decode(raw: bytes) -> None:
    fast, slow = valid_telemetry(raw), decode(raw)
    if isinstance(slow, DeadLetter) or slow.type != "GpuTelemetry":
        assert fast is None
    else:
        assert fast == slow
        assert routed_bytes(fast, "cell-3") == encode(slow.model_copy(update={"cell": "cell-3"}))


def test_valid_records_decode_the_same_canonical_or_not():
    _same_as_decode(encode(_telemetry()))
    _same_as_decode(encode(_telemetry(mem_util_pct=20.0, xid_errors=[31], ecc_dbe_total=2,
                                      throttle_reasons=["hw_slowdown"], foreign_mem_mib=7)))
    # Valid but not canonical: int for a float, another offset, defaults left out,
    # keys unsorted, whitespace. Still the same envelope and the same routed bytes.
    doc = _doc(occurred_at="2026-11-29T13:00:00.5+01:00", payload={"power_w": 60})
    for key in ("ecc_sbe_total", "xid_errors", "triggers", "foreign_mem_mib"):
        del doc["payload"][key]
    del doc["causation_id"]
    _same_as_decode(orjson.dumps(doc))
    _same_as_decode(b"  " + orjson.dumps(doc, option=orjson.OPT_INDENT_2))


def test_whatever_decode_refuses_the_fast_path_leaves_to_it():
    for bad in (
        _doc(version=True), _doc(version=1.0), _doc(version=2), _doc(type="NodeHeartbeat"),
        _doc(extra_field=1), _doc(cell="no spaces allowed"), _doc(event_id="not-a-ulid"),
        _doc(occurred_at="2026-11-29T12:00:00"), _doc(payload={"gpu_util_pct": 101.0}),
        _doc(payload={"gpu_util_pct": "5"}), _doc(payload={"mem_used_mib": -1}),
        _doc(payload={"mem_used_mib": 1.0}), _doc(payload={"gpu_index": True}),
        _doc(payload={"throttle_reasons": ["made_up"]}), _doc(payload={"unknown": 0}),
    ):
        _same_as_decode(orjson.dumps(bad))
    for raw in (b"", b"null", b"[]", b'{"type": "GpuTelemetry"}', b"{", b'{"version": 1}',
                encode(_telemetry())[:-1], b'{"a": 18446744073709551616}',
                encode(_telemetry()) + b" " * MAX_EVENT_BYTES):
        _same_as_decode(raw)


@FUZZ
@given(data=st.data())
def test_mutated_records_decode_the_same(data: st.DataObject):
    raw = bytearray(encode(_telemetry(mem_util_pct=12.5, xid_errors=[13])))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.sampled_from(b'0123456789.-+eE"{}[],:nulltruefalse xZ'))
    _same_as_decode(bytes(raw))


@FUZZ
@given(util=st.floats(allow_nan=False) | st.integers(-5, 200),
       mem=st.integers(-3, 2**63 - 1) | st.floats(), xids=st.lists(st.integers(-1, 99)),
       when=st.sampled_from(["2026-11-29T12:00:00Z", "2026-11-29T12:00:00.000001+05:30",
                             "2026-11-29 12:00:00Z", "2026-11-29T12:00:00", 0, None]))
def test_any_field_values_decode_the_same(util: Any, mem: Any, xids: list[int], when: Any):
    _same_as_decode(orjson.dumps(_doc(occurred_at=when, payload={
        "gpu_util_pct": util, "mem_used_mib": mem, "xid_errors": xids})))


# --- through the router ------------------------------------------------------------


def _router() -> Router:
    return offline_router(cells=2, partitions=1)


def _msg(topic: str, raw: bytes, offset: int = 0) -> Any:
    return SimpleNamespace(topic=topic, partition=0, offset=offset, key=b"n1", value=raw,
                           headers=(), timestamp=None)


def _register(router: Router, txn: RecordingTxn) -> None:
    node = registration("n1", "cell-1", AT)
    asyncio.run(router.process(_msg("hetsched.nodes", encode(node)), txn))


def test_routed_telemetry_is_the_canonical_envelope_with_its_cell():
    router, txn = _router(), RecordingTxn()
    _register(router, txn)
    env = _telemetry(xid_errors=[79])
    asyncio.run(router.process(_msg("hetsched.telemetry", encode(env)), txn))
    topic, key, raw = txn.sent[-1]
    assert (topic, key) == ("hetsched.input-log", b"cell-1")
    assert raw == encode(env.model_copy(update={"cell": "cell-1"}))


def test_invalid_telemetry_of_a_registered_node_is_dead_lettered_with_field_and_value():
    router, txn = _router(), RecordingTxn()
    _register(router, txn)
    raw = orjson.dumps(_doc(payload={"node_id": "n1", "gpu_util_pct": 140.0}))
    asyncio.run(router.process(_msg("hetsched.telemetry", raw, offset=7), txn))
    topic, _, letter_raw = txn.sent[-1]
    assert topic == "hetsched.deadletter"
    letter = orjson.loads(letter_raw)
    assert letter["reason"] == "validation_failed" and letter["offset"] == 7
    error = letter["errors"][0]
    assert (error["field"], error["value"]) == ("payload.gpu_util_pct", 140.0)
    assert base64.b64decode(letter["original_b64"]) == raw


def test_a_null_value_is_dead_lettered_saying_it_is_null_and_what_the_topic_needs():
    """Issue 34, defect 4: a tombstone on the tasks topic read 'zero-length, empty
    document'; it says what a record there must be, under a deployment's prefix too."""
    router, txn = _router(), RecordingTxn()
    asyncio.run(router.process(_msg("hetsched.tasks", None, offset=4), txn))  # type: ignore[arg-type]
    topic, key, letter_raw = txn.sent[-1]
    assert (topic, key) == ("hetsched.deadletter", b"hetsched.tasks")
    letter = orjson.loads(letter_raw)
    assert (letter["reason"], letter["offset"], letter["original_b64"]) == ("invalid_json", 4, "")
    assert letter["message"] == (
        "value is null (a tombstone), not JSON: a record on hetsched.tasks must be a JSON "
        "object, a TaskSubmitted or TaskCancelled event envelope (docs/api.md)")


def test_telemetry_of_an_unregistered_node_is_still_parked_until_it_registers():
    router, txn = _router(), RecordingTxn()
    env = _telemetry()
    asyncio.run(router.process(_msg("hetsched.telemetry", encode(env)), txn))
    assert txn.sent == [] and "early/n1" in router.state[0]
    _register(router, txn)
    assert [decode(v).type for _, _, v in txn.sent] == ["NodeRegistered", "GpuTelemetry"]


# --- the routed bytes of a GpuTelemetry envelope, written without model_dump ----------

_ids = st.text("0123456789ABCDEFGHJKMNPQRSTVWXYZ", min_size=26, max_size=26)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_times = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                      timezones=st.timezones()) | st.datetimes(timezones=st.just(UTC))


@st.composite
def _telemetry_envelopes(draw: st.DrawFn) -> Any:
    """Valid GpuTelemetry envelopes over the whole range of every field."""
    names = st.text(min_size=1, max_size=40)
    optional = draw(st.booleans())
    crossing = st.fixed_dictionaries({
        "metric": st.sampled_from(["gpu_util_pct", "mem_used_pct", "temperature_c",
                                   "power_w", "throttle", "ecc_errors", "xid_errors"]),
        "direction": st.sampled_from(["rising", "falling"]),
        "threshold": _floats, "value": _floats})
    payload = GpuTelemetry.model_validate({
        "node_id": draw(names), "gpu_index": draw(st.integers(0, 2**63 - 1)),
        "gpu_uuid": draw(names), "gpu_util_pct": draw(st.floats(0, 100)),
        "mem_used_mib": draw(st.integers(0, 2**63 - 1)),
        "mem_util_pct": draw(st.none() | st.floats(0, 100)),
        "temperature_c": draw(_floats), "power_w": draw(st.floats(0, 1e308)),
        "throttle_reasons": draw(st.lists(st.sampled_from(["hw_slowdown", "sw_power_cap"]))),
        "ecc_sbe_total": draw(st.integers(0, 2**63 - 1)),
        "xid_errors": draw(st.lists(st.integers(0, 2**63 - 1), max_size=3)),
        "triggers": draw(st.lists(crossing, max_size=3)),
        "foreign_mem_mib": draw(st.none() | st.integers(0, 2**63 - 1)),
    })
    return make_event(payload, source=draw(names), occurred_at=draw(_times),
                      cell=draw(st.none() | st.sampled_from(["cell-0", "c.1_x"])),
                      causation_id=draw(_ids) if optional else None,
                      correlation_id=draw(_ids), event_id=draw(_ids))


@FUZZ
@given(env=_telemetry_envelopes(), cell=st.sampled_from(["cell-0", "A", "cell-9.b_c"]))
def test_routed_telemetry_bytes_are_encode_of_the_copy_with_its_cell(env: Any, cell: str):
    assert routed_bytes(env, cell) == encode(env.model_copy(update={"cell": cell}))


def test_routed_telemetry_bytes_need_no_model_dump(monkeypatch: pytest.MonkeyPatch):
    """The cheap encoding (issue 11, session 6): a GpuTelemetry envelope's routed bytes
    come from its fields directly; ``model_dump`` (5 µs a record) is not called."""
    env = _telemetry(xid_errors=[79], triggers=[{"metric": "power_w", "direction": "rising",
                                                 "threshold": 300.0, "value": 301.5}])
    want = encode(env.model_copy(update={"cell": "cell-1"}))

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("model_dump called")

    monkeypatch.setattr(BaseModel, "model_dump", refuse)
    assert routed_bytes(env, "cell-1") == want


def _keyed(topic: str, raw: bytes, key: bytes | None) -> Any:
    return SimpleNamespace(topic=topic, partition=0, offset=3, key=key, value=raw,
                           headers=(), timestamp=None)


@pytest.mark.parametrize("key", [b"n2", None], ids=["another node", "no key"])
def test_telemetry_keyed_by_another_node_is_dead_lettered_not_routed(key: bytes | None):
    """Issue 34: a record's key is what the partitioner hashes, so one keyed otherwise than
    its topic says can be overtaken by its node's or task's later records. The fast path
    must not route it either."""
    router, txn = _router(), RecordingTxn()
    _register(router, txn)
    raw = encode(_telemetry())
    asyncio.run(router.process(_keyed("hetsched.telemetry", raw, key), txn))
    topic, _, letter_raw = txn.sent[-1]
    assert topic == "hetsched.deadletter"
    letter = orjson.loads(letter_raw)
    got = "'n2'" if key else "no key (null)"
    assert letter["reason"] == "validation_failed"
    assert letter["message"] == (
        f"wrong_key: the record's key is {got}; a record on hetsched.telemetry is keyed by "
        "its node_id, 'n1' (docs/api.md, Keys and partitioner)")
    assert letter["errors"][0]["field"] == "(key)"
    assert letter["errors"][0]["value"] == (key.decode() if key else None)
    assert (letter["event_type"], base64.b64decode(letter["original_b64"])) == (
        "GpuTelemetry", raw)


def test_a_submission_keyed_by_another_task_is_dead_lettered_and_the_right_key_routes():
    router, txn = _router(), RecordingTxn()
    _register(router, txn)
    submitted = make_event(TaskSubmitted.model_validate({
        "task_id": "train-9", "tenant": "team-a", "resources": {"gpu_count": 1},
        "executor": {"kind": "process", "argv": ["true"]}}), source="cli", occurred_at=AT)
    raw = encode(submitted)
    asyncio.run(router.process(_keyed("hetsched.tasks", raw, b"train-8"), txn))
    topic, _, letter_raw = txn.sent[-1]
    assert topic == "hetsched.deadletter"
    assert orjson.loads(letter_raw)["message"].startswith(
        "wrong_key: the record's key is 'train-8'; a record on hetsched.tasks is keyed by "
        "its task_id, 'train-9'")
    asyncio.run(router.process(_keyed("hetsched.tasks", raw, b"train-9"), txn))
    topic, key, routed = txn.sent[-1]
    assert (topic, key, decode(routed).type) == ("hetsched.input-log", b"cell-1", "TaskSubmitted")

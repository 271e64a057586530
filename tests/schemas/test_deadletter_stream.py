"""Against the real broker: poison messages go to dead letters, valid ones flow in order.

Needs the session fixture ``kafka_bootstrap`` from ``tests/conftest.py`` (the
project's broker). Each test uses its own uuid-suffixed topics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from schemas import Tick, decode_deadletter, encode, make_event
from schemas.admin import ensure_topics
from schemas.consume import PRODUCER_DEFAULTS, consume_events
from schemas.topics import CATALOG, TopicSpec

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 1, tzinfo=UTC)
TIMEOUT_S = 60.0


def _spec(name: str, partitions: int = 1) -> TopicSpec:
    return TopicSpec(
        name=name,
        key="cell",
        partitions=partitions,
        cleanup_policy="delete",
        retention_ms=3_600_000,
        description="test topic",
    )


def _tick(seq: int) -> bytes:
    at = T0 + timedelta(seconds=seq)
    return encode(
        make_event(Tick(seq=seq, interval_s=1.0), source="test", occurred_at=at, cell="c")
    )


def _poison(seq: int) -> tuple[bytes, str]:
    """Four kinds of poison, cycled."""
    good = orjson.loads(_tick(seq))
    kinds = [
        (b"{not json", "invalid_json"),
        (orjson.dumps({**good, "type": "Nope"}), "unknown_type"),
        (orjson.dumps({**good, "version": 7}), "unknown_version"),
        (orjson.dumps({**good, "payload": {"seq": "x", "interval_s": 1.0}}), "validation_failed"),
    ]
    return kinds[seq % len(kinds)]


async def test_ensure_topics_is_idempotent(kafka_bootstrap: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    catalog = [dataclasses.replace(s, name=f"{s.name}-{suffix}") for s in CATALOG]
    first = await ensure_topics(kafka_bootstrap, catalog, partitions=1)
    assert sorted(first) == sorted(s.name for s in catalog)
    assert await ensure_topics(kafka_bootstrap, catalog, partitions=1) == []


async def test_poison_goes_to_dead_letters_and_valid_events_flow_in_order(
    kafka_bootstrap: str,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, dead = f"hetsched.test-events-{suffix}", f"hetsched.test-deadletter-{suffix}"
    await ensure_topics(kafka_bootstrap, [_spec(source), _spec(dead)])

    sent_valid: list[int] = []
    sent_poison: list[tuple[bytes, str]] = []
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, **PRODUCER_DEFAULTS)
    await producer.start()
    try:
        for seq in range(40):
            if seq == 37:
                raw, reason = None, "invalid_json"  # a null value on a non-compacted topic
                sent_poison.append((b"", reason))
            elif seq % 3 == 1:
                raw, reason = _poison(seq)
                sent_poison.append((raw, reason))
            else:
                raw = _tick(seq)
                sent_valid.append(seq)
            await producer.send_and_wait(source, raw, key=b"c")

        consumer = AIOKafkaConsumer(
            source,
            bootstrap_servers=kafka_bootstrap,
            group_id=f"test-{suffix}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            got: list[int] = []
            offsets: list[int] = []

            async def drain() -> None:
                async for received in consume_events(consumer, producer, deadletter_topic=dead):
                    got.append(received.event.payload.seq)  # type: ignore[attr-defined]
                    offsets.append(received.offset)
                    if len(got) == len(sent_valid):
                        return

            await asyncio.wait_for(drain(), TIMEOUT_S)
        finally:
            await consumer.stop()
    finally:
        await producer.stop()

    assert got == sent_valid
    assert offsets == sorted(offsets)

    letters = await _read_all(kafka_bootstrap, dead, len(sent_poison))
    assert [(d.original(), d.reason) for d in letters] == sent_poison
    assert all(d.source_topic == source and d.partition == 0 for d in letters)
    assert [d.offset for d in letters] == [s for s in range(40) if s % 3 == 1]
    failed = next(d for d in letters if d.reason == "validation_failed")
    assert [(e.field, e.value) for e in failed.errors] == [("payload.seq", "x")]


async def _read_all(bootstrap: str, topic: str, count: int):
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        out = []

        async def read() -> None:
            async for record in consumer:
                out.append(decode_deadletter(record.value))
                if len(out) == count:
                    return

        await asyncio.wait_for(read(), TIMEOUT_S)
        return out
    finally:
        await consumer.stop()


async def test_tombstones_on_a_compacted_topic_are_skipped_not_dead_lettered(
    kafka_bootstrap: str,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, dead = f"hetsched.test-inventory-{suffix}", f"hetsched.test-deadletter-{suffix}"
    await ensure_topics(kafka_bootstrap, [_spec(source), _spec(dead)])
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, **PRODUCER_DEFAULTS)
    await producer.start()
    consumer = AIOKafkaConsumer(
        source, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        for seq, raw in enumerate([_tick(0), None, _tick(2)]):
            await producer.send_and_wait(source, raw, key=f"k{seq}".encode())
        got: list[int] = []

        async def drain() -> None:
            async for received in consume_events(
                consumer, producer, deadletter_topic=dead, skip_tombstones=True
            ):
                got.append(received.offset)
                if len(got) == 2:
                    return

        await asyncio.wait_for(drain(), TIMEOUT_S)
        assert got == [0, 2]
        dead_partition = TopicPartition(dead, 0)
        assert (await consumer.end_offsets([dead_partition]))[dead_partition] == 0
    finally:
        await consumer.stop()
        await producer.stop()

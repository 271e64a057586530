"""Where the transactional loop keeps its input positions: state records, not group offsets.

Why: the next offsets commit as ``eos.offset/<topic>/<partition>`` state records in
the batch's transaction (two requests fewer per transaction than
``send_offsets_to_transaction``). These tests pin what that must keep: a restart
resumes exactly after the last committed batch, the handler never sees the
offset records, and a deployment whose positions are still only group offsets
(from before this change) resumes from them instead of re-reading its input.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from eos_topics import processor_topics

from streams.processors.eos import TransactionalProcessor
from streams.processors.eos_txn import OFFSET_KEY, Transaction, offset_key

pytestmark = [pytest.mark.integration]


class Echo:
    """Emits each record's value; remembers every state it was restored with."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.restored: list[dict[str, Any]] = []

    def restore(self, partition: int, state: dict[str, Any]) -> None:
        self.restored.append(dict(state))

    def drop(self, partition: int) -> None:
        pass

    async def process(self, record: Any, txn: Transaction) -> None:
        await txn.put("last", record.value.decode())
        await txn.send(self.out, record.key, record.value)

    async def reject(self, record: Any, txn: Transaction, error: str) -> None:
        raise AssertionError(error)


async def _setup(bootstrap: str) -> tuple[str, str, str]:
    app_id, src, out, _ = await processor_topics(bootstrap, "eosoff", "echo", 1)
    return app_id, src, out


async def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for v in values:
            await producer.send_and_wait(topic, v.encode(), key=b"k")
    finally:
        await producer.stop()


async def _read_all(bootstrap: str, topic: str, count: int, timeout_s: float = 60) -> list[Any]:
    """Committed records of ``topic`` (at least ``count``, then a pause for extras)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", isolation_level="read_committed")
    await consumer.start()
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                out += records
        await asyncio.sleep(1.0)  # a duplicate would show up now
        for records in (await consumer.getmany(timeout_ms=500)).values():
            out += records
    finally:
        await consumer.stop()
    return out


def _processor(bootstrap: str, app_id: str, src: str, handler: Echo) -> TransactionalProcessor:
    return TransactionalProcessor(name="echo", app_id=app_id, bootstrap=bootstrap,
                                  topics=[src], handler=handler, max_records=4,
                                  session_timeout_s=6)


async def test_next_offsets_are_state_records_and_a_restart_resumes_after_them(
        kafka_bootstrap: str) -> None:
    app_id, src, out = await _setup(kafka_bootstrap)
    first = _processor(kafka_bootstrap, app_id, src, Echo(out))
    await first.start()
    try:
        await _produce(kafka_bootstrap, src, [f"a{i}" for i in range(10)])
        assert [r.value for r in await _read_all(kafka_bootstrap, out, 10)] == [
            f"a{i}".encode() for i in range(10)]
    finally:
        await first.stop()

    state = await _read_all(kafka_bootstrap, f"{app_id}-echo-state", 1, timeout_s=10)
    stored = {r.key.decode(): orjson.loads(r.value) for r in state}  # last value wins
    assert stored[offset_key(TopicPartition(src, 0))] == 10
    assert stored["last"] == "a9"

    handler = Echo(out)
    second = _processor(kafka_bootstrap, app_id, src, handler)
    await second.start()
    try:
        await _produce(kafka_bootstrap, src, ["b0", "b1"])
        seen = [r.value for r in await _read_all(kafka_bootstrap, out, 12)]
    finally:
        await second.stop()
    assert seen == [f"a{i}".encode() for i in range(10)] + [b"b0", b"b1"]
    assert handler.restored and all(
        not any(k.startswith(OFFSET_KEY) for k in s) for s in handler.restored)
    assert handler.restored[-1] == {"last": "a9"}


async def test_a_partition_with_only_a_group_offset_resumes_from_it(
        kafka_bootstrap: str) -> None:
    """A deployment from before the offset records: its position is the group's."""
    app_id, src, out = await _setup(kafka_bootstrap)
    await _produce(kafka_bootstrap, src, [f"old{i}" for i in range(6)])
    group = TransactionalProcessor(name="echo", app_id=app_id, bootstrap=kafka_bootstrap,
                                   topics=[src], handler=Echo(out)).group_id
    committer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group,
                                 enable_auto_commit=False)
    await committer.start()
    try:
        committer.assign([TopicPartition(src, 0)])
        await committer.commit({TopicPartition(src, 0): 6})
    finally:
        await committer.stop()

    processor = _processor(kafka_bootstrap, app_id, src, Echo(out))
    await processor.start()
    try:
        await _produce(kafka_bootstrap, src, ["new0", "new1"])
        seen = [r.value for r in await _read_all(kafka_bootstrap, out, 2)]
    finally:
        await processor.stop()
    assert seen == [b"new0", b"new1"]

"""The transactional processor (streams/processors/eos.py) on the real broker, in-process.

A counting handler keeps per-key counts as state and emits ``key=count`` per
record: exactly-once means every record's output appears once, counts continue
across a restart (state restored from the state topic, offsets from the group),
and a record whose processing keeps raising is rejected after a few attempts
instead of stalling its partition.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from eos_topics import processor_topics

from streams.processors.eos import POISON_ATTEMPTS, TransactionalProcessor
from streams.processors.eos_txn import Transaction

pytestmark = [pytest.mark.integration]


class Counter:
    """State ``<key>`` -> count; output ``key=count``; raises on value ``boom``."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.state: dict[int, dict[str, Any]] = {}
        self.attempts = 0

    def restore(self, partition: int, state: dict[str, Any]) -> None:
        self.state[partition] = state

    def drop(self, partition: int) -> None:
        self.state.pop(partition, None)

    async def process(self, record: Any, txn: Transaction) -> None:
        if record.value == b"boom":
            self.attempts += 1
            raise RuntimeError("boom")
        key = record.key.decode()
        state = self.state[record.partition]
        state[key] = state.get(key, 0) + 1
        await txn.put(key, state[key])
        await txn.send(self.out, record.key, f"{key}={state[key]}".encode())

    async def reject(self, record: Any, txn: Transaction, error: str) -> None:
        await txn.send(self.out, record.key, f"rejected:{error}".encode())


async def _produce(bootstrap: str, topic: str, items: list[tuple[str, str]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for k, v in items:
            await producer.send_and_wait(topic, v.encode(), key=k.encode())
    finally:
        await producer.stop()


async def _read(bootstrap: str, topic: str, count: int, timeout_s: float) -> list[str]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", isolation_level="read_committed")
    await consumer.start()
    out: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                out += [r.value.decode() for r in records]
        await asyncio.sleep(1.0)  # anything extra (a duplicate) would show up now
        for records in (await consumer.getmany(timeout_ms=500)).values():
            out += [r.value.decode() for r in records]
    finally:
        await consumer.stop()
    return out


async def test_counts_exactly_once_across_a_restart_and_rejects_a_poison_record(
        kafka_bootstrap: str) -> None:
    app_id, src, out, _ = await processor_topics(kafka_bootstrap, "eos", "count", 2)

    def processor(handler: Counter) -> TransactionalProcessor:
        return TransactionalProcessor(name="count", app_id=app_id, bootstrap=kafka_bootstrap,
                                      topics=[src], handler=handler, max_records=7,
                                      session_timeout_s=6)

    first = processor(Counter(out))
    await first.start()
    try:
        await _produce(kafka_bootstrap, src, [(f"k{i % 5}", "x") for i in range(40)]
                       + [("k0", "boom")] + [(f"k{i % 5}", "x") for i in range(10)])
        seen = await _read(kafka_bootstrap, out, 51, 60)
    finally:
        await first.stop()
    assert first.handler.attempts == POISON_ATTEMPTS  # type: ignore[attr-defined]
    rejected = [v for v in seen if v.startswith("rejected:")]
    assert rejected == ["rejected:RuntimeError: boom"]
    counts = sorted(v for v in seen if not v.startswith("rejected:"))
    assert counts == sorted(f"k{k}={n}" for k in range(5) for n in range(1, 11)), seen

    second = processor(Counter(out))
    await second.start()
    try:
        await _produce(kafka_bootstrap, src, [(f"k{i % 5}", "x") for i in range(5)])
        seen = await _read(kafka_bootstrap, out, 56, 60)
    finally:
        await second.stop()
    counts = sorted(v for v in seen if not v.startswith("rejected:"))
    assert counts == sorted(f"k{k}={n}" for k in range(5) for n in range(1, 12)), seen
    assert len(seen) == 56, seen


class RoundSizes(Counter):
    """A :class:`Counter` that notes how many records of a partition each transaction held."""

    def __init__(self, out: str) -> None:
        super().__init__(out)
        self.pending: dict[int, int] = {}
        self.rounds: list[int] = []

    async def process(self, record: Any, txn: Transaction) -> None:
        await super().process(record, txn)
        self.pending[record.partition] = self.pending.get(record.partition, 0) + 1

    async def finish(self, partition: int, txn: Transaction) -> None:
        self.rounds.append(self.pending.pop(partition, 0))


async def test_a_backlog_of_one_partition_is_committed_in_rounds_of_the_whole_fetch(
        kafka_bootstrap: str) -> None:
    """A fetch may bring more than ``max_records`` of one partition (the fetch limit is
    ``max_records`` per owned partition, in all) only when that many wait: it is one
    transaction, not one per ``max_records`` (issue 11: the scheduler of a worker with
    one busy cell fell behind its router, committing eight times as often)."""
    app_id, src, out, _ = await processor_topics(kafka_bootstrap, "eosr", "rounds", 4)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    try:  # a backlog of 40 records, all on partition 0, before the processor starts
        for i in range(40):
            await producer.send_and_wait(src, b"x", key=f"k{i % 5}".encode(), partition=0)
    finally:
        await producer.stop()
    handler = RoundSizes(out)
    processor = TransactionalProcessor(name="rounds", app_id=app_id, bootstrap=kafka_bootstrap,
                                       topics=[src], handler=handler, max_records=4,
                                       session_timeout_s=6)
    await processor.start()
    try:
        seen = await _read(kafka_bootstrap, out, 40, 60)
    finally:
        await processor.stop()
    assert sorted(seen) == sorted(f"k{k}={n}" for k in range(5) for n in range(1, 9))
    assert sum(handler.rounds) == 40
    assert max(handler.rounds) > 4  # more than max_records of one partition in a round
    assert max(handler.rounds) <= 4 * 4  # never more than the fetch limit

"""A transaction's outputs as one record batch per partition (streams/processors/produce.py).

Why: the batched path replaced ``producer.send`` per record for speed (issue 11), and must
keep what ``send`` gave: each keyed record in the partition ``send`` would choose, the
order within a partition, headers, every record of the transaction committed (or none),
and a record the producer refuses failing the handler call that made it (so the poison
count applies to that record), not the commit of its whole partition.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.partitioner import DefaultPartitioner
from eos_fakes import FakeProducer
from eos_topics import transactional_topic

from streams.processors.eos_txn import Transaction, flush_all
from streams.processors.produce import MAX_RECORD_BYTES, produce


def test_keyed_records_go_where_send_puts_them_in_order_one_batch_per_partition() -> None:
    keys = [f"cell-{i % 7}".encode() for i in range(60)]

    async def go() -> FakeProducer:
        producer = FakeProducer(partitions=8)
        await asyncio.gather(*await produce(producer, [  # type: ignore[arg-type]
            ("out", None, k, str(i).encode(), None) for i, k in enumerate(keys)]))
        return producer

    producer = asyncio.run(go())
    expected: dict[int, list[bytes]] = {}
    for i, k in enumerate(keys):
        expected.setdefault(DefaultPartitioner()(k, list(range(8)), list(range(8))),
                            []).append(str(i).encode())
    got = {p: [v for _, v, _ in recs] for _, p, recs in producer.batches}
    assert got == expected
    assert len(producer.batches) == len(expected)


def test_full_batches_are_cut_and_the_order_kept_across_them() -> None:
    async def go() -> FakeProducer:
        producer = FakeProducer(batch_records=3)
        txn = Transaction(producer, "state", 2)  # type: ignore[arg-type]
        for i in range(8):
            await txn.send("out", b"k", str(i).encode(), partition=1,
                           headers=[("h", str(i).encode())])
        await txn.flush()
        return producer

    producer = asyncio.run(go())
    assert [len(recs) for _, _, recs in producer.batches] == [3, 3, 2]
    flat = [r for _, _, recs in producer.batches for r in recs]
    assert flat == [(b"k", str(i).encode(), [("h", str(i).encode())]) for i in range(8)]


def test_a_record_the_producer_would_refuse_fails_at_send_not_at_flush() -> None:
    async def go() -> FakeProducer:
        producer = FakeProducer()
        txn = Transaction(producer, "state", 0)  # type: ignore[arg-type]
        with pytest.raises(MessageSizeTooLargeError):
            await txn.send("out", b"k", b"x" * MAX_RECORD_BYTES)
        with pytest.raises(TypeError):
            await txn.send("out", b"k", "not bytes")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            await txn.send("out", None, None)
        await txn.send("out", b"k", b"fine")
        await txn.flush()
        return producer

    producer = asyncio.run(go())
    assert [(t, k, v) for t, k, v, _ in producer.sent] == [("out", b"k", b"fine")]


@pytest.mark.integration
async def test_batched_outputs_commit_where_send_would_put_them(kafka_bootstrap: str) -> None:
    topic, producer = await transactional_topic(kafka_bootstrap, "eosproduce", 4)
    keys = [f"key-{i % 5}".encode() for i in range(40)]
    try:
        await producer.begin_transaction()  # aborted: none of it may be read
        txn = Transaction(producer, topic, 0)
        await txn.send(topic, b"key-0", b"aborted")
        await txn.flush()
        await producer.abort_transaction()
        await producer.begin_transaction()
        txn = Transaction(producer, topic, 3)
        for i, k in enumerate(keys):
            await txn.send(topic, k, str(i).encode(), headers=[("n", str(i).encode())])
        await txn.put("state-key", {"i": 1})  # the state partition given: 3
        await txn.flush()
        await producer.commit_transaction()
    finally:
        await producer.stop()

    got = await _read_committed(kafka_bootstrap, topic, len(keys) + 1)
    by_partition: dict[int, list[bytes]] = {}
    for r in got:
        by_partition.setdefault(r.partition, []).append(r.value)
    expected: dict[int, list[bytes]] = {}
    for i, k in enumerate(keys):
        expected.setdefault(DefaultPartitioner()(k, [0, 1, 2, 3], [0, 1, 2, 3]),
                            []).append(str(i).encode())
    expected.setdefault(3, []).append(b'{"i":1}')
    assert by_partition == expected
    assert all(r.headers == (("n", r.value),) for r in got if r.key != b"state-key")


async def _read_committed(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", isolation_level="read_committed")
    await consumer.start()
    out: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                out += records
        await asyncio.sleep(0.5)  # anything extra (an aborted record) would show now
        for records in (await consumer.getmany(timeout_ms=500)).values():
            out += records
    finally:
        await consumer.stop()
    return out


def test_a_round_of_several_partitions_appends_to_a_shared_partition_in_one_batch() -> None:
    """The router's partitions all append to one input-log partition when they route to
    one cell; one batch for all of them, not one each queued behind the other's Produce
    round trip (``eos_txn.flush_all``), with the partitions' records in order and each
    transaction knowing what it wrote (announced to its next round)."""
    async def go() -> tuple[FakeProducer, list[Transaction]]:
        producer = FakeProducer()
        txns = [Transaction(producer, "state", p) for p in (1, 3)]  # type: ignore[arg-type]
        for p, txn in zip((1, 3), txns, strict=True):
            for i in range(3):
                await txn.send("log", b"cell-0", f"{p}/{i}".encode(), partition=0)
            await txn.put("offset", p)
        await flush_all(txns)
        return producer, txns

    producer, txns = asyncio.run(go())
    assert [(t, p) for t, p, _ in producer.batches] == [("log", 0), ("state", 1), ("state", 3)]
    assert [v for _, v, _ in producer.batches[0][2]] == [
        b"1/0", b"1/1", b"1/2", b"3/0", b"3/1", b"3/2"]
    assert [sorted((tp.topic, tp.partition) for tp in t.written) for t in txns] == [
        [("log", 0), ("state", 1)], [("log", 0), ("state", 3)]]

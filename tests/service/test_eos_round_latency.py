"""What a round of the transactional loop does for latency (streams/processors/eos.py).

Why: a submission waits for whole rounds of both processors, and they share one event
loop. A round announces the partitions it will write at its start (so AddPartitionsToTxn
is answered while its records are processed, not after) and gives the loop back every
``YIELD_EVERY_S`` of processing (so the other processor's responses are not held up by
a long batch). Both must leave the round's outputs, state and offsets as they were; the
broker test checks that the announced partitions really join the transaction in the
aiokafka version installed (it uses the client's transaction manager).
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from eos_fakes import FakeProducer
from eos_topics import transactional_topic

from streams.processors import eos_tuning
from streams.processors.eos import TransactionalProcessor, _Owned, _Writers
from streams.processors.eos_txn import Transaction
from streams.processors.produce import announce_partitions


class TxnManager:
    transactional_id = "w"

    def __init__(self) -> None:
        self.announced: list[TopicPartition] = []

    def maybe_add_partition_to_txn(self, tp: TopicPartition) -> None:
        self.announced.append(tp)


class TxnProducer(FakeProducer):
    """A FakeProducer with the transaction calls a round makes, and what was announced
    before each ``send_batch``."""

    def __init__(self) -> None:
        super().__init__()
        self._txn_manager = TxnManager()
        self.announced_at_batch: list[set[TopicPartition]] = []

    async def begin_transaction(self) -> None:
        self._txn_manager.announced = []

    async def commit_transaction(self) -> None:
        pass

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
        self.announced_at_batch.append(set(self._txn_manager.announced))
        return await super().send_batch(batch, topic, partition=partition)


class Busy:
    """A handler that spends ``cpu_s`` per record and writes one output keyed by it."""

    def __init__(self, cpu_s: float = 0.0) -> None:
        self.cpu_s = cpu_s
        self.seen: list[int] = []
        self.done_at: list[float] = []
        self.announced_when_processing: list[set[TopicPartition]] = []

    def restore(self, partition: int, state: dict[str, Any]) -> None:
        pass

    def drop(self, partition: int) -> None:
        pass

    async def process(self, record: Any, txn: Transaction) -> None:
        end = time.perf_counter() + self.cpu_s
        while time.perf_counter() < end:
            pass
        self.seen.append(record.offset)
        self.done_at.append(time.perf_counter())
        manager = getattr(txn.producer, "_txn_manager", None)
        if manager is not None:
            self.announced_when_processing.append(set(manager.announced))
        await txn.send("out", b"k", str(record.offset).encode(), partition=2)

    async def reject(self, record: Any, txn: Transaction, error: str) -> None:
        raise AssertionError(error)


def _processor(handler: Busy, producer: TxnProducer) -> TransactionalProcessor:
    proc = TransactionalProcessor(name="t", app_id="app", bootstrap="unused:9092",
                                  topics=["in"], handler=handler)
    proc._writers = _Writers(("w",), (producer,))  # type: ignore[arg-type]
    proc._owned[0] = _Owned(1, {})
    return proc


def _records(first: int, count: int) -> list[tuple[TopicPartition, Any]]:
    tp = TopicPartition("in", 0)
    return [(tp, SimpleNamespace(offset=o, value=b"", key=None, partition=0))
            for o in range(first, first + count)]


def test_flush_reports_every_partition_it_appended_to() -> None:
    async def go() -> set[TopicPartition]:
        txn = Transaction(FakeProducer(), "state", 3)  # type: ignore[arg-type]
        await txn.send("out", b"k", b"v", partition=1)
        await txn.put("a", 1)
        await txn.flush()
        return txn.written

    assert asyncio.run(go()) == {TopicPartition("out", 1), TopicPartition("state", 3)}


def test_a_round_announces_its_state_partition_then_also_what_it_wrote_last_time() -> None:
    async def go() -> tuple[TxnProducer, Busy]:
        producer = TxnProducer()
        handler = Busy()
        proc = _processor(handler, producer)
        await proc._round({0: _records(0, 3)})
        await proc._settle()
        await proc._round({0: _records(3, 2)})
        await proc._settle()
        assert proc._owned[0].next_offsets == {TopicPartition("in", 0): 5}
        return producer, handler

    producer, handler = asyncio.run(go())
    state, out = TopicPartition("app-t-state", 0), TopicPartition("out", 2)
    # announced before the first record was processed: first round, then second
    assert handler.announced_when_processing[0] == {state}
    assert handler.announced_when_processing[3] == {state, out}
    assert [v for t, _, v, _ in producer.sent if t == "out"] == [b"0", b"1", b"2", b"3", b"4"]


def test_a_flush_adds_all_its_partitions_before_its_first_batch() -> None:
    async def go() -> TxnProducer:
        producer = TxnProducer()
        txn = Transaction(producer, "state", 1)  # type: ignore[arg-type]
        await txn.send("out", b"k", b"v", partition=3)
        await txn.send("other", b"k", b"v", partition=0)
        await txn.put("a", 1)
        await txn.flush()
        return producer

    producer = asyncio.run(go())
    everything = {TopicPartition("out", 3), TopicPartition("other", 0),
                  TopicPartition("state", 1)}
    assert producer.announced_at_batch == [everything] * 3


def test_announcing_without_a_transaction_manager_does_nothing() -> None:
    assert announce_partitions(FakeProducer(), [TopicPartition("x", 0)]) == 0  # type: ignore[arg-type]


def test_a_long_round_gives_the_event_loop_back_and_keeps_the_records_in_order() -> None:
    """40 records of 1 ms each: without yielding a task waiting to run (the other
    processor's response) would wait the whole 40 ms."""
    async def go() -> tuple[list[float], Busy]:
        producer = TxnProducer()
        handler = Busy(cpu_s=0.001)
        proc = _processor(handler, producer)
        ran: list[float] = []

        async def other() -> None:
            while True:
                ran.append(time.perf_counter())
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        await proc._round({0: _records(0, 40)})
        await proc._settle()
        task.cancel()
        return ran, handler

    ran, handler = asyncio.run(go())
    during = [t for t in ran if handler.done_at[0] < t < handler.done_at[-1]]
    # 40 ms of records, a yield at least every YIELD_EVERY_S (2 ms) of it: ~20 turns of
    # the other task; without yielding, none. (Wall-clock gaps are not asserted: a
    # loaded machine deschedules the process whatever the loop does.)
    assert len(during) >= 5
    assert handler.seen == list(range(40))


@pytest.mark.integration
async def test_announced_partitions_join_the_transaction_before_anything_is_appended(
        kafka_bootstrap: str) -> None:
    topic, producer = await transactional_topic(kafka_bootstrap, "eosannounce", 2)
    written, unused = TopicPartition(topic, 0), TopicPartition(topic, 1)
    try:
        await producer.begin_transaction()
        assert announce_partitions(producer, [written, unused]) == 2
        deadline = time.monotonic() + 20
        while producer._txn_manager.txn_partitions != {written, unused}:
            assert time.monotonic() < deadline, "AddPartitionsToTxn not answered"
            await asyncio.sleep(0.01)
        txn = Transaction(producer, topic, 0)
        await txn.send(topic, b"k", b"committed")
        await txn.flush()
        await producer.commit_transaction()
        await producer.begin_transaction()  # aborted after announcing: nothing visible
        announce_partitions(producer, [written])
        txn = Transaction(producer, topic, 0)
        await txn.send(topic, b"k", b"aborted")
        await txn.flush()
        await producer.abort_transaction()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=None,
                                auto_offset_reset="earliest", isolation_level="read_committed")
    await consumer.start()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got += [r.value for r in records]
        await asyncio.sleep(0.5)
        for records in (await consumer.getmany(timeout_ms=500)).values():
            got += [r.value for r in records]
    finally:
        await consumer.stop()
    assert got == [b"committed"]


def test_the_trace_gives_each_round_its_records_and_own_cpu_and_logs_long_collections(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench/service.py --trace`` reads these to tell a long round from a slow one."""
    import gc
    import json

    monkeypatch.setenv(eos_tuning.TRACE_ENV, str(tmp_path))
    monkeypatch.setattr(eos_tuning, "GC_TRACE_MIN_S", 0.0)  # every collection, for the test
    monkeypatch.setattr(eos_tuning.Trace, "_gc_file", None)
    callbacks = list(gc.callbacks)
    try:
        async def go() -> None:
            proc = _processor(Busy(cpu_s=0.002), TxnProducer())
            await proc._round({0: _records(0, 4)})
            await proc._settle()
            gc.collect()

        asyncio.run(go())
    finally:
        gc.callbacks[:] = callbacks
    rows = [json.loads(line) for path in tmp_path.glob("t-*.jsonl")
            for line in path.read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["records"] == 4
    row = rows[0]
    assert row["begin"] <= row["processed"] <= row["end"]
    # 8 ms of busy records: some of it on the CPU, never more than the round's wall time
    assert 0 < row["cpu_ms"] <= (row["processed"] - row["begin"]) * 1000 + 1
    pauses = [json.loads(line) for path in tmp_path.glob("gc-*.jsonl")
              for line in path.read_text().splitlines()]
    assert any(p["gen"] == 2 for p in pauses)

"""The next round's transaction begun ahead (streams/processors/eos.py ``_begin_ahead``).

Why: a round waited for its AddPartitionsToTxn answer before its first Produce whenever
it processed its records faster than that round trip (a router round of a few records).
The next round's producer is free from the start of a round (two producers in turn), so
its transaction is begun and announced then, and the answer arrives during this round
(with one producer: right after the commit). What must hold: the next round uses that
transaction (no second begin), announces what was not foreseen, a failed round aborts it
too, and one that no round uses is aborted before the coordinator's transaction timeout
would fence its producer (the broker test: without the abort, the next round fails and
every partition is re-opened).
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from eos_fakes import Echo, TxnProducer
from eos_topics import processor_topics

from streams.processors import eos
from streams.processors.eos import TransactionalProcessor, _Owned, _Writers
from streams.processors.eos_txn import Transaction


def _processor(handler: Echo, producers: tuple[TxnProducer, ...],
               partitions: int = 2) -> TransactionalProcessor:
    proc = TransactionalProcessor(name="t", app_id="app", bootstrap="unused:9092",
                                  topics=["in"], handler=handler)
    ids = tuple(f"w{i}" for i in range(len(producers)))
    proc._writers = _Writers(ids, producers)  # type: ignore[arg-type]
    for p in range(partitions):
        proc._owned[p] = _Owned(1, {})
    return proc


def _records(partition: int, first: int, count: int) -> list[tuple[TopicPartition, Any]]:
    tp = TopicPartition("in", partition)
    return [(tp, SimpleNamespace(offset=o, value=b"%d" % o, key=None, partition=partition))
            for o in range(first, first + count)]


def test_the_next_rounds_producer_begins_during_this_round_and_that_round_uses_it() -> None:
    async def go() -> tuple[TxnProducer, TxnProducer, TransactionalProcessor, list[str]]:
        log: list[str] = []
        a, b = TxnProducer("a", log), TxnProducer("b", log)
        proc = _processor(Echo(), (a, b))
        await proc._round({0: _records(0, 0, 2)})
        await proc._settle()
        # b began round 2's transaction during round 1 and announced its partition's
        # state; once round 1 committed, a began round 3's
        assert log == ["a.begin", "b.begin", "a.commit", "a.begin"] and b.in_txn
        assert b._txn_manager.announced == {TopicPartition("app-t-state", 0)}
        assert a._txn_manager.announced == {TopicPartition("app-t-state", 0),
                                             TopicPartition("out", 0)}
        await proc._round({0: _records(0, 2, 1), 1: _records(1, 0, 1)})
        # round 2 used b's transaction (no second begin); a's was begun already
        assert log == ["a.begin", "b.begin", "a.commit", "a.begin"]
        await proc._settle()
        return a, b, proc, log

    a, b, proc, log = asyncio.run(go())
    assert log[4:] == ["b.commit", "b.begin"]
    assert a.in_txn and b.in_txn
    assert proc._owned[1].next_offsets == {TopicPartition("in", 1): 1}
    # round 3 announces at its start what it will write (round_latency tests); b, begun
    # after round 2, both partitions' state and what they wrote in round 2
    assert b._txn_manager.announced == {
        TopicPartition("app-t-state", 0), TopicPartition("app-t-state", 1),
        TopicPartition("out", 0), TopicPartition("out", 1)}


def test_with_one_producer_the_next_transaction_begins_right_after_the_commit() -> None:
    async def go() -> TxnProducer:
        a = TxnProducer()
        proc = _processor(Echo(), (a,))
        await proc._round({0: _records(0, 0, 2)})
        await proc._settle()
        assert a.calls == ["begin", "commit", "begin"] and a.in_txn
        assert a._txn_manager.announced == {TopicPartition("app-t-state", 0),
                                             TopicPartition("out", 0)}
        await proc._round({0: _records(0, 2, 1)})
        await proc._settle()
        return a

    assert asyncio.run(go()).calls == ["begin", "commit", "begin", "commit", "begin"]


def test_only_partitions_that_read_recently_are_announced_ahead(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> TxnProducer:
        a = TxnProducer()
        proc = _processor(Echo(), (a,))
        await proc._round({1: _records(1, 0, 1)})
        await proc._settle()
        await proc._abort_idle_ahead()  # not idle long enough: kept
        assert a.in_txn
        proc._read_at[1] -= eos.AHEAD_ACTIVE_S + 1  # partition 1 quiet since
        monkeypatch.setattr(eos, "AHEAD_IDLE_S", 0.0)
        await proc._abort_idle_ahead()
        assert proc._writers is not None and not proc._writers.begun
        await proc._round({}, idle={0})  # an idle round: nothing read, so nothing ahead
        await proc._settle()
        return a

    a = asyncio.run(go())
    assert a.calls == ["begin", "commit", "begin", "abort", "begin", "commit"]
    assert not a.in_txn


def test_a_failed_round_aborts_the_transaction_it_was_begun_in() -> None:
    class Failing(Echo):
        async def process(self, record: Any, txn: Transaction) -> None:
            if record.offset == 5:
                raise RuntimeError("boom")
            await super().process(record, txn)

    async def go() -> tuple[TxnProducer, TransactionalProcessor]:
        a = TxnProducer()
        proc = _processor(Failing(), (a,))
        await proc._round({0: _records(0, 0, 1)})
        await proc._round({0: _records(0, 5, 1)})
        return a, proc

    a, proc = asyncio.run(go())
    assert a.calls == ["begin", "commit", "begin", "abort"]
    assert not a.in_txn and not proc._owned and proc._writers is None

    async def two() -> tuple[TxnProducer, TxnProducer, TransactionalProcessor]:
        a, b = TxnProducer("a"), TxnProducer("b")
        proc = _processor(Failing(), (a, b))
        await proc._round({0: _records(0, 0, 1)})
        await proc._round({0: _records(0, 5, 1)})  # on b; a begun ahead meanwhile
        return a, b, proc

    a, b, proc = asyncio.run(two())
    assert a.calls == ["begin", "commit", "begin", "abort"]
    assert b.calls == ["begin", "abort"]
    assert not proc._owned and proc._writers is None


@pytest.mark.integration
async def test_an_unused_transaction_begun_ahead_is_aborted_before_it_times_out(
        kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Producers with a 1.5 s transaction timeout (the coordinator checks every 10 s):
    a transaction begun ahead and left open would be aborted by the coordinator, which
    fences its producer; the next round would fail and re-open the partition."""
    app_id, src, out, _ = await processor_topics(kafka_bootstrap, "eosahead", "echo", 1)
    # Not aborted while the test waits for it to exist: on a slow broker the answer to its
    # AddPartitionsToTxn came after 0.5 s, so it was gone before it was seen (1 run in 4).
    monkeypatch.setattr(eos, "AHEAD_IDLE_S", 60.0)
    make = TransactionalProcessor._producer

    def short_timeout(self: TransactionalProcessor, transactional_id: str) -> AIOKafkaProducer:
        producer = make(self, transactional_id)
        producer._txn_manager.transaction_timeout_ms = 1500
        return producer

    monkeypatch.setattr(TransactionalProcessor, "_producer", short_timeout)
    handler = Echo(out)
    proc = TransactionalProcessor(name="echo", app_id=app_id, bootstrap=kafka_bootstrap,
                                  topics=[src], handler=handler, session_timeout_s=6)
    sender = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await sender.start()
    await proc.start()
    try:
        await sender.send_and_wait(src, b"first", key=b"k")
        deadline = time.monotonic() + 60
        while not (handler.seen and proc._writers and proc._writers.begun):
            assert time.monotonic() < deadline, "first record not processed"
            await asyncio.sleep(0.02)
        writers = proc._writers
        ahead = writers.producers[next(iter(writers.begun))]
        state = TopicPartition(f"{app_id}-echo-state", 0)
        while state not in ahead._txn_manager.txn_partitions:
            assert time.monotonic() < deadline, "AddPartitionsToTxn not answered"
            await asyncio.sleep(0.02)
        # Open at the coordinator since just now: it times out 1.5 s from here.
        monkeypatch.setattr(eos, "AHEAD_IDLE_S", 0.5)
        await asyncio.sleep(12.0)  # past the timeout and a coordinator check
        assert not writers.begun
        assert not any(p._txn_manager.is_in_transaction() for p in writers.producers)
        await sender.send_and_wait(src, b"second", key=b"k")
        while handler.seen[-1:] != [b"second"]:
            assert time.monotonic() < deadline, "second record not processed"
            await asyncio.sleep(0.02)
        await asyncio.sleep(1.5)  # a failed commit would re-open (restore) by now
        assert proc._writers is writers, "the round failed and the partition was re-opened"
        assert handler.restored == 1 and handler.seen == [b"first", b"second"]
    finally:
        await proc.stop()
        await sender.stop()

"""Pipelined rounds (streams/processors/eos.py ``_round``): the next round is processed
while the previous one commits, and appends only once that commit has succeeded.

Why: a record fetched while a round committed waited for that whole commit before its
own processing began. What must hold, as with rounds one after the other: a round's
appends follow the previous round's commit in every log (so they are ordered after it,
and the decided transactions are always a prefix); a round whose predecessor fails to
commit is aborted with it and never appends, and every partition is re-read; a record
that fails in the round being processed does not undo the commit in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any

from aiokafka import TopicPartition
from eos_fakes import Echo, TxnProducer

from streams.processors.eos import TransactionalProcessor, _Owned, _Writers
from streams.processors.eos_txn import Transaction


class GatedProducer(TxnProducer):
    """Logs its appends too; its commits wait for ``gate`` and fail with ``fail``."""

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__(name, log)
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
        self.log.append(f"{self.name}.append:" + ",".join(
            v.decode() for _, v, _ in batch.records if topic == "out"))
        return await super().send_batch(batch, topic, partition=partition)

    async def commit_transaction(self) -> None:
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("commit refused")
        await super().commit_transaction()


class Failing(Echo):
    async def process(self, record: Any, txn: Transaction) -> None:
        if record.value == b"bad":
            raise RuntimeError("boom")
        await super().process(record, txn)


def _processor(handler: Echo, producers: tuple[TxnProducer, ...]) -> TransactionalProcessor:
    proc = TransactionalProcessor(name="t", app_id="app", bootstrap="unused:9092",
                                  topics=["in"], handler=handler)
    proc._writers = _Writers(tuple(p.name for p in producers), producers)  # type: ignore[arg-type]
    proc._owned[0] = _Owned(1, {})
    return proc


def _records(first: int, *values: bytes) -> dict[int, list[tuple[TopicPartition, Any]]]:
    tp = TopicPartition("in", 0)
    return {0: [(tp, SimpleNamespace(offset=first + i, value=v, key=None, partition=0))
                for i, v in enumerate(values)]}


def _pair() -> tuple[list[str], GatedProducer, GatedProducer]:
    log: list[str] = []
    return log, GatedProducer("a", log), GatedProducer("b", log)


def test_the_next_round_is_processed_during_the_commit_and_appends_after_it() -> None:
    async def go() -> list[str]:
        log, a, b = _pair()
        handler = Echo()
        proc = _processor(handler, (a, b))
        a.gate.clear()
        await proc._round(_records(0, b"1", b"2"))  # round 1 on a: its commit waits
        second = asyncio.ensure_future(proc._round(_records(2, b"3")))
        for _ in range(20):
            await asyncio.sleep(0)
        assert handler.seen == [b"1", b"2", b"3"]  # round 2 processed meanwhile
        assert not b.batches and not second.done()  # but nothing of it appended
        a.gate.set()
        await second
        await proc._settle()
        assert proc._owned[0].next_offsets == {TopicPartition("in", 0): 3}
        return log

    log = asyncio.run(go())
    assert [e for e in log if "append" in e or "commit" in e] == [
        "a.append:1,2", "a.append:", "a.commit", "b.append:3", "b.append:", "b.commit"]


async def _second_behind_a_gated_commit(handler: Echo, second: bytes, *,
                                        fail_commit: bool = False,
                                        ) -> tuple[list[str], GatedProducer, GatedProducer,
                                                   TransactionalProcessor]:
    """Round 1 on a, its commit held (and refused with ``fail_commit``); round 2, of
    ``second``, processed meanwhile; then the commit let go and round 2 awaited."""
    log, a, b = _pair()
    proc = _processor(handler, (a, b))
    a.gate.clear()
    a.fail = fail_commit
    await proc._round(_records(0, b"1"))
    behind = asyncio.ensure_future(proc._round(_records(1, second)))
    for _ in range(20):
        await asyncio.sleep(0)
    a.gate.set()
    await behind
    return log, a, b, proc


def test_a_failed_commit_aborts_the_round_processed_behind_it_unappended() -> None:
    log, a, b, proc = asyncio.run(_second_behind_a_gated_commit(Echo(), b"2",
                                                                fail_commit=True))
    assert not any(e.startswith("b.append") for e in log)
    assert not a.in_txn and not b.in_txn and "b.abort" in log
    assert not proc._owned and proc._writers is None  # released: re-opened after RETRY_S


def test_a_record_failing_behind_a_commit_in_flight_leaves_that_commit_alone() -> None:
    log, _, _, proc = asyncio.run(_second_behind_a_gated_commit(Failing(), b"bad"))
    assert "a.commit" in log and "a.abort" not in log[:log.index("a.commit")]
    assert not any(e.startswith("b.append") for e in log) and "b.abort" in log
    assert not proc._owned and proc._writers is None
    assert next(iter(proc._failures.values()))[0] == 1  # counted against the record


def test_with_one_producer_a_round_waits_for_the_commit_before_it_begins() -> None:
    async def go() -> list[str]:
        log: list[str] = []
        a = GatedProducer("a", log)
        handler = Echo()
        proc = _processor(handler, (a,))
        a.gate.clear()
        await proc._round(_records(0, b"1"))
        second = asyncio.ensure_future(proc._round(_records(1, b"2")))
        for _ in range(20):
            await asyncio.sleep(0)
        assert handler.seen == [b"1"]  # its producer is still committing round 1
        a.gate.set()
        await second
        await proc._settle()
        return log

    assert [e for e in asyncio.run(go()) if "append" in e or "commit" in e] == [
        "a.append:1", "a.append:", "a.commit", "a.append:2", "a.append:", "a.commit"]


def test_a_stop_while_a_commit_is_in_flight_lets_that_commit_finish() -> None:
    """The loop is cancelled on stop while it may wait for the commit in flight; that
    commit must not be cancelled with it (a cancelled commit would leave the round
    undecided until its producer is fenced), and the stop's own settle waits for it."""
    async def go() -> list[str]:
        log, a, b = _pair()
        proc = _processor(Echo(), (a, b))
        a.gate.clear()
        await proc._round(_records(0, b"1"))
        waiter = asyncio.ensure_future(proc._settle())
        for _ in range(5):
            await asyncio.sleep(0)
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
        assert proc._inflight is not None and not proc._inflight.done()
        a.gate.set()
        assert await proc._settle()
        assert proc._owned and proc._writers is not None  # nothing failed
        return log

    assert "a.commit" in asyncio.run(go())


def test_two_waiters_on_a_failing_commit_fail_it_once() -> None:
    """A rebalance and the loop may both wait for the same commit; when it fails, both
    learn it (False) but only one re-opens the partitions (a second ``_fail`` would
    abort what the first had begun to re-open)."""
    async def go() -> tuple[list[bool], int]:
        _, a, b = _pair()
        proc = _processor(Echo(), (a, b))
        a.gate.clear()
        a.fail = True
        await proc._round(_records(0, b"1"))
        fails = 0
        real_fail = proc._fail

        async def counting_fail() -> None:
            nonlocal fails
            fails += 1
            await real_fail()

        proc._fail = counting_fail  # type: ignore[method-assign]
        waiters = [asyncio.ensure_future(proc._settle()) for _ in range(2)]
        for _ in range(5):
            await asyncio.sleep(0)
        a.gate.set()
        return list(await asyncio.gather(*waiters)), fails

    results, fails = asyncio.run(go())
    assert results == [False, False]
    assert fails == 1

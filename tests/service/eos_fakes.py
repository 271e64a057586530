"""An offline stand-in for the transactional producer the eos ``Transaction`` writes to.

Shared by the tests of the loop's batching pieces (``test_eos_batching.py``,
``test_eos_produce.py``): what a transaction produced, batch by batch, without a broker;
and by the tests of its rounds (``test_eos_begin_ahead.py``, ``test_eos_pipeline.py``):
a producer that logs its transaction calls, and a handler that echoes its records.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from aiokafka import TopicPartition

from streams.processors.eos_txn import Transaction


class FakeBatch:
    """Stands in for aiokafka's ``BatchBuilder``: holds up to ``size`` records."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.records: list[tuple[bytes | None, bytes | None, Any]] = []
        self.closed = False

    def append(self, *, timestamp: Any, key: bytes | None, value: bytes | None,
               headers: Any = ()) -> object | None:
        if self.closed or len(self.records) >= self.size:
            return None
        self.records.append((key, value, headers))
        return object()

    def close(self) -> None:
        self.closed = True


class FakeProducer:
    """Records the batches it is given; each returns a future already resolved (or failed)."""

    def __init__(self, fail_topic: str | None = None, partitions: int = 4,
                 batch_records: int = 1000) -> None:
        self.sent: list[tuple[str, bytes | None, bytes | None, int | None]] = []
        self.batches: list[tuple[str, int, list[Any]]] = []
        self.fail_topic = fail_topic
        self.partitions = partitions
        self.batch_records = batch_records
        self.client = SimpleNamespace(cluster=SimpleNamespace(
            available_partitions_for_topic=lambda topic: set(range(self.partitions))))

    async def partitions_for(self, topic: str) -> set[int]:
        return set(range(self.partitions))

    def create_batch(self) -> FakeBatch:
        return FakeBatch(self.batch_records)

    async def send_batch(self, batch: FakeBatch, topic: str, *,
                         partition: int) -> asyncio.Future[Any]:
        self.batches.append((topic, partition, list(batch.records)))
        self.sent += [(topic, k, v, partition) for k, v, _ in batch.records]
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if topic == self.fail_topic:
            fut.set_exception(RuntimeError("delivery failed"))
        else:
            fut.set_result(None)
        return fut


class TxnManager:
    """The part of aiokafka's transaction manager the loop calls: what was announced."""

    transactional_id = "w"

    def __init__(self) -> None:
        self.announced: set[TopicPartition] = set()

    def maybe_add_partition_to_txn(self, tp: TopicPartition) -> None:
        self.announced.add(tp)


class TxnProducer(FakeProducer):
    """A FakeProducer that counts its transaction calls and what each one announced."""

    def __init__(self, name: str = "a", log: list[str] | None = None) -> None:
        super().__init__()
        self._txn_manager = TxnManager()
        self.name = name
        self.calls: list[str] = []
        self.log = [] if log is None else log
        """Every producer's calls in order (shared), as ``"<name>.<call>"``."""
        self.in_txn = False

    def _call(self, call: str) -> None:
        self.calls.append(call)
        self.log.append(f"{self.name}.{call}")

    async def begin_transaction(self) -> None:
        assert not self.in_txn, "begun twice"
        self.in_txn = True
        self._txn_manager.announced = set()
        self._call("begin")

    async def commit_transaction(self) -> None:
        assert self.in_txn
        self.in_txn = False
        self._call("commit")

    async def abort_transaction(self) -> None:
        assert self.in_txn
        self.in_txn = False
        self._call("abort")


class Echo:
    """A handler that writes each record's value to ``out`` (its own partition)."""

    def __init__(self, out: str = "out") -> None:
        self.out = out
        self.restored = 0
        self.seen: list[bytes] = []

    def restore(self, partition: int, state: dict[str, Any]) -> None:
        self.restored += 1

    def drop(self, partition: int) -> None:
        pass

    async def process(self, record: Any, txn: Transaction) -> None:
        self.seen.append(record.value)
        await txn.send(self.out, b"k", record.value, partition=record.partition)

    async def reject(self, record: Any, txn: Transaction, error: str) -> None:
        raise AssertionError(error)

    async def idle(self, partition: int, txn: Transaction) -> None:
        pass

"""An offline stand-in for the transactional producer the eos ``Transaction`` writes to.

Shared by the tests of the loop's batching pieces (``test_eos_batching.py``,
``test_eos_produce.py``): what a transaction produced, batch by batch, without a broker.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any


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

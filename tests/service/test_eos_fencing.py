"""A new owner fences both transactional producers of a partition before reading it.

Why: the loop alternates two producers per partition (``eos.TXN_ID_SUFFIXES``), so
a zombie owner may hold an open transaction on either id. Opening the partition
must abort it and fence that producer, or the zombie could commit outputs for
records the new owner processes again.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError

from schemas.admin import ensure_topics
from schemas.topics import TopicSpec
from streams.processors.eos import TXN_ID_SUFFIXES, Transaction, TransactionalProcessor, state_spec

pytestmark = [pytest.mark.integration]


class Echo:
    def restore(self, partition: int, state: dict[str, Any]) -> None:
        pass

    def drop(self, partition: int) -> None:
        pass

    async def process(self, record: Any, txn: Transaction) -> None:
        raise AssertionError("no input in this test")

    async def reject(self, record: Any, txn: Transaction, error: str) -> None:
        raise AssertionError(error)


@pytest.mark.parametrize("suffix", TXN_ID_SUFFIXES)
async def test_opening_a_partition_aborts_and_fences_a_zombie_on_either_id(
        kafka_bootstrap: str, suffix: str) -> None:
    prefix = f"eosfence{uuid.uuid4().hex[:8]}"
    app_id, src, out = f"{prefix}.app", f"{prefix}.in", f"{prefix}.out"
    specs = [TopicSpec(name=n, key="k", partitions=1, cleanup_policy="delete",
                       retention_ms=-1, description="test") for n in (src, out)]
    specs.append(state_spec(app_id, "echo", 1))
    await ensure_topics(kafka_bootstrap, specs, replication_factor=1, partitions=1)
    processor = TransactionalProcessor(name="echo", app_id=app_id, bootstrap=kafka_bootstrap,
                                       topics=[src], handler=Echo(), session_timeout_s=6)

    zombie = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap,
                              transactional_id=f"{processor.group_id}-0{suffix}")
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(out, b"zombie", key=b"k")
        await processor.start()
        try:
            for _ in range(100):  # owned = both producers started (fenced) and state read
                if processor.owned_partitions() == {0}:
                    break
                await asyncio.sleep(0.2)
            assert processor.owned_partitions() == {0}
            with pytest.raises(KafkaError):
                await zombie.commit_transaction()
        finally:
            await processor.stop()
    finally:
        with contextlib.suppress(Exception):
            await zombie.stop()

    reader = AIOKafkaConsumer(out, bootstrap_servers=kafka_bootstrap, group_id=None,
                              auto_offset_reset="earliest", isolation_level="read_committed")
    await reader.start()
    try:
        seen = [r.value for rs in (await reader.getmany(timeout_ms=2000)).values() for r in rs]
    finally:
        await reader.stop()
    assert seen == []

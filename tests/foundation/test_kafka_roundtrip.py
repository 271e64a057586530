"""aiokafka against the real broker: keyed messages come back in order per key."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

pytestmark = pytest.mark.integration


async def test_keyed_messages_come_back_in_order_per_key(kafka_bootstrap: str) -> None:
    topic = f"test.roundtrip.{uuid.uuid4().hex[:12]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    finally:
        await admin.close()

    keys = [f"node-{i}" for i in range(5)]
    sent: dict[str, list[int]] = {k: list(range(40)) for k in keys}
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for seq in range(40):
            for key in keys:
                await producer.send(topic, key=key.encode(), value=str(seq).encode())
        await producer.flush()
    finally:
        await producer.stop()

    received: dict[str, list[int]] = defaultdict(list)
    partition_of_key: dict[str, set[int]] = defaultdict(set)
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest",
        enable_auto_commit=False, group_id=None,
    )
    await consumer.start()
    try:
        total = sum(len(v) for v in sent.values())
        count = 0
        while count < total:
            batches = await consumer.getmany(timeout_ms=10_000)
            assert batches, f"timed out after {count} of {total} messages"
            for records in batches.values():
                for record in records:
                    key = record.key.decode()
                    received[key].append(int(record.value))
                    partition_of_key[key].add(record.partition)
                    count += 1
    finally:
        await consumer.stop()

    assert dict(received) == sent
    assert all(len(parts) == 1 for parts in partition_of_key.values()), partition_of_key

"""Fresh topics on the test broker for the transactional loop's broker tests.

Each test gets its own uniquely named topics, so tests never see each other's
records: :func:`processor_topics` for a processor (input, output and its state
topic), :func:`transactional_topic` for a bare topic and a transactional
producer started on it.
"""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaProducer

from schemas.admin import ensure_topics
from schemas.topics import TopicSpec
from streams.processors.eos_txn import state_spec


def _spec(name: str, partitions: int) -> TopicSpec:
    return TopicSpec(name=name, key="k", partitions=partitions, cleanup_policy="delete",
                     retention_ms=-1, description="test")


async def processor_topics(bootstrap: str, label: str, processor: str,
                           partitions: int) -> tuple[str, str, str, str]:
    """Create ``{label}<random>.in`` / ``.out`` and the state topic of ``processor``
    under app id ``{label}<random>.app``; returns (app id, input, output, state topic)."""
    prefix = f"{label}{uuid.uuid4().hex[:8]}"
    app_id, src, out = f"{prefix}.app", f"{prefix}.in", f"{prefix}.out"
    state = state_spec(app_id, processor, partitions)
    await ensure_topics(bootstrap, [_spec(src, partitions), _spec(out, partitions), state],
                        replication_factor=1, partitions=partitions)
    return app_id, src, out, state.name


async def transactional_topic(bootstrap: str, label: str,
                              partitions: int) -> tuple[str, AIOKafkaProducer]:
    """Create ``{label}<random>`` and start a transactional producer whose id is the
    topic's name; the caller stops it."""
    topic = f"{label}{uuid.uuid4().hex[:8]}"
    await ensure_topics(bootstrap, [_spec(topic, partitions)], replication_factor=1,
                        partitions=partitions)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=topic,
                                enable_idempotence=True)
    await producer.start()
    return topic, producer

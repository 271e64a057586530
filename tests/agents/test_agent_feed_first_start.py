"""Where a node's first start reads the decisions topic from (``start_at: end``).

A node's agents register before its decision feed is positioned, and the
scheduler places work on a node as soon as it registers. The feed used to
start at the topic's end as of the moment it was ready, so a decision made in
between was skipped and its task never ran (the operator journeys hit it when
submitting right after ``hetsched nodes`` listed the nodes). It now starts at
the first decision written since the node process started.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition

from agents.bus import KafkaPublisher, Topics, ensure_topics
from agents.feed import CLOCK_SKEW_MS, DecisionFeed
from agents.journal import Journal

pytestmark = pytest.mark.integration


async def first_positions(bootstrap: str, topics: Topics, tmp_path: Path,
                          started_at_ms: int | None) -> list[int]:
    publisher = KafkaPublisher(bootstrap)
    await publisher.start()
    journal = Journal(tmp_path / f"journal-{uuid.uuid4().hex}.sqlite")
    feed = DecisionFeed(bootstrap, topics, publisher, journal, {}, start_at="end",
                        started_at_ms=started_at_ms)
    try:
        await feed.start()
        parts = sorted(await publisher.producer.partitions_for(topics.decisions.name))
        return [await feed._consumer.position(TopicPartition(topics.decisions.name, p))
                for p in parts]
    finally:
        await feed.stop()
        await publisher.stop()
        journal.close()


async def test_a_decision_made_while_the_node_started_is_read(kafka_bootstrap: str,
                                                              tmp_path: Path) -> None:
    topics = Topics(f"t{uuid.uuid4().hex[:10]}.")
    await ensure_topics(kafka_bootstrap, topics)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        old = int(time.time() * 1000) - 10 * CLOCK_SKEW_MS
        await producer.send_and_wait(topics.decisions.name, b"before", key=b"cell-0",
                                     partition=0, timestamp_ms=old)
        node_started = int(time.time() * 1000)
        await producer.send_and_wait(topics.decisions.name, b"while starting", key=b"cell-0",
                                     partition=0, timestamp_ms=node_started + 5)
    finally:
        await producer.stop()
    positions = await first_positions(kafka_bootstrap, topics, tmp_path, node_started)
    assert positions[0] == 1  # the decision made after the start, not the one before
    assert set(positions[1:]) <= {0}
    assert (await first_positions(kafka_bootstrap, topics, tmp_path, None))[0] == 2

"""Per-cell summaries for the router: written in the cells' transactions, read by every worker.

Each cell's scheduler publishes a small summary (GPU models, free whole GPUs,
queue length) to a compacted topic of the app (``<app id>-cell-summaries``),
in the transaction of the event that changed it. Every worker reads the whole
topic (``read_committed``, no consumer group) into a dict the router consults.

Why not a Faust GlobalTable: under ``exactly_once`` faust-streaming 0.15's
global-table recovery crashed our workers on rebalance ("persisted offset
higher than highwater"), and a routing hint needs none of a table's
machinery: last value per cell, eventually consistent, is all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas.kafka import aiokafka_kwargs
from schemas.topics import TopicSpec

log = logging.getLogger(__name__)


def summaries_spec(app_id: str, partitions: int) -> TopicSpec:
    return TopicSpec(name=f"{app_id}-cell-summaries", key="cell", partitions=partitions,
                     cleanup_policy="compact", retention_ms=-1,
                     description="Per-cell routing summaries (internal).")


class SummaryView:
    """Latest summary per cell, kept up to date by :meth:`run`."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.latest: dict[str, dict[str, Any]] = {}

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        return sorted(self.latest.items())

    async def run(self) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                    enable_auto_commit=False, isolation_level="read_committed",
                                    auto_offset_reset="earliest", **aiokafka_kwargs())
        await consumer.start()
        try:
            parts = consumer.partitions_for_topic(self.topic) or set()
            while not parts:
                await asyncio.sleep(0.5)
                await consumer._client.force_metadata_update()  # topic just created
                parts = consumer.partitions_for_topic(self.topic) or set()
            consumer.assign([TopicPartition(self.topic, p) for p in sorted(parts)])
            while True:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    for r in records:
                        with contextlib.suppress(ValueError, AttributeError):
                            self.latest[r.key.decode()] = orjson.loads(r.value)
        finally:
            await consumer.stop()

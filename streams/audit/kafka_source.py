"""Read whole topics (or a time range of them) from Kafka, read_committed, up to "now".

The end of each partition is fixed when reading starts (``end_offsets``: under
read_committed the last stable offset), so an export of a live cluster is a
consistent cut per partition and terminates. Aborted transactional writes are
never returned (read_committed), which is what the worker itself consumed.

Partitions are read one after the other, in (topic, partition) order, so the
records come out in the order an audit file holds them: ``hetsched export``
writes each as it arrives and holds none (:func:`reading`), however long the
log. :func:`read_topics` collects them, for callers that want a list.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas.kafka import aiokafka_kwargs
from streams.audit.records import Record

ISOLATION = "read_committed"
POLL_MS = 300
IDLE_LIMIT_S = 5.0
"""Stop a partition that makes no progress for this long (e.g. its tail is one open
transaction's records: never visible under read_committed, yet below the end)."""


class MissingTopics(LookupError):
    """Topics the cluster does not have, once its metadata has been waited for.

    Most often a wrong topic prefix or name. Read as empty, they would make an audit
    file that looks whole and an "every decision reproduced" over nothing, so reading
    refuses them instead.
    """

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        noun = "topic" if len(topics) == 1 else "topics"
        super().__init__(f"{bootstrap} has no {noun} {', '.join(topics)}")
        self.topics = topics


Progress = Callable[[int, int], None]
"""``(offsets read, offsets to read)``, called as an export advances."""


@dataclass
class Snapshot:
    records: list[Record]
    partitions: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    """topic -> partition -> {"start": log start offset, "end": end offset read to}."""
    complete: bool = True
    """Every partition was read from its log start (no time range cut it)."""


@dataclass
class Reading:
    """An open read of some topics: where each partition starts and ends (known before
    any record is read, for an audit file's header) and the records, by iterating."""

    consumer: AIOKafkaConsumer
    seek: dict[TopicPartition, int]
    ends: dict[TopicPartition, int]
    to_ms: int | None
    progress: Progress | None
    partitions: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    complete: bool = True

    @property
    def total(self) -> int:
        """Offsets to read in all (records, plus the transaction markers among them)."""
        return sum(max(self.ends[tp] - self.seek[tp], 0) for tp in self.ends)

    async def records(self) -> AsyncIterator[Record]:
        """Every record in range, partition by partition in (topic, partition) order,
        each in offset order."""
        done, total = 0, self.total
        for tp in sorted(self.ends, key=lambda tp: (tp.topic, tp.partition)):
            if self.seek[tp] >= self.ends[tp]:
                continue
            self.consumer.assign([tp])
            self.consumer.seek(tp, self.seek[tp])
            async for batch in _batches(self.consumer, tp, self.ends[tp]):
                done += len(batch)
                for m in batch:
                    if m.offset < self.ends[tp] and (self.to_ms is None
                                                     or m.timestamp <= self.to_ms):
                        yield Record(m.topic, m.partition, m.offset, m.timestamp, m.key,
                                     m.value)
                if self.progress is not None:
                    self.progress(done, total)


@asynccontextmanager
async def reading(bootstrap: str, topics: list[str], from_ms: int | None = None,
                  to_ms: int | None = None, metadata_timeout_s: float = 10.0,
                  progress: Progress | None = None) -> AsyncIterator[Reading]:
    """An open :class:`Reading` of every record of ``topics`` with timestamp in
    [from_ms, to_ms] (None: unbounded). ``progress(done, total)`` is called after each
    fetched batch: offsets read so far and offsets to read in all. Raises
    :class:`MissingTopics` when a topic does not exist."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, isolation_level=ISOLATION,
                                auto_offset_reset="earliest", **aiokafka_kwargs())
    try:
        await consumer.start()
    except BaseException:
        await consumer.stop()  # a failed start leaves sockets and tasks to release
        raise
    try:
        tps, missing = await _partitions(consumer, topics, metadata_timeout_s)
        if missing:
            raise MissingTopics(bootstrap, missing)
        read = Reading(consumer, {}, {}, to_ms, progress)
        if tps:
            starts = await consumer.beginning_offsets(tps)
            ends = await consumer.end_offsets(tps)
            seek = dict(starts)
            if from_ms is not None:
                found = await consumer.offsets_for_times({tp: from_ms for tp in tps})
                for tp in tps:
                    hit = found.get(tp)
                    seek[tp] = hit.offset if hit is not None else ends[tp]
                    read.complete &= seek[tp] == starts[tp]
            read.seek, read.ends = seek, dict(ends)
            for tp in tps:
                read.partitions.setdefault(tp.topic, {})[str(tp.partition)] = {
                    "start": starts[tp], "end": ends[tp]}
        yield read
    finally:
        await consumer.stop()


async def read_topics(bootstrap: str, topics: list[str], from_ms: int | None = None,
                      to_ms: int | None = None, metadata_timeout_s: float = 10.0,
                      progress: Progress | None = None) -> Snapshot:
    """Every record of ``topics`` with timestamp in [from_ms, to_ms] (None: unbounded),
    held in a list (:func:`reading` for one at a time)."""
    async with reading(bootstrap, topics, from_ms, to_ms, metadata_timeout_s,
                       progress) as read:
        return Snapshot([r async for r in read.records()], read.partitions, read.complete)


async def _partitions(consumer: AIOKafkaConsumer, topics: list[str],
                      timeout_s: float) -> tuple[list[TopicPartition], list[str]]:
    """The partitions of ``topics``, and the topics that have none (do not exist)."""
    deadline = time.monotonic() + timeout_s
    tps: list[TopicPartition] = []
    missing: list[str] = []
    for topic in topics:
        parts = consumer.partitions_for_topic(topic)
        while parts is None and time.monotonic() < deadline:
            await consumer._client.force_metadata_update()  # no public refresh in aiokafka
            parts = consumer.partitions_for_topic(topic)
            if parts is None:
                await asyncio.sleep(0.2)
        if parts:
            tps += [TopicPartition(topic, p) for p in sorted(parts)]
        else:
            missing.append(topic)
    return tps, missing


async def _batches(consumer: AIOKafkaConsumer, tp: TopicPartition,
                   end: int) -> AsyncIterator[list[Any]]:
    """The fetched batches of ``tp`` until its position reaches ``end``, or until it makes
    no progress for ``IDLE_LIMIT_S``."""
    last_progress = time.monotonic()
    while await consumer.position(tp) < end:
        batch = (await consumer.getmany(tp, timeout_ms=POLL_MS)).get(tp, [])
        if batch:
            last_progress = time.monotonic()
            yield batch
        elif time.monotonic() - last_progress > IDLE_LIMIT_S:
            return

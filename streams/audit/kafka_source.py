"""Read whole topics (or a time range of them) from Kafka, read_committed, up to "now".

The end of each partition is fixed when reading starts (``end_offsets``: under
read_committed the last stable offset), so an export of a live cluster is a
consistent cut per partition and terminates. Aborted transactional writes are
never returned (read_committed), which is what the worker itself consumed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas.kafka import aiokafka_kwargs
from streams.audit.records import Record

ISOLATION = "read_committed"
POLL_MS = 300
IDLE_LIMIT_S = 5.0
"""Stop a partition that makes no progress for this long (e.g. its tail is one open
transaction's records: never visible under read_committed, yet below the end)."""


Progress = Callable[[int, int], None]
"""``(offsets read, offsets to read)``, called as an export advances."""


@dataclass
class Snapshot:
    records: list[Record]
    partitions: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    """topic -> partition -> {"start": log start offset, "end": end offset read to}."""
    complete: bool = True
    """Every partition was read from its log start (no time range cut it)."""


async def read_topics(bootstrap: str, topics: list[str], from_ms: int | None = None,
                      to_ms: int | None = None, metadata_timeout_s: float = 10.0,
                      progress: Progress | None = None) -> Snapshot:
    """Every record of ``topics`` with timestamp in [from_ms, to_ms] (None: unbounded).

    ``progress(done, total)`` is called after each fetched batch: offsets read
    so far and offsets to read in all (a progress bar's position and total).
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, isolation_level=ISOLATION,
                                auto_offset_reset="earliest", **aiokafka_kwargs())
    try:
        await consumer.start()
    except BaseException:
        await consumer.stop()  # a failed start leaves sockets and tasks to release
        raise
    try:
        tps = await _partitions(consumer, topics, metadata_timeout_s)
        snap = Snapshot([])
        if not tps:
            return snap
        consumer.assign(tps)
        starts = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        seek = dict(starts)
        if from_ms is not None:
            found = await consumer.offsets_for_times({tp: from_ms for tp in tps})
            for tp in tps:
                hit = found.get(tp)
                seek[tp] = hit.offset if hit is not None else ends[tp]
                snap.complete &= seek[tp] == starts[tp]
        for tp in tps:
            consumer.seek(tp, seek[tp])
            snap.partitions.setdefault(tp.topic, {})[str(tp.partition)] = {
                "start": starts[tp], "end": ends[tp]}
        todo = {tp: ends[tp] for tp in tps if seek[tp] < ends[tp]}
        total = sum(ends[tp] - seek[tp] for tp in todo)
        snap.records = await _drain(consumer, todo, to_ms,
                                    None if progress is None else
                                    (lambda done: progress(done, total)))
        return snap
    finally:
        await consumer.stop()


async def _partitions(consumer: AIOKafkaConsumer, topics: list[str],
                      timeout_s: float) -> list[TopicPartition]:
    deadline = time.monotonic() + timeout_s
    tps: list[TopicPartition] = []
    for topic in topics:
        parts = consumer.partitions_for_topic(topic)
        while parts is None and time.monotonic() < deadline:
            await consumer._client.force_metadata_update()  # no public refresh in aiokafka
            parts = consumer.partitions_for_topic(topic)
            if parts is None:
                await asyncio.sleep(0.2)
        tps += [TopicPartition(topic, p) for p in sorted(parts or ())]
    return tps


async def _drain(consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int],
                 to_ms: int | None, progress: Callable[[int], None] | None = None) -> list[Record]:
    out: list[Record] = []
    done = 0
    pending = dict(ends)
    last_progress = time.monotonic()
    while pending:
        batches = await consumer.getmany(*pending, timeout_ms=POLL_MS)
        for tp, batch in batches.items():
            done += len(batch)
            for m in batch:
                if m.offset < ends[tp] and (to_ms is None or m.timestamp <= to_ms):
                    out.append(Record(m.topic, m.partition, m.offset, m.timestamp, m.key,
                                      m.value))
        if batches:
            last_progress = time.monotonic()
            if progress is not None:
                progress(done)
        for tp in list(pending):
            if await consumer.position(tp) >= ends[tp]:
                del pending[tp]
        if pending and time.monotonic() - last_progress > IDLE_LIMIT_S:
            break
    return out

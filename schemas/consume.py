"""Plain aiokafka I/O on the contract: keyed producing, consuming with dead letters.

For processes that do not run inside Faust (executors, tools, tests, other
Python teams). :func:`consume_events` yields only valid events, in partition
order; every refused record is written to ``hetsched.deadletter`` (and the
write awaited) before the next record is looked at, so once the caller commits
past a record it is either processed or dead-lettered -- never lost.

A null value on a compacted catalog topic is a tombstone (a deletion for log
compaction, e.g. a node removed from ``hetsched.node-inventory``), not a
message: it is skipped. The same removal is an event on its lifecycle topic
(``NodeLeft`` on ``hetsched.nodes``), which is what consumers react to. A null
value anywhere else is dead-lettered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from schemas.codec import decode_or_deadletter, encode, encode_deadletter
from schemas.deadletter import DeadLetter
from schemas.events import Envelope, Event
from schemas.signing import Signer, default_signer
from schemas.topics import DEADLETTER, TopicSpec, catalog_spec, key_for

PRODUCER_DEFAULTS: dict[str, Any] = {"enable_idempotence": True, "acks": "all"}
"""Every producer of the project: idempotent, so retries never duplicate."""


@dataclass(frozen=True, slots=True)
class Received:
    """A valid event and where it came from."""

    event: Envelope[Event]
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes = b""
    """The record's original bytes (what an origin signature covers)."""
    headers: tuple[tuple[str, bytes], ...] = ()
    """The record's headers, e.g. the origin signature (:mod:`schemas.signing`)."""


async def produce_event(
    producer: AIOKafkaProducer,
    spec: TopicSpec,
    envelope: Envelope[Event],
    *,
    signer: Signer | None = None,
) -> None:
    """Send ``envelope`` to ``spec``'s topic under the catalog's key; wait for the ack.

    The record is signed (origin headers, :mod:`schemas.signing`) by ``signer``,
    or by the process's signer when ``HETSCHED_SIGNING_KEY_FILE`` is set.
    """
    value, key = encode(envelope), key_for(spec, envelope)
    signer = signer or default_signer()
    headers = signer.headers(spec.name, key, value) if signer is not None else None
    await producer.send_and_wait(spec.name, value, key=key, headers=headers)


async def send_deadletter(
    producer: AIOKafkaProducer, dead_letter: DeadLetter, topic: str = DEADLETTER
) -> None:
    """Write a dead letter, keyed by its source topic; wait for the ack."""
    key = (dead_letter.source_topic or "").encode() or None
    await producer.send_and_wait(topic, encode_deadletter(dead_letter), key=key)


async def consume_events(
    consumer: AIOKafkaConsumer,
    producer: AIOKafkaProducer,
    *,
    deadletter_topic: str = DEADLETTER,
    skip_tombstones: bool | None = None,
) -> AsyncIterator[Received]:
    """Yield valid events from a started consumer; dead-letter the rest.

    ``skip_tombstones`` None decides per topic from the catalog (compacted
    topics have tombstones); True/False forces it.
    """
    async for record in consumer:
        skip = _compacted(record.topic) if skip_tombstones is None else skip_tombstones
        if record.value is None and skip:
            continue
        result = decode_or_deadletter(
            record.value,  # None (a tombstone): its dead letter says so
            record.topic,
            record.partition,
            record.offset,
            key=record.key,
            timestamp_ms=record.timestamp,
        )
        if isinstance(result, DeadLetter):
            await send_deadletter(producer, result, deadletter_topic)
            continue
        yield Received(
            result,
            record.topic,
            record.partition,
            record.offset,
            record.key,
            record.value or b"",
            tuple(record.headers or ()),
        )


def _compacted(topic: str) -> bool:
    """Whether ``topic`` is a compacted catalog topic, under a deployment's prefix too
    (``demo-1.hetsched.node-inventory``): its tombstones delete keys, they are not
    malformed records."""
    spec = catalog_spec(topic)
    return spec is not None and spec.cleanup_policy == "compact"

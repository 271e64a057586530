"""What one round writes, and the handler that writes it (``streams.processors.eos``).

A round's :class:`Transaction` per source partition collects the handler's outputs
and state writes; :func:`flush_all` appends them all; the state topic
(:func:`state_spec`) keeps, beside the handler's records, the next offset to consume
of each input partition (:func:`offset_key`), so offsets commit with the outputs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

import orjson
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from schemas.topics import TopicSpec
from streams.processors.produce import Output, check_record, produce_groups

OFFSET_KEY = "eos.offset/"
"""State-key prefix of the next offset to consume of one input partition:
``eos.offset/<topic>/<partition>`` -> int. Kept from the handler's state."""


def offset_key(tp: TopicPartition) -> str:
    """The state key holding the next offset to consume of input partition ``tp``."""
    return f"{OFFSET_KEY}{tp.topic}/{tp.partition}"


def state_spec(app_id: str, name: str, partitions: int) -> TopicSpec:
    """The compacted state topic of processor ``name`` (internal, under the app id)."""
    return TopicSpec(name=f"{app_id}-{name}-state", key="entity", partitions=partitions,
                     cleanup_policy="compact", retention_ms=-1,
                     description=f"State of the {name} processor (internal, compacted).")


class Transaction:
    """Everything one batch of one partition writes: all in its producer's open transaction.

    Output records are collected and produced in :meth:`flush`, one record batch per
    output partition (:func:`streams.processors.produce.produce`: a ``send`` per record
    cost more CPU than the rest of the router's work on a telemetry record), and their
    delivery awaited together. State writes are coalesced per key and sent in
    :meth:`flush`: a batch that rewrites a record a hundred times (a cell's ``meta``, a
    busy node) sends it once, and a reader of the committed state sees the same last
    value either way.
    """

    def __init__(self, producer: AIOKafkaProducer, state_topic: str, partition: int) -> None:
        self.producer = producer
        self.state_topic = state_topic
        self.partition = partition
        self._outputs: list[Output] = []
        self._state: dict[str, bytes | None] = {}
        self.written: set[TopicPartition] = set()
        """Every partition :meth:`flush` appended to (outputs and state)."""

    async def send(self, topic: str, key: bytes | None, value: bytes | None,
                   partition: int | None = None,
                   headers: Sequence[tuple[str, bytes]] | None = None) -> None:
        """Add one output record (any topic) to the transaction, produced at :meth:`flush`.

        A record the producer would refuse raises here, as ``producer.send`` did.
        """
        check_record(key, value, headers)
        self._outputs.append((topic, partition, key, value, headers))

    async def put(self, key: str, value: Any) -> None:
        """Write one state record (None deletes) to this partition of the state topic.

        Encoded now (the caller may mutate ``value`` later), sent at :meth:`flush`;
        a later put of the same key in this transaction replaces it.
        """
        self._state[key] = None if value is None else orjson.dumps(
            value, option=orjson.OPT_SORT_KEYS)

    @property
    def records(self) -> int:
        """Output records so far plus coalesced state writes."""
        return len(self._outputs) + len(self._state)

    def take(self) -> list[Output]:
        """The outputs, then the coalesced state writes, as records to produce; the
        transaction holds none of them any more."""
        outputs, self._outputs = self._outputs, []
        state, self._state = self._state, {}
        outputs += [(self.state_topic, self.partition, key.encode(), raw, None)
                    for key, raw in state.items()]
        return outputs

    async def flush(self) -> None:
        """Produce the outputs and the state writes, then wait for every append: a failed
        one must fail the batch, not the commit."""
        await flush_all([self])


async def flush_all(txns: Sequence[Transaction]) -> None:
    """Produce what ``txns`` (one producer's, in this order) hold with one
    :func:`~streams.processors.produce.produce` call, then wait for every append.

    Why one call for all of a round's partitions and not a ``flush`` each: aiokafka's
    accumulator holds one batch per output partition until the sender drains it, and
    its sender keeps one Produce request in flight per broker. The router's partitions
    all append to the same input-log partition when they route to the same cell, so a
    ``flush`` per source partition queued behind the previous one's Produce round trip:
    a router round that read k partitions waited for k Produce requests one after the
    other (3.4 Produce requests per transaction at 200 submissions/s, bench/service.py
    with per-request times). Records of one output partition keep the order they had:
    ``txns`` in order, each transaction's records in order.
    """
    if not txns:
        return
    producer = txns[0].producer
    groups = [(txn.take(), txn.written) for txn in txns]
    await asyncio.gather(*await produce_groups(producer, groups))


class Handler(Protocol):
    """The pure-ish part of a processor: per-partition state plus one record at a time."""

    def restore(self, partition: int, state: dict[str, Any]) -> None:
        """Take ownership of ``partition`` with its committed state records."""

    def drop(self, partition: int) -> None:
        """Forget ``partition`` (revoked, or its batch failed and it is re-read)."""

    async def process(self, record: ConsumerRecord[bytes, bytes], txn: Transaction) -> None:
        """Apply one record; write outputs and state changes through ``txn``."""

    async def reject(self, record: ConsumerRecord[bytes, bytes], txn: Transaction,
                     error: str) -> None:
        """Give up on a record that keeps failing (dead-letter it) instead of applying it."""

    # Optional: ``async def finish(self, partition: int, txn: Transaction) -> None``,
    # called once per partition and transaction after the partition's last record in
    # it and before the commit, so a handler can write what a whole batch changed once
    # instead of once per record.
    # Optional pair: ``def has_waiting(self, partition: int) -> bool`` and
    # ``async def idle(self, partition: int, txn: Transaction) -> None``: for a partition
    # that read nothing for ``eos.IDLE_EVERY_S`` while ``has_waiting``, the processor runs a
    # transaction that consumes nothing and calls ``idle`` (what waits on time, e.g. the
    # router's held submissions, must not depend on more input arriving).

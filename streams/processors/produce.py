"""A transaction's outputs to aiokafka: one record batch per output partition, not one
``send`` per record.

Why: the router appends every telemetry record it reads (issue 11 asks 20,000/s per
worker), and ``AIOKafkaProducer.send`` costs ~29 µs of CPU per record inside a
transaction (a future per record, the partitioner's pure-Python murmur2 per key,
metadata and transaction checks per call); ``create_batch`` / ``send_batch`` of the same
records in 16 KiB batches ~19 µs, and this module with :data:`BATCH_BYTES` ~7 µs
(``bench/load.py --only client``). The batch size decides how many Produce requests a
transaction takes: aiokafka keeps one request in flight per broker and puts one batch
per partition in it, so with its default 16 KiB batches a 200-record transaction to one
partition was ~6 requests one after another, each a loopback write, a response to
decode and a round trip before the commit; now one.

Nothing else changes: records of one partition keep their order, a record without
an explicit partition goes where ``send`` would have put it (the same
``DefaultPartitioner``), timestamps are the append time as with ``send``, and the
batches join the producer's open transaction the same way (``send_batch`` adds the
partition to it), so the commit still covers every output.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.record.default_records import DefaultRecordBatchBuilder

BATCH_BYTES = 512 * 1024
"""``max_batch_size`` of the transactional producers: a batch is cut when the next record
would take it past this (a single larger record still goes, alone). 200-1,000 telemetry
records of ~0.5 KiB fit in one or two; the largest batch stays under the broker's
default ``message.max.bytes`` (~1 MiB) as long as single records do (see
:data:`MAX_RECORD_BYTES`).

With aiokafka's 16 KiB default, ``send`` also stalled mid-round: when a partition's
batch is full it waits until the sender has drained it, which in a transaction first
takes the AddPartitionsToTxn round trip and then one produce round trip per full batch,
one at a time (a round of 50 decisions of 1.1 KiB stalled for four round trips; 1.3
produce requests per transaction at 200 submissions/s)."""

MAX_RECORD_BYTES = 1_048_576
"""aiokafka's default ``max_request_size``: ``send`` refuses a larger record at once."""

Output = tuple[str, int | None, bytes | None, bytes | None,
               Sequence[tuple[str, bytes]] | None]
"""One output record: topic, partition (None = by key, as ``send``), key, value, headers."""

_BYTES = (bytes, bytearray, memoryview)
_partitioner = DefaultPartitioner()


def check_record(key: bytes | None, value: bytes | None,
                 headers: Sequence[tuple[str, bytes]] | None) -> None:
    """Raise now what ``AIOKafkaProducer.send`` would have raised for this record.

    The records are produced only at the end of the transaction; a record that can never
    be produced must still fail the handler call that made it (so that the processor
    counts it against the record being processed and eventually dead-letters that one,
    ``eos.POISON_ATTEMPTS``), not every commit of its partition.
    """
    if key is None and value is None:
        raise ValueError("Need at least one: key or value")
    if not (key is None or type(key) in _BYTES):
        raise TypeError(f"Not supported type for key: {type(key)}")
    if not (value is None or type(value) in _BYTES):
        raise TypeError(f"Not supported type for value: {type(value)}")
    size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, list(headers or ()))
    if size > MAX_RECORD_BYTES:
        raise MessageSizeTooLargeError(
            f"The message is {size} bytes when serialized which is larger than the "
            "maximum request size you have configured with the max_request_size "
            "configuration")


async def produce(producer: AIOKafkaProducer, records: Iterable[Output],
                  written: set[TopicPartition] | None = None) -> list[asyncio.Future[Any]]:
    """Append ``records`` to ``producer``'s open transaction, one batch per partition
    (more only past :data:`BATCH_BYTES`), in order within each partition; returns the
    batches' delivery futures (awaiting them all = every record acknowledged).

    ``written``: the partitions appended to are added to it (the loop announces them
    to the next transaction early, :func:`streams.processors.eos.announce_partitions`)."""
    return await produce_groups(producer, [(records, written)])


async def produce_groups(
        producer: AIOKafkaProducer,
        groups: Sequence[tuple[Iterable[Output], set[TopicPartition] | None]],
) -> list[asyncio.Future[Any]]:
    """:func:`produce` of several groups of records at once: the records of all groups
    go into the same batches (one per partition), a partition's records in group order;
    each group's ``written`` set gets the partitions of that group's records."""
    by_partition: dict[tuple[str, int], list[tuple[Any, Any, Any]]] = {}
    keyed: dict[tuple[str, bytes], int] = {}
    for records, written in groups:
        mine: set[tuple[str, int]] = set()
        for topic, partition, key, value, headers in records:
            if partition is None:
                memo = None if key is None else (topic, bytes(key))
                partition = None if memo is None else keyed.get(memo)
                if partition is None:
                    partition = await _partition_of(producer, topic, key)
                    if memo is not None:
                        keyed[memo] = partition
            by_partition.setdefault((topic, partition), []).append((key, value, headers))
            mine.add((topic, partition))
        if written is not None:
            written.update(TopicPartition(topic, partition) for topic, partition in mine)
    futures: list[asyncio.Future[Any]] = []
    tps = [TopicPartition(topic, partition) for topic, partition in by_partition]
    announce_partitions(producer, tps)
    for (topic, partition), batch_records in by_partition.items():
        batch = producer.create_batch()
        for key, value, headers in batch_records:
            if batch.append(timestamp=None, key=key, value=value,
                            headers=list(headers) if headers else []) is None:
                futures.append(await producer.send_batch(batch, topic, partition=partition))
                batch = producer.create_batch()  # the first record of a batch always fits
                batch.append(timestamp=None, key=key, value=value,
                             headers=list(headers) if headers else [])
        batch.close()
        futures.append(await producer.send_batch(batch, topic, partition=partition))
    return futures


def announce_partitions(producer: AIOKafkaProducer, tps: Iterable[TopicPartition]) -> int:
    """Add ``tps`` to ``producer``'s open transaction now, before anything is appended to
    them; returns how many (0 for a producer without a transaction manager).

    aiokafka sends AddPartitionsToTxn for a partition when its first batch is queued and
    holds the batches back until the answer; its sender has one such request in flight at
    a time. Two uses:

    * :func:`produce` adds all partitions of a flush before the first ``send_batch``: when
      the sender woke between two ``send_batch`` calls, a flush to an input-log and a
      state partition took two AddPartitionsToTxn round trips one after the other (3.4
      per transaction in a run at 200 submissions/s); together they take one request.
    * the eos loop announces at the start of a round what the round will write
      (:meth:`streams.processors.eos.TransactionalProcessor._expected_partitions`): the
      request is answered while the records are processed, not after.

    A partition announced but not written costs only a marker at the end of the
    transaction; exactly once is unchanged (the transaction spans the same or more
    partitions and commits or aborts as one). Uses the call ``send`` / ``send_batch``
    make themselves (aiokafka's ``TransactionManager.maybe_add_partition_to_txn``,
    0.8-0.14).
    """
    manager = getattr(producer, "_txn_manager", None)
    add = getattr(manager, "maybe_add_partition_to_txn", None)
    if add is None or getattr(manager, "transactional_id", None) is None:
        return 0
    count = 0
    for tp in tps:
        add(tp)
        count += 1
    return count


async def _partition_of(producer: AIOKafkaProducer, topic: str, key: bytes | None) -> int:
    """The partition ``producer.send(topic, key=key)`` would choose (its default
    partitioner: murmur2 of the key, or a random available partition without one)."""
    partitions = list(await producer.partitions_for(topic))
    available = list(producer.client.cluster.available_partitions_for_topic(topic) or ())
    return int(_partitioner(key, partitions, available))

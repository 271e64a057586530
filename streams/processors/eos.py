"""Exactly-once, partitioned, stateful processing: Kafka's transactional consume-transform-produce.

Why not Faust's agents under ``processing_guarantee="exactly_once"``: faust-streaming
0.15's bookkeeping commits source offsets past records no agent processed, counts
acks of an older consumer generation, can stall a partition's transaction until
the broker's transaction timeout fences the producer, and takes changelog
recovery highwaters from a cached LSO (docs/service.md, upstream issues #177,
#323, #517). This module is the textbook loop instead, on aiokafka only:

* one consumer in group ``{app id}-{name}`` (``read_committed``, no auto commit,
  range assignment so co-partitioned input topics land together);
* per assigned partition *number* one transactional producer,
  ``transactional_id = {app id}-{name}-{partition}``: starting it (InitProducerId)
  fences a zombie owner and aborts its open transaction *before* we read
  anything of that partition;
* per partition its state, kept in a compacted topic ``{app id}-{name}-state``
  (same partition count, key = entity key, value = JSON or null = deleted),
  restored by reading that partition to its end with ``read_committed`` after
  the fence, then the consumer is positioned at the group's committed offset;
* per fetched batch of one partition one transaction: outputs, state writes
  (to the state topic's same partition) and the consumed offsets
  (``send_offsets_to_transaction``) commit together or not at all;
* any error in a batch aborts it, drops the partition's in-memory state and
  re-initialises the partition (new producer = new epoch, state re-read,
  re-seek to the committed offset), so memory never keeps an aborted write.

A partition is only processed while it is owned (``_owned``); records fetched
before the latest (re)initialisation of their partition are discarded and the
partition re-positioned, so a record is never skipped and never applied twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.structs import ConsumerRecord
from mode import Service

from schemas.kafka import aiokafka_kwargs
from schemas.topics import TopicSpec

log = logging.getLogger(__name__)

RESTORE_TIMEOUT_S = 120.0
POISON_ATTEMPTS = 3
"""A record whose processing raised this many times is handed to ``Handler.reject``
(dead-lettered) instead: one bad record must not stall its partition for ever."""
RETRY_S = 1.0
"""Wait before re-initialising a partition whose batch failed: a fenced zombie
(e.g. after SIGSTOP past the session timeout) learns from its next heartbeat
that it lost the partition, instead of fencing the rightful owner at once."""
TXN_RETRY_BACKOFF_MS = 20
"""Retry pause of the transactional producers. Right after a commit the
coordinator is still writing the markers and answers the next transaction's
AddOffsetsToTxn / EndTxn with CONCURRENT_TRANSACTIONS; aiokafka retries those
after ``retry_backoff_ms`` (100 ms by default): a 100 ms stall of the hop
each time. The Java client uses 20 ms for the same case (KAFKA-5477)."""


def state_spec(app_id: str, name: str, partitions: int) -> TopicSpec:
    """The compacted state topic of processor ``name`` (internal, under the app id)."""
    return TopicSpec(name=f"{app_id}-{name}-state", key="entity", partitions=partitions,
                     cleanup_policy="compact", retention_ms=-1,
                     description=f"State of the {name} processor (internal, compacted).")


class Transaction:
    """Everything one batch of one partition writes: all in its producer's open transaction.

    Output records are appended to the producer at once and their delivery
    futures awaited together in :meth:`flush` (one await per record would cost a
    round trip each). State writes are coalesced per key and sent in
    :meth:`flush`: a batch that rewrites a record a hundred times (a cell's
    ``meta``, a busy node) sends it once, and a reader of the committed state
    sees the same last value either way.
    """

    def __init__(self, producer: AIOKafkaProducer, state_topic: str, partition: int) -> None:
        self.producer = producer
        self.state_topic = state_topic
        self.partition = partition
        self._pending: list[asyncio.Future[Any]] = []
        self._state: dict[str, bytes | None] = {}

    async def send(self, topic: str, key: bytes | None, value: bytes | None,
                   partition: int | None = None,
                   headers: Sequence[tuple[str, bytes]] | None = None) -> None:
        """Append one output record (any topic) inside the transaction (not awaited)."""
        self._pending.append(await self.producer.send(
            topic, value, key=key, partition=partition,
            headers=list(headers) if headers else None))

    async def put(self, key: str, value: Any) -> None:
        """Write one state record (None deletes) to this partition of the state topic.

        Encoded now (the caller may mutate ``value`` later), sent at :meth:`flush`;
        a later put of the same key in this transaction replaces it.
        """
        self._state[key] = None if value is None else orjson.dumps(
            value, option=orjson.OPT_SORT_KEYS)

    @property
    def records(self) -> int:
        """Records appended so far plus coalesced state writes still to send."""
        return len(self._pending) + len(self._state)

    async def flush(self) -> None:
        """Send the state writes, then wait for every append: a failed one must fail
        the batch, not the commit."""
        state, self._state = self._state, {}
        for key, raw in state.items():
            await self.send(self.state_topic, key.encode(), raw, partition=self.partition)
        pending, self._pending = self._pending, []
        await asyncio.gather(*pending)


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
    # called once per transaction after its last record and before the commit, so a
    # handler can write what a whole batch changed once instead of once per record.


@dataclass
class _Owned:
    producer: AIOKafkaProducer
    epoch: int
    next_offsets: dict[TopicPartition, int]


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, processor: TransactionalProcessor) -> None:
        self.processor = processor

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self.processor.close_partitions({tp.partition for tp in revoked})

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        await self.processor.open_partitions({tp.partition for tp in assigned})


class TransactionalProcessor(Service):
    """Runs a :class:`Handler` exactly once over ``topics`` (see the module doc).

    A mode service, so the Faust worker starts it with the app and stops it on
    SIGTERM: the loop is cancelled (an open transaction is aborted), the
    consumer leaves the group and the producers close.
    """

    def __init__(self, *, name: str, app_id: str, bootstrap: str, topics: Sequence[str],
                 handler: Handler, max_records: int = 200, session_timeout_s: float = 10.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name = name
        self.app_id = app_id
        self.bootstrap = bootstrap
        self.topics = list(topics)
        self.handler = handler
        self.max_records = max_records
        self.session_timeout_s = session_timeout_s
        self.group_id = f"{app_id}-{name}"
        self.state_topic = f"{app_id}-{name}-state"
        self._lock = asyncio.Lock()
        self._owned: dict[int, _Owned] = {}
        self._epoch = 0
        self._retry_at: dict[int, float] = {}
        self._failures: dict[tuple[TopicPartition, int], tuple[int, str]] = {}
        """(partition, offset) -> (times processing raised, last error), until committed."""
        self._consumer: AIOKafkaConsumer | None = None
        self._loop_task: asyncio.Task[None] | None = None

    @property
    def label(self) -> str:
        return f"{type(self).__name__}({self.name})"

    def owned_partitions(self) -> set[int]:
        """Partition numbers whose state this worker holds and processes now."""
        return set(self._owned)

    # ---- lifecycle -----------------------------------------------------------------

    async def on_start(self) -> None:
        quiet_client_debug_logs()
        ms = int(self.session_timeout_s * 1000)
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group_id,
            isolation_level="read_committed", enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=(RangePartitionAssignor,),
            session_timeout_ms=ms, heartbeat_interval_ms=max(100, min(3000, ms // 5)),
            **aiokafka_kwargs())
        await self._consumer.start()
        self._consumer.subscribe(self.topics, listener=_Listener(self))
        self._loop_task = asyncio.ensure_future(self._run())

    async def on_stop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._loop_task
        await self.close_partitions(set(self._owned))
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                await self._consumer.stop()

    # ---- ownership -----------------------------------------------------------------

    async def close_partitions(self, partitions: set[int]) -> None:
        """Give partitions up: waits for the batch in flight, then closes their producers."""
        async with self._lock:
            for p in sorted(partitions):
                self._retry_at.pop(p, None)
                owned = self._owned.pop(p, None)
                self.handler.drop(p)
                if owned is not None:
                    await _close_producer(owned.producer)

    async def open_partitions(self, partitions: set[int]) -> None:
        """Fence, restore state, position at the committed offset; then the partitions count."""
        async with self._lock:
            await self._open(partitions)

    async def _open(self, partitions: set[int]) -> None:
        assert self._consumer is not None
        partitions = {p for p in partitions if p not in self._owned}
        if not partitions:
            return
        producers = {p: AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, transactional_id=f"{self.group_id}-{p}",
            enable_idempotence=True, acks="all", retry_backoff_ms=TXN_RETRY_BACKOFF_MS,
            **aiokafka_kwargs()) for p in partitions}
        try:
            # start() = InitProducerId: fences the previous owner, aborts its transaction.
            await asyncio.gather(*(pr.start() for pr in producers.values()))
            states = await self._read_state(partitions)
            tps = [tp for tp in self._consumer.assignment() if tp.partition in partitions]
            committed = {tp: await self._consumer.committed(tp) for tp in tps}
            missing = [tp for tp, off in committed.items() if off is None]
            firsts = await self._consumer.beginning_offsets(missing) if missing else {}
        except BaseException:
            for pr in producers.values():
                await _close_producer(pr)
            raise
        for p in sorted(partitions):
            self.handler.restore(p, states[p])
            self._epoch += 1
            offsets = {tp: int(committed[tp] if committed[tp] is not None else firsts[tp])
                       for tp in tps if tp.partition == p}
            for tp, off in offsets.items():
                self._consumer.seek(tp, off)
            self._owned[p] = _Owned(producers[p], self._epoch, offsets)
        log.info("%s owns partitions %s", self.label, sorted(self._owned))

    async def _read_state(self, partitions: set[int]) -> dict[int, dict[str, Any]]:
        """Each partition's committed state: its state-topic partition read to the end."""
        states: dict[int, dict[str, Any]] = {p: {} for p in partitions}
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                    enable_auto_commit=False, isolation_level="read_committed",
                                    auto_offset_reset="earliest", **aiokafka_kwargs())
        await consumer.start()
        try:
            tps = [TopicPartition(self.state_topic, p) for p in sorted(partitions)]
            consumer.assign(tps)
            ends = await consumer.end_offsets(tps)  # read_committed: the last stable offset
            await consumer.seek_to_beginning(*tps)
            waiting = {tp for tp in tps if ends[tp] > 0}
            deadline = time.monotonic() + RESTORE_TIMEOUT_S
            while waiting:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.state_topic}: state not read in time")
                batches = await consumer.getmany(*waiting, timeout_ms=200)
                for tp, records in batches.items():
                    state = states[tp.partition]
                    for r in records:
                        if r.offset >= ends[tp] or r.key is None:
                            continue
                        key = r.key.decode()
                        if r.value is None:
                            state.pop(key, None)
                        else:
                            state[key] = orjson.loads(r.value)
                for tp in list(waiting):
                    if await consumer.position(tp) >= ends[tp]:
                        waiting.discard(tp)
        finally:
            await consumer.stop()
        return states

    # ---- processing ----------------------------------------------------------------

    async def _run(self) -> None:
        """Fetch, then one transaction per partition with records, all partitions at once.

        A fetch takes everything buffered (up to ``max_records`` per owned
        partition), so a transaction holds whatever arrived while the previous
        one committed: large batches under load, one record at low rate (no
        waiting to fill a batch). Partitions commit concurrently, each through
        its own producer, so one partition's commit round trips do not delay
        another's; records of one partition stay in order in one task.
        """
        assert self._consumer is not None
        consumer = self._consumer
        while True:
            await self._heal()
            epochs = {p: o.epoch for p, o in self._owned.items()}
            batches = await consumer.getmany(
                timeout_ms=200, max_records=self.max_records * max(1, len(epochs)))
            if not batches:
                continue
            by_partition: dict[int, list[tuple[TopicPartition, list[Any]]]] = {}
            for tp, records in batches.items():
                by_partition.setdefault(tp.partition, []).append((tp, records))
            async with self._lock:
                work = []
                for p, parts in sorted(by_partition.items()):
                    owned = self._owned.get(p)
                    if owned is None:
                        continue  # not ours (yet): opening it seeks to the committed offset
                    if epochs.get(p) != owned.epoch:
                        # Fetched before the partition's latest (re)initialisation.
                        for tp, _ in parts:
                            if tp in owned.next_offsets:
                                consumer.seek(tp, owned.next_offsets[tp])
                        continue
                    work.append(self._partition_batches(p, owned, parts))
                if len(work) == 1:
                    await work[0]
                elif work:
                    await asyncio.gather(*work)

    async def _heal(self) -> None:
        """(Re)open assigned partitions not owned: a failed batch or a failed assignment."""
        assert self._consumer is not None
        assigned = {tp.partition for tp in self._consumer.assignment()}
        now = time.monotonic()
        due = {p for p in assigned - set(self._owned) if self._retry_at.get(p, 0.0) <= now}
        if not due:
            return
        async with self._lock:
            try:
                await self._open(due)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: opening partitions %s failed; retrying", self.label, due)
                for p in due:
                    self._retry_at[p] = time.monotonic() + RETRY_S

    async def _partition_batches(self, p: int, owned: _Owned,
                                 parts: list[tuple[TopicPartition, list[Any]]]) -> None:
        """The fetched records of partition ``p`` in transactions of at most ``max_records``."""
        todo = [(tp, r) for tp, records in parts for r in records
                if r.offset >= owned.next_offsets.get(tp, 0)]
        for i in range(0, len(todo), self.max_records):
            if self._owned.get(p) is not owned:
                return  # the previous transaction failed: the partition is re-read
            await self._batch(p, owned, todo[i:i + self.max_records])

    async def _batch(self, p: int, owned: _Owned,
                     todo: list[tuple[TopicPartition, Any]]) -> None:
        """One transaction: the records' effects, state writes and next offsets, or nothing."""
        if not todo:
            return
        producer = owned.producer
        offsets: dict[TopicPartition, int] = {}
        finish = getattr(self.handler, "finish", None)
        try:
            await producer.begin_transaction()
            txn = Transaction(producer, self.state_topic, p)
            for tp, r in todo:
                await self._process(tp, r, txn)
                offsets[tp] = r.offset + 1
            if finish is not None:
                await finish(p, txn)
            # Register the offsets while the outputs are still in flight: AddOffsetsToTxn
            # and TxnOffsetCommit then overlap the produce round trip instead of
            # queueing behind it. The commit still waits for every append (flush).
            offsets_sent = asyncio.ensure_future(
                producer.send_offsets_to_transaction(offsets, self.group_id))
            try:
                await txn.flush()
            except BaseException:
                offsets_sent.cancel()  # shielded in aiokafka: the abort below settles it
                raise
            await offsets_sent
            await producer.commit_transaction()
        except asyncio.CancelledError:
            await self._fail(p, owned)
            raise
        except Exception:
            log.exception("%s: batch of partition %d aborted; re-reading its state",
                          self.label, p)
            await self._fail(p, owned)
            return
        owned.next_offsets.update(offsets)
        if self._failures:
            self._failures = {k: v for k, v in self._failures.items()
                              if k[1] >= owned.next_offsets.get(k[0], 0)}

    async def _process(self, tp: TopicPartition, record: Any, txn: Transaction) -> None:
        """``handler.process``, or ``handler.reject`` once the record failed too often."""
        key = (tp, record.offset)
        count, error = self._failures.get(key, (0, ""))
        if count >= POISON_ATTEMPTS:
            log.error("%s: %s[%d]@%d failed %d times, dead-lettered: %s", self.label,
                      tp.topic, tp.partition, record.offset, count, error)
            await self.handler.reject(record, txn, error)
            return
        try:
            await self.handler.process(record, txn)
        except Exception as exc:
            self._failures[key] = (count + 1, f"{type(exc).__name__}: {exc}"[:500])
            raise

    async def _fail(self, p: int, owned: _Owned) -> None:
        """Abort, forget the partition's memory; :meth:`_heal` re-opens it after a pause."""
        with contextlib.suppress(Exception):
            await owned.producer.abort_transaction()
        self._owned.pop(p, None)
        self.handler.drop(p)
        self._retry_at[p] = time.monotonic() + RETRY_S
        await _close_producer(owned.producer)


def quiet_client_debug_logs() -> None:
    """Stop aiokafka building a LogRecord per produced and fetched record nobody sees.

    aiokafka logs every send, fetch and request at DEBUG. Faust's worker, run at
    WARN or above, sets the root logger to DEBUG so that its terminal spinner
    turns on every record, while its output handler prints WARN and up only: each
    of those calls then built and dispatched a record, about 10 % of a worker's
    CPU under load (py-spy, bench/service.py). When no handler other than the
    spinner shows DEBUG, the aiokafka logger gets the level actually shown.
    An explicitly set aiokafka level is left alone.
    """
    client = logging.getLogger("aiokafka")
    if client.level != logging.NOTSET:
        return
    root = logging.getLogger()
    shown = [h.level for h in root.handlers if type(h).__name__ != "SpinnerHandler"]
    floor = max(root.level, min(shown)) if shown else root.level
    if floor > logging.DEBUG:
        client.setLevel(floor)


async def _close_producer(producer: AIOKafkaProducer) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(producer.stop(), 10)

"""Exactly-once, partitioned, stateful processing: Kafka's transactional consume-transform-produce.

Why not Faust's agents under ``processing_guarantee="exactly_once"``: faust-streaming
0.15's bookkeeping commits source offsets past records no agent processed, counts
acks of an older consumer generation, can stall a partition's transaction until
the broker's transaction timeout fences the producer, and takes changelog
recovery highwaters from a cached LSO (docs/service.md, upstream issues #177,
#323, #517). This module is the textbook loop instead, on aiokafka only:

* one consumer in group ``{app id}-{name}`` (``read_committed``, no auto commit,
  range assignment so co-partitioned input topics land together);
* per partition its state, kept in a compacted topic ``{app id}-{name}-state``
  (same partition count, key = entity key, value = JSON or null = deleted),
  restored by reading that partition to its end with ``read_committed`` after
  the fence (below); the consumer is then positioned at the next offsets stored
  there (``eos.offset/<topic>/<partition>`` records, see below);
* per fetch ("round") one transaction for every owned partition it read:
  outputs, state writes (each to its partition of the state topic) and the next
  offsets to consume (state records of the same partitions) commit together or
  not at all;
* any error in a round aborts it, drops every partition's in-memory state and
  re-opens them (fence, state re-read, re-seek to the committed offsets), so
  memory never keeps an aborted write.

Why one transaction per round and not per partition: a transaction costs three
requests (AddPartitionsToTxn, Produce, EndTxn) whatever it spans, and on this
project's hosts a request is the unit of the loop's cost (~0.5-0.7 ms of client
CPU with its response). At 200 submissions/s the router read one to eight of its
eight partitions per round and ran a transaction for each: 3.0 requests per
submission in the worker, 1.7 with one transaction per round (bench/service.py
``--count-requests``, consecutive 30 s runs at load average 4.3-4.9). On an idle
machine rounds are short and carry one partition or two either way.

How zombies stay fenced with one transaction across partitions. Before
KIP-447 (which aiokafka 0.14 lacks) the fencing token of a partition is a
transactional id: a new owner's InitProducerId on it aborts (or completes) the
old owner's transaction and makes its epoch invalid. A round's producer writes
many partitions, so its id cannot be the partition's; instead each partition's
state names the ids that may write it, and claims are serialized through the
partition's own id:

1. Opening partition ``p`` starts the producers of ``p``'s own ids
   ``{group}-{p}`` and ``{group}-{p}-b`` (:data:`TXN_ID_SUFFIXES`): this fences
   writers of an earlier version (one or two per partition, they wrote with
   those ids) and any claim of ``p`` in flight, and no one holding an older
   epoch of ``{group}-{p}`` can claim ``p`` again.
2. It reads ``p``'s state and fences every round producer its claim record
   (:data:`WRITERS_KEY`) names, then reads on to the (new) end: what those
   writers had decided is now in the state, what they had not is aborted, and
   they can never commit again.
3. It commits a claim naming its own, freshly named writers
   (``{group}-r{random}`` and ``...-b``) through ``{group}-{p}``, and only then
   processes ``p``.

Induction over the owners of ``p``: when owner n+1 finishes step 1, owner n's
claim (if any) is committed and readable, or it never will be; its writers were
named only by that claim and are fenced in step 2; owners before n were fenced
the same way by owner n. So at any time the only writers that can commit to
``p`` are those of the last committed claim, and a new owner reads ``p`` only
after fencing them: no record is applied twice, none skipped (the offsets commit
with the outputs). Writers are never re-initialised (new ids per opening), so a
fenced one stays fenced. A zombie that still believes it owns ``p`` and others
gets its round refused, fails and re-opens whatever its consumer still has
assigned, fencing in turn: ownership may swap until its heartbeat tells it of the
rebalance (``RETRY_S``), correctness does not depend on it. Since the writers are
claimed for all owned partitions, closing any partition releases all of them and
the others are re-opened at once (aiokafka's eager rebalance revokes all anyway).
Test: ``tests/service/test_eos_fencing.py``.

Why the offsets are state records and not group offsets
(``send_offsets_to_transaction``): that costs two more requests per
transaction (AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator).
Exactly once holds the same way: the offsets commit atomically with the outputs
and the state, and a new owner reads them only after it fenced every writer
that could still write them (above). The group still assigns partitions;
its committed offsets are written outside the transactions every
:data:`GROUP_OFFSETS_EVERY_S` for lag tools only, and read only for an input
partition whose state has no offset record yet (a deployment from before this
change, or a new input topic).

Why two round producers, in turn: the broker answers EndTxn when the commit is
decided and writes the markers after; a producer's next transaction is refused
(CONCURRENT_TRANSACTIONS, retried) until they are written, 2-4 ms on the dev
broker, and a busy loop starts its next transaction at once. The other
producer's last transaction ended a whole transaction earlier. Exactly once and
order still hold: transaction k+1 appends only after EndTxn of k succeeded, so
its appends follow k's in every log (compaction keeps k+1's state writes), the
decided transactions are always a prefix and at most one with records is
undecided; a new owner fences both writers (both are named in the claim), which
completes a decided one and aborts the undecided one before the state (and with
it the offsets) is read on. A failed EndTxn fails the round as before.
Transaction k+1 may be *begun* earlier, at the start of round k
(``_begin_ahead``: its AddPartitionsToTxn is answered during round k): until
round k+1 appends it holds no records, a failed round k aborts it too, and an
unused one is aborted before the transaction timeout.

Rounds are pipelined on the two producers: round k+1's records are *processed* (in
memory, into its transaction's buffers) while round k's appends and EndTxn are in
flight, and round k+1 *appends* only once EndTxn of k has succeeded, so everything
above still holds. What processing early adds: round k+1's in-memory state is built
on round k's, which is not decided yet. If k fails to commit, k+1 is aborted before
it appended anything and every partition's memory is dropped and re-read (as after
any failed round); if a record of k+1 fails, k is still let to finish (committed or
not, the re-read state says which), then k+1 is aborted the same way. A rebalance, a
re-opening or a stop waits for the commit in flight before it releases the writers.

A partition is only processed while it is owned (``_owned``); records fetched
before the latest (re)initialisation of their partition are discarded and the
partition re-positioned, so a record is never skipped and never applied twice.

This module is the loop (:class:`TransactionalProcessor`); beside it, one job each:
``eos_txn`` what a round writes (the transaction, the handler protocol, the state
topic and its offset records), ``eos_state`` what opening a partition reads (its
committed state, the writers its claim names) and ``eos_tuning`` the process-wide
settings and the trace, each with the measurement behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from mode import Service

from schemas.kafka import aiokafka_kwargs
from streams.processors.closing import close_in_background, wait_closed
from streams.processors.eos_state import (
    TXN_ID_SUFFIXES,
    WRITERS_KEY,
    StateReader,
    pop_offsets,
)
from streams.processors.eos_tuning import (
    FREEZE_AFTER_OPEN,
    TRACE_ENV,
    TXN_RETRY_BACKOFF_MS,
    Trace,
    quiet_client_debug_logs,
    use_short_concurrent_txn_backoff,
    use_young_collection_threshold,
)
from streams.processors.eos_txn import Handler, Transaction, flush_all, offset_key
from streams.processors.produce import (
    BATCH_BYTES,
    announce_partitions,
)

log = logging.getLogger(__name__)

POISON_ATTEMPTS = 3
"""A record whose processing raised this many times is handed to ``Handler.reject``
(dead-lettered) instead: one bad record must not stall its partition for ever."""
RETRY_S = 1.0
"""Wait before re-initialising a partition whose batch failed: a fenced zombie
(e.g. after SIGSTOP past the session timeout) learns from its next heartbeat
that it lost the partition, instead of fencing the rightful owner at once."""
DOWNSTREAM_BACKLOG_LIMIT = 800
"""A processor with a ``downstream_backlog`` fetches nothing while that backlog is above
this many records (:meth:`TransactionalProcessor._pace`). The backlog is known as of the
downstream's last fetch, so the real one can be a router round or two (1,600 records
each at the defaults) larger: 800 keeps it under ``ingest.ROUTED_TELEMETRY_LIMIT``
(4,096), where the scheduler's lookups start to miss (2,000 left 10-34 % of them
missing under load, 800 0-10 %: BENCHMARKS.md "Telemetry ingest, session 5")."""
PACE_MAX_WAIT_S = 0.5
"""The longest such a pause lasts: a downstream that stalls (a poison record's retries)
slows its upstream, never stops it."""
PACE_POLL_S = 0.002

RELEASE_ABORT_S = 2.0
"""On release, how long to wait for the abort of a transaction begun ahead and unused.
Not needed for exactly once (it holds no records, and the partitions' next owner fences
its producer, which aborts it); it only spares the coordinator an open transaction until
its timeout when the worker stops."""
STOP_CLOSE_WAIT_S = 2.0
"""On stop, how long to let the clients closing in the background finish (closing.py)."""

YIELD_EVERY_S = 0.002
"""A round gives the event loop back (``asyncio.sleep(0)``) after this much processing.

The router and the scheduler share the worker's one event loop. A round's records are
processed without a real ``await`` (the handlers only buffer outputs), so a scheduler
batch of 100 submissions (~0.3-1 ms each in the core) held the loop for 30-100 ms, and
every response the router was waiting for (AddPartitionsToTxn, Produce, EndTxn, its
fetch) waited that long: "waiting for the router's round in progress" was the largest
stage of the tail (BENCHMARKS.md, service section, session 4). Yielding lets those
callbacks run in between; it costs one loop iteration (microseconds) per 2 ms.

Why one turn per yield, though a request of the other processor is a chain of ~6-8
callbacks each made ready by the one before (so next to a busy round each of its
AddPartitionsToTxn / Produce / EndTxn took ~13-20 ms instead of 0.4-0.9; 8 turns per
1 ms slice: ~1.4 ms, probe in BENCHMARKS.md "Session 6"): with 8 turns the router
progressed freely during the scheduler's rounds, ran many small rounds (each with its
fixed cost in requests), and under CPU contention the scheduler fell behind it
(scheduler rounds 0.58-0.92 of the router's, p99 0.73-1.09 s, in 3 of 7 traced runs
at 200 submissions/s; 0.94-1.01 in all 11 with one turn). One turn keeps the
scheduler, which makes the decisions, ahead."""


IDLE_EVERY_S = 1.0
"""How often a quiet partition whose handler ``has_waiting`` gets an idle transaction."""
AHEAD_IDLE_S = 10.0
"""A transaction begun ahead of its round (:meth:`TransactionalProcessor._begin_ahead`)
and still unused after this long is aborted. The coordinator aborts a transaction open
longer than the producer's ``transaction_timeout_ms`` (aiokafka: 60 s) and bumps the
producer's epoch, which fences it: its next round would fail and every partition be
re-opened. An unused one has no records, so aborting it only writes markers."""
AHEAD_ACTIVE_S = 1.0
"""A transaction begun ahead announces the partitions of the owned source partitions that
read records this recently (their state partitions and what they wrote last): the ones
the next round most likely reads. Those quiet longer cost no markers."""
GROUP_OFFSETS_EVERY_S = 5.0
"""How often the owned partitions' next offsets are also committed to the consumer
group (not transactional; for lag monitoring only, see the module doc)."""


@dataclass
class _Owned:
    epoch: int
    next_offsets: dict[TopicPartition, int]


@dataclass
class _Writers:
    """The round producers of every owned partition: fresh ids per opening, used in turn."""

    ids: tuple[str, ...]
    producers: tuple[AIOKafkaProducer, ...]
    turn: int = 0
    """Index of the producer of the next round to start."""
    begun: dict[int, float] = field(default_factory=dict)
    """Producer index -> when its transaction was begun ahead of its round
    (``time.monotonic()``), for a transaction no round has taken yet."""
    open: set[int] = field(default_factory=set)
    """Producer indexes with a transaction open: begun ahead, or a round's (being
    processed, or committing)."""

    def take_turn(self) -> int:
        """The producer index of the round starting now; the next round gets the next."""
        index = self.turn
        self.turn = (self.turn + 1) % len(self.producers)
        return index


@dataclass
class _Started:
    """A round processed in memory whose appends and commit are still to come."""

    index: int
    """Its producer (``_Writers.producers``)."""
    txns: dict[int, Transaction]
    offsets: dict[TopicPartition, int]
    batches: dict[int, list[tuple[TopicPartition, Any]]]
    stages: dict[str, Any]


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
                 downstream_backlog: Callable[[], int] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name = name
        self.app_id = app_id
        self.bootstrap = bootstrap
        self.topics = list(topics)
        self.handler = handler
        self.max_records = max_records
        self.session_timeout_s = session_timeout_s
        self.downstream_backlog = downstream_backlog
        """Records waiting in the processor of this worker that reads what this one writes
        (the router's: the scheduler's :meth:`backlog`); None = no such processor here."""
        self.group_id = f"{app_id}-{name}"
        self.state_topic = f"{app_id}-{name}-state"
        self._lock = asyncio.Lock()
        self._owned: dict[int, _Owned] = {}
        self._writers: _Writers | None = None
        """The round producers, claimed for every owned partition (None: none owned)."""
        self._epoch = 0
        self._retry_at: dict[int, float] = {}
        self._failures: dict[tuple[TopicPartition, int], tuple[int, str]] = {}
        """(partition, offset) -> (times processing raised, last error), until committed."""
        self._consumer: AIOKafkaConsumer | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._inflight: asyncio.Task[None] | None = None
        """The last round's appends and commit, running in the background (:meth:`_round`)."""
        self._group_offsets_at = 0.0
        self._idle_at = 0.0
        folder = os.environ.get(TRACE_ENV)
        self._trace = Trace(folder, name) if folder else None
        self._fetch_times: dict[str, float] = {}
        """Trace only: when the loop started waiting for and received the current fetch."""
        self._wrote: dict[int, frozenset[TopicPartition]] = {}
        """Per source partition: what its last committed transaction appended to (output
        and state partitions), announced at the start of its next one."""
        self._read_at: dict[int, float] = {}
        """Per source partition: when a committed round last consumed records of it
        (``time.monotonic()``); :meth:`_begin_ahead` announces the recent ones."""

    @property
    def label(self) -> str:
        return f"{type(self).__name__}({self.name})"

    def owned_partitions(self) -> set[int]:
        """Partition numbers whose state this worker holds and processes now."""
        return set(self._owned)

    def backlog(self) -> int:
        """Records committed to the owned partitions and not processed yet, as of the last
        fetch (the consumer's last stable offsets; no request)."""
        consumer = self._consumer
        if consumer is None:
            return 0
        waiting = 0
        for owned in self._owned.values():
            for tp, next_offset in owned.next_offsets.items():
                end = consumer.last_stable_offset(tp)
                if end is not None and end > next_offset:
                    waiting += end - next_offset
        return waiting

    # ---- lifecycle -----------------------------------------------------------------

    async def on_start(self) -> None:
        quiet_client_debug_logs()
        use_short_concurrent_txn_backoff()
        use_young_collection_threshold()
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
        async with self._lock:
            await self._settle()  # the last round's commit: let it finish
            await self._release()
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                await self._consumer.stop()
        await wait_closed(STOP_CLOSE_WAIT_S)

    # ---- ownership -----------------------------------------------------------------

    async def close_partitions(self, partitions: set[int]) -> None:
        """Give partitions up: waits for the round in flight, then closes the writers.

        The writers are claimed for every owned partition, and a partition's next
        owner fences them: closing any owned partition releases all of them
        (:meth:`_heal` re-opens those still assigned at once). A rebalance revokes
        every partition anyway (aiokafka's eager protocol).
        """
        async with self._lock:
            for p in partitions:
                self._retry_at.pop(p, None)
            await self._settle()  # the round committing: its partitions' last one
            if partitions & set(self._owned):
                await self._release()

    async def open_partitions(self, partitions: set[int]) -> None:
        """Fence, restore state, claim, position at the committed offsets; then they count."""
        async with self._lock:
            await self._open(partitions)

    def _producer(self, transactional_id: str) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, transactional_id=transactional_id,
            enable_idempotence=True, acks="all", retry_backoff_ms=TXN_RETRY_BACKOFF_MS,
            max_batch_size=BATCH_BYTES, **aiokafka_kwargs())

    async def _open(self, partitions: set[int]) -> None:
        """Take ``partitions`` (and those owned already: one set of writers claims all).

        In this order (the module doc argues why): start the partitions' own
        producers (fences their earlier writers and any claim in flight), read
        the state, fence the writers it names, read on to the end, claim the
        partitions for fresh writers, and only then process them.
        """
        assert self._consumer is not None
        if not partitions - set(self._owned):
            return
        await self._settle()  # a round still committing to the partitions owned now
        assigned = {tp.partition for tp in self._consumer.assignment()}
        partitions = (partitions | set(self._owned)) & assigned  # never claim another's
        await self._release()
        if not partitions:
            return
        token = uuid.uuid4().hex[:12]
        ids = tuple(f"{self.group_id}-r{token}{suffix}" for suffix in TXN_ID_SUFFIXES)
        writers = _Writers(ids, tuple(self._producer(i) for i in ids))
        own = {p: tuple(self._producer(f"{self.group_id}-{p}{suffix}")
                        for suffix in TXN_ID_SUFFIXES) for p in partitions}
        started = [pr for prs in own.values() for pr in prs] + list(writers.producers)
        try:
            # start() = InitProducerId: fences the previous holder, settles its transaction.
            await asyncio.gather(*(pr.start() for pr in started))
            async with StateReader(self.bootstrap, self.state_topic, partitions) as reader:
                fenced: set[str] = set()
                while True:
                    await reader.read_to_end()
                    named = {w for s in reader.states.values()
                             for w in s.get(WRITERS_KEY) or ()} - fenced
                    if not named:
                        break
                    await asyncio.gather(*(self._fence(w) for w in sorted(named)))
                    fenced |= named  # their last transactions are settled: read on
                states = reader.states
            await asyncio.gather(*(self._claim(own[p][0], p, ids) for p in partitions))
            stored = {p: pop_offsets(states[p]) for p in partitions}
            tps = [tp for tp in self._consumer.assignment() if tp.partition in partitions]
            committed = {tp: stored[tp.partition].get(offset_key(tp)) for tp in tps}
            for tp in [tp for tp, off in committed.items() if off is None]:
                committed[tp] = await self._consumer.committed(tp)  # from before OFFSET_KEY
            missing = [tp for tp, off in committed.items() if off is None]
            firsts = await self._consumer.beginning_offsets(missing) if missing else {}
        except BaseException:
            for pr in started:
                close_in_background(pr)
            raise
        for prs in own.values():
            for pr in prs:
                close_in_background(pr)  # claimed: done with (closing.py: why not awaited)
        self._writers = writers
        for p in sorted(partitions):
            self.handler.restore(p, states[p])
            self._epoch += 1
            offsets = {tp: int(off if (off := committed[tp]) is not None else firsts[tp])
                       for tp in tps if tp.partition == p}
            for tp, off in offsets.items():
                self._consumer.seek(tp, off)
            self._owned[p] = _Owned(self._epoch, offsets)
        if FREEZE_AFTER_OPEN:
            gc.freeze()
        log.info("%s owns partitions %s", self.label, sorted(self._owned))

    async def _fence(self, transactional_id: str) -> None:
        """InitProducerId on a previous owner's writer: it can never commit again."""
        producer = self._producer(transactional_id)
        try:
            await producer.start()
        finally:
            close_in_background(producer)

    async def _claim(self, producer: AIOKafkaProducer, p: int, ids: tuple[str, ...]) -> None:
        """Commit, through the partition's own producer, which writers may write ``p`` now."""
        await producer.begin_transaction()
        txn = Transaction(producer, self.state_topic, p)
        await txn.put(WRITERS_KEY, list(ids))
        await txn.flush()
        await producer.commit_transaction()

    async def _release(self) -> None:
        """Forget every owned partition and close the writers (no open transaction)."""
        for p in sorted(self._owned):
            self.handler.drop(p)
        self._owned.clear()
        self._wrote.clear()
        self._read_at.clear()
        writers, self._writers = self._writers, None
        if writers is not None:
            begun, writers.begun = writers.begun, {}
            writers.open -= set(begun)
            for i in begun:  # begun ahead, unused: they hold no records
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writers.producers[i].abort_transaction(),
                                           RELEASE_ABORT_S)
            for producer in writers.producers:
                close_in_background(producer)

    # ---- processing ----------------------------------------------------------------

    async def _run(self) -> None:
        """Fetch, then one transaction for all partitions with records.

        A fetch takes everything buffered, up to ``max_records`` times the owned
        partitions in all, so a transaction holds whatever arrived while the
        previous one committed: large batches under load, one record at low rate
        (no waiting to fill a batch). One transaction per round, whatever the number
        of partitions it read, costs the same three requests (AddPartitionsToTxn,
        Produce, EndTxn) as one partition's did.

        Why the whole fetch is one round even when one partition brought more than
        ``max_records`` (until session 5 such a fetch was split into rounds of
        ``max_records`` per partition): the round size adapts to the backlog by itself.
        A fetch brings more than ``max_records`` of a partition only when that many
        were waiting (at a light load it holds what arrived during one round, and
        rounds are as small as before), and then splitting only multiplied the
        transactions: the scheduler of a worker with one busy cell committed a
        1,600-record fetch of the router's telemetry as eight transactions of 200,
        at ~3 requests each, and fell behind the router (issue 11, BENCHMARKS.md
        "Telemetry ingest, session 5"). A transaction is still bounded by the fetch
        limit, which a router with every partition busy reached before. What a
        record behind a backlog waits for is the backlog before it, now cheaper per
        record, plus at most the rest of its round.
        """
        assert self._consumer is not None
        consumer = self._consumer
        while True:
            await self._heal()
            await self._pace()
            epochs = {p: o.epoch for p, o in self._owned.items()}
            polled = time.time()
            batches = await consumer.getmany(
                timeout_ms=200, max_records=self.max_records * max(1, len(epochs)))
            if self._inflight is not None and self._inflight.done():
                async with self._lock:  # a failed commit re-opens now, not at the next round
                    await self._settle()
            await self._commit_group_offsets()
            await self._abort_idle_ahead()
            await self._quiet({tp.partition for tp in batches}, epochs)
            if not batches:
                continue
            if self._trace is not None:
                self._fetch_times = {"poll": polled, "fetch": time.time()}
            async with self._lock:
                todo: dict[int, list[tuple[TopicPartition, Any]]] = {}
                for tp, records in batches.items():
                    owned = self._owned.get(tp.partition)
                    if owned is None:
                        continue  # not ours (yet): opening it seeks to the committed offset
                    if epochs.get(tp.partition) != owned.epoch:
                        # Fetched before the partition's latest (re)initialisation.
                        if tp in owned.next_offsets:
                            consumer.seek(tp, owned.next_offsets[tp])
                        continue
                    start = owned.next_offsets.get(tp, 0)
                    todo.setdefault(tp.partition, []).extend(
                        (tp, r) for r in records if r.offset >= start)
                if todo and self._writers is not None:
                    await self._round(todo)  # the whole fetch: see the docstring

    async def _pace(self) -> None:
        """Fetch nothing while this worker's downstream processor is far behind (up to
        :data:`PACE_MAX_WAIT_S`), so that it catches up.

        Why: the router and the scheduler of a worker share one event loop and take
        turns, a fetch each. With a backlog of input both fetch the same number of
        records per turn, so a scheduler behind its router stayed behind by as much
        for as long as the backlog lasted, and its lookups in ``ingest.RoutedTelemetry``
        (bounded) missed: each record validated twice, the cost that table saves
        (issue 11, BENCHMARKS.md "Telemetry ingest, session 5"). What holding the
        router back costs: a record of a busy cell nothing, since the scheduler reads
        each input-log partition in order and the record waits for the same backlog
        either way; a record of another, idle cell the scheduler rounds that bring the
        backlog under the limit (a round or two, at most :data:`PACE_MAX_WAIT_S`), the
        same CPU it would have waited for in turn. At a light load the backlog is ~0
        and this returns at once.
        """
        backlog = self.downstream_backlog
        if backlog is None or backlog() <= DOWNSTREAM_BACKLOG_LIMIT:
            return
        deadline = time.monotonic() + PACE_MAX_WAIT_S
        while backlog() > DOWNSTREAM_BACKLOG_LIMIT and time.monotonic() < deadline:
            await asyncio.sleep(PACE_POLL_S)

    async def _commit_group_offsets(self) -> None:
        """Every :data:`GROUP_OFFSETS_EVERY_S`: the consumer group's offsets for lag tools.

        Not part of any transaction and never read while the state has offsets.
        """
        assert self._consumer is not None
        now = time.monotonic()
        if now - self._group_offsets_at < GROUP_OFFSETS_EVERY_S:
            return
        self._group_offsets_at = now
        assigned = self._consumer.assignment()
        offsets = {tp: off for owned in self._owned.values()
                   for tp, off in owned.next_offsets.items() if tp in assigned}
        if offsets:
            with contextlib.suppress(Exception):  # a rebalance: the next owner reports
                await asyncio.wait_for(self._consumer.commit(offsets), 5.0)

    async def _quiet(self, busy: set[int], epochs: dict[int, int]) -> None:
        """Every :data:`IDLE_EVERY_S`: one idle transaction for the owned partitions that
        read nothing in this fetch but whose handler has something waiting on time."""
        waiting = getattr(self.handler, "has_waiting", None)
        if waiting is None or not hasattr(self.handler, "idle"):
            return
        now = time.monotonic()
        if now - self._idle_at < IDLE_EVERY_S:
            return
        self._idle_at = now
        async with self._lock:
            idle = {p for p, owned in self._owned.items()
                    if p not in busy and epochs.get(p) == owned.epoch and waiting(p)}
            if idle and self._writers is not None:
                await self._round({}, idle=idle)

    async def _heal(self) -> None:
        """(Re)open assigned partitions not owned: a failed round or a failed assignment."""
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
                for p in assigned - set(self._owned):  # _open released the owned ones too
                    self._retry_at[p] = time.monotonic() + RETRY_S

    async def _round(self, batches: dict[int, list[tuple[TopicPartition, Any]]],
                     idle: set[int] | frozenset[int] = frozenset()) -> None:
        """One transaction: every record's effects, state writes and next offsets, or nothing.

        ``idle``: partitions without records whose handler's ``idle`` runs in this
        transaction (see :meth:`_quiet`). Any error aborts the round (and the one before
        it, if still undecided) and re-opens every partition (:meth:`_fail`).

        Pipelined (two producers): the records are processed (:meth:`_start`) while the
        previous round's appends and commit are still in flight; this round's appends
        go out only once that commit has succeeded (:meth:`_settle`), and run in the
        background (:meth:`_commit`) while the loop fetches and processes the next one.
        Why: a record fetched while a round was committing waited for that whole commit
        before its own processing began (BENCHMARKS.md, service section, session 7).
        With one producer the previous round is settled first (its producer is needed).
        """
        writers = self._writers
        assert writers is not None
        if len(writers.producers) == 1 and not await self._settle():
            return
        try:
            started = await self._start(batches, idle)
        except asyncio.CancelledError:
            await self._fail()
            raise
        except Exception:
            log.exception("%s: transaction of partitions %s aborted; re-reading their state",
                          self.label, sorted(set(batches) | set(idle)))
            await self._fail()
            return
        if not await self._settle():  # the round before failed: this one went with it
            return
        self._inflight = asyncio.ensure_future(self._commit(started))

    async def _start(self, batches: dict[int, list[tuple[TopicPartition, Any]]],
                     idle: set[int] | frozenset[int]) -> _Started:
        """Begin a round's transaction and process its records (in memory: the outputs and
        state writes wait in its :class:`Transaction` objects); raises what a record raised."""
        writers = self._writers
        assert writers is not None
        index = writers.take_turn()
        producer = writers.producers[index]
        offsets: dict[TopicPartition, int] = {}
        finish = getattr(self.handler, "finish", None)
        stages = dict(self._fetch_times, begin=time.time()) if self._trace else {}
        if writers.begun.pop(index, None) is None:  # else begun ahead: ours now
            writers.open.add(index)
            await producer.begin_transaction()
        announce_partitions(producer, self._expected_partitions(batches, idle))
        if len(writers.producers) > 1:  # the next round's producer, if it is free already
            await self._begin_ahead((index + 1) % len(writers.producers), batches)
        txns: dict[int, Transaction] = {}
        slice_end = time.perf_counter() + YIELD_EVERY_S
        cpu, cpu_at = 0.0, time.thread_time()  # trace only: the round's own CPU
        process = self.handler.process
        for p, todo in sorted(batches.items()):
            txn = txns[p] = Transaction(producer, self.state_topic, p)
            for tp, r in todo:
                # No call for the common case: a coroutine less per record and hop.
                error = self._poisoned(tp, r) if self._failures else None
                if error is not None:
                    await self.handler.reject(r, txn, error)
                else:
                    try:
                        await process(r, txn)
                    except Exception as exc:
                        self._failed(tp, r, exc)
                        raise
                offsets[tp] = r.offset + 1
                if time.perf_counter() >= slice_end:
                    cpu += time.thread_time() - cpu_at
                    await asyncio.sleep(0)  # let the other processor's I/O run
                    slice_end = time.perf_counter() + YIELD_EVERY_S
                    cpu_at = time.thread_time()
            if finish is not None:
                await finish(p, txn)
        for p in sorted(idle):
            txn = txns[p] = Transaction(producer, self.state_topic, p)
            await self.handler.idle(p, txn)  # type: ignore[attr-defined]
        if stages:
            stages["processed"] = time.time()
            stages["cpu_ms"] = round((cpu + time.thread_time() - cpu_at) * 1000, 3)
            stages["records"] = sum(len(todo) for todo in batches.values())
        for tp, off in offsets.items():  # with the outputs, in this transaction
            await txns[tp.partition].put(offset_key(tp), off)
        return _Started(index, txns, offsets, batches, stages)

    async def _commit(self, started: _Started) -> None:
        """Append a started round's records and commit it (in the background: the loop
        goes on fetching and processing the next round meanwhile); then remember what it
        consumed and wrote, and begin its producer's next transaction ahead. Raises what
        failed; :meth:`_settle` handles it."""
        writers = self._writers
        assert writers is not None
        producer = writers.producers[started.index]
        stages = started.stages
        if stages:
            stages["appending"] = time.time()  # the round before has committed
        # The commit must wait for every append; all partitions' appends go out together.
        await flush_all(list(started.txns.values()))
        if stages:
            stages["flushed"] = time.time()
        await producer.commit_transaction()
        writers.open.discard(started.index)  # decided: this producer may begin again
        for p, txn in started.txns.items():
            self._wrote[p] = frozenset(txn.written)
        now = time.monotonic()
        for tp, off in started.offsets.items():
            self._owned[tp.partition].next_offsets[tp] = off
            self._read_at[tp.partition] = now
        if self._failures:
            self._failures = {k: v for k, v in self._failures.items()
                              if k[1] >= self._next_offset(k[0])}
        if self._trace is not None:
            end = dict(stages, end=time.time())
            for p, todo in sorted(started.batches.items()):
                self._trace.write(p, todo, end)
        await self._begin_ahead(started.index, {})  # the round after the next (one producer: next)

    async def _settle(self) -> bool:
        """Wait for the round committing in the background, if any; False (and every
        partition re-opened, :meth:`_fail`) if it failed."""
        task = self._inflight
        if task is None:
            return True
        # wait, not await: cancelling the waiter (a stop) must not cancel the commit,
        # which stays in _inflight for the stop's own settle.
        await asyncio.wait((task,))
        error = asyncio.CancelledError() if task.cancelled() else task.exception()
        if self._inflight is not task:  # another waiter settled it (and failed, if it did)
            return error is None
        self._inflight = None
        if error is None:
            return True
        log.error("%s: a commit failed; re-reading the state of partitions %s",
                  self.label, sorted(self._owned), exc_info=error)
        await self._fail()
        return False

    async def _begin_ahead(self, index: int, batches: dict[int, Any]) -> None:
        """Begin the transaction of a later round now on producer ``index`` (if it is
        free), and announce what that round will probably write, so that its
        AddPartitionsToTxn is answered before its records arrive and no round waits for
        it.

        Why: a round announced its partitions at its start, so the request was answered
        while its records were processed; a router round processes a few records in well
        under a millisecond, less than that round trip (~1.7 ms p50, 4 ms p90 in the
        worker at 200 submissions/s), and waited for the answer before its Produce. With
        two producers in turn the next round's producer is free from the start of this
        round (its own last transaction is decided), so its transaction is begun then
        and the answer arrives during this round; with one producer, right after this
        round's commit.

        What is announced: for ``batches`` (this round's partitions) and each owned
        partition that read records in the last :data:`AHEAD_ACTIVE_S`, its state
        partition and what it wrote last time (as :meth:`_expected_partitions`); a round
        that reads another partition announces that one at its start, as before. An
        announced partition the round does not write costs a marker.

        Exactly once is unchanged: the transaction is that of the next round on this
        producer, holds nothing until that round appends, and commits or aborts with it;
        a failed round aborts it too (:meth:`_fail`), and one left unused is aborted
        after :data:`AHEAD_IDLE_S` (:meth:`_abort_idle_ahead`), before the coordinator's
        transaction timeout would fence its producer.
        """
        writers = self._writers
        if writers is None or index in writers.open:  # begun already, or a round's
            return
        producer = writers.producers[index]
        now = time.monotonic()
        active = {p for p, at in self._read_at.items()
                  if p in self._owned and now - at <= AHEAD_ACTIVE_S} | set(batches)
        if not active:
            return
        writers.open.add(index)
        await producer.begin_transaction()
        writers.begun[index] = now
        announce_partitions(producer,
                            self._expected_partitions(dict.fromkeys(active), frozenset()))

    async def _abort_idle_ahead(self) -> None:
        """Abort transactions begun ahead (:meth:`_begin_ahead`) that no round used for
        :data:`AHEAD_IDLE_S`: they hold no records, only their announced partitions."""
        writers = self._writers
        now = time.monotonic()
        if writers is None or not any(now - at >= AHEAD_IDLE_S
                                      for at in writers.begun.values()):
            return
        async with self._lock:
            if self._writers is not writers:
                return
            for i, at in sorted(writers.begun.items()):
                if now - at < AHEAD_IDLE_S:
                    continue
                del writers.begun[i]
                writers.open.discard(i)
                try:
                    await writers.producers[i].abort_transaction()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s: aborting an unused transaction failed; re-reading "
                                  "the state", self.label)
                    await self._fail()
                    return

    def _expected_partitions(self, batches: dict[int, Any],
                             idle: set[int] | frozenset[int]) -> set[TopicPartition]:
        """What a round of ``batches`` and ``idle`` will append to, as far as known now:
        each batch's state partition (its next offsets) and what each of its partitions
        wrote last time (:func:`~streams.processors.produce.announce_partitions`)."""
        tps = {TopicPartition(self.state_topic, p) for p in batches}
        for p in set(batches) | set(idle):
            tps |= self._wrote.get(p, frozenset())
        return tps

    def _next_offset(self, tp: TopicPartition) -> int:
        owned = self._owned.get(tp.partition)
        return owned.next_offsets.get(tp, 0) if owned is not None else 0

    def _poisoned(self, tp: TopicPartition, record: Any) -> str | None:
        """The last error of ``record`` once it failed :data:`POISON_ATTEMPTS` times (the
        round then rejects it to the dead-letter topic), else None (process it)."""
        count, error = self._failures.get((tp, record.offset), (0, ""))
        if count < POISON_ATTEMPTS:
            return None
        log.error("%s: %s[%d]@%d failed %d times, dead-lettered: %s", self.label,
                  tp.topic, tp.partition, record.offset, count, error)
        return error

    def _failed(self, tp: TopicPartition, record: Any, exc: Exception) -> None:
        """Count a failure of processing ``record`` (see :data:`POISON_ATTEMPTS`)."""
        key = (tp, record.offset)
        count = self._failures.get(key, (0, ""))[0]
        self._failures[key] = (count + 1, f"{type(exc).__name__}: {exc}"[:500])

    async def _fail(self) -> None:
        """Abort, forget every partition's memory; :meth:`_heal` re-opens them after a pause."""
        task = self._inflight
        if task is not None:  # a commit in flight: decided either way before the aborts
            await asyncio.wait((task,))
            if self._inflight is task:
                self._inflight = None
            if not task.cancelled():
                task.exception()  # retrieved: its failure is this one's
        if self._writers is not None:
            self._writers.begun = {}
            opened, self._writers.open = self._writers.open, set()
            for i in sorted(opened):  # the rounds' and any begun ahead
                with contextlib.suppress(Exception):
                    await self._writers.producers[i].abort_transaction()
        retry_at = time.monotonic() + RETRY_S
        for p in self._owned:
            self._retry_at[p] = retry_at
        await self._release()

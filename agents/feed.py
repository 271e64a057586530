"""Reading the decisions topic and handing each decision to its node's executor.

Why no consumer group: every executor must see every decision for its node,
and a node's decisions are not in a partition of their own (the topic is keyed
by cell, see ``schemas/topics.py``). So the feed assigns partitions itself: the
cell's partition when the node's cell is configured, else all of them, and
keeps its read positions in the journal (resuming where it stopped; re-reading
is harmless because decisions are claimed once). One feed can serve many
executors (``sim-cluster``: one consumer for hundreds of simulated nodes).

Decisions are read ``read_committed``: the scheduler writes them in Kafka
transactions, and a decision of an aborted transaction was never taken.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agents.bus import KafkaPublisher, Topics
from agents.executor import Executor, decision_nodes
from agents.journal import Journal
from schemas.events import Event, TaskPreempted

if TYPE_CHECKING:
    from schemas.consume import Received

log = logging.getLogger(__name__)
SAVE_EVERY_S = 1.0
CLOCK_SKEW_MS = 10_000
"""How far before the node's start a first start reads decisions (``start_at: end``):
decision timestamps come from the scheduler's clock, which may run a little behind
this host's. Re-reading a few older ones is harmless (claimed once, other nodes'
are skipped)."""


def cell_partition(cell: str, partitions: int) -> int:
    """The partition Kafka's default partitioner puts key ``cell`` in."""
    from aiokafka.partitioner import murmur2

    return (murmur2(cell.encode()) & 0x7FFFFFFF) % partitions


class DecisionFeed:
    """One consumer of the decisions topic, dispatching to local executors by node id."""

    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        publisher: KafkaPublisher,
        positions: Journal,
        executors: Mapping[str, Executor],
        *,
        cell: str | None = None,
        start_at: str = "end",
        started_at_ms: int | None = None,
        keyring: Mapping[str, bytes] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.publisher = publisher
        self.positions = positions
        self.executors = executors
        self.cell = cell
        self.start_at = start_at
        self.started_at_ms = started_at_ms
        """When the node process started (wall clock, ms). A first start with
        ``start_at: end`` reads from there, not from the end at the moment the feed is
        ready: the agents register first, and a decision the scheduler made for a node
        in between would otherwise be skipped, its task never started."""
        self.keyring = dict(keyring or {})
        """Verification keys of trusted schedulers; empty = trust the topic's ACLs."""
        self.ready = asyncio.Event()
        self.handled: dict[str, int] = {}
        self._consumer: Any = None

    async def start(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from schemas.kafka import aiokafka_kwargs

        topic = self.topics.decisions.name
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest" if self.start_at == "beginning" else "latest",
            client_id="hetsched-executor",
            **aiokafka_kwargs(),
        )
        await self._consumer.start()
        partitions = await self._wait_for_topic(topic)
        chosen = sorted(partitions)
        if self.cell is not None:
            chosen = [cell_partition(self.cell, len(partitions))]
        tps = [TopicPartition(topic, p) for p in chosen]
        self._consumer.assign(tps)
        stored = self.positions.positions(topic)
        for tp in tps:
            if tp.partition in stored:
                self._consumer.seek(tp, stored[tp.partition])
            elif self.start_at == "beginning":
                await self._consumer.seek_to_beginning(tp)
            else:
                await self._seek_to_start_time(tp)
        for tp in tps:
            await self._consumer.position(tp)  # resolve now: "ready" means positioned
        self.ready.set()
        log.info("decision feed ready", extra={"topic": topic, "partitions": chosen})

    async def _seek_to_start_time(self, tp: Any) -> None:
        """The first decision written since the node started (less the clock skew
        allowance), or the end when there is none or the start time is unknown."""
        if self.started_at_ms is None:
            await self._consumer.seek_to_end(tp)
            return
        since = max(0, self.started_at_ms - CLOCK_SKEW_MS)
        found = (await self._consumer.offsets_for_times({tp: since})).get(tp)
        if found is None:
            await self._consumer.seek_to_end(tp)
        else:
            self._consumer.seek(tp, found.offset)

    async def _wait_for_topic(self, topic: str) -> set[int]:
        """The topic's partitions, once it exists. The scheduler creates it (its
        partition count must match the input log's) and a node may start first. Polled
        with the admin client: a producer's metadata request could make a broker with
        auto.create.topics.enable create it wrongly partitioned."""
        from aiokafka.admin import AIOKafkaAdminClient

        from schemas.kafka import aiokafka_kwargs

        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **aiokafka_kwargs())
        await admin.start()
        try:
            began = time.monotonic()
            warned = 0.0
            while topic not in set(await admin.list_topics()):
                waited = time.monotonic() - began
                if waited - warned >= 30 or warned == 0:
                    log.warning("waiting for the decisions topic", extra={"topic": topic})
                    warned = waited or 1e-9
                await asyncio.sleep(1.0)
        finally:
            await admin.close()
        partitions = await asyncio.wait_for(self.publisher.producer.partitions_for(topic), 60)
        return set(partitions)

    async def run(self) -> None:
        """Consume until cancelled."""
        from schemas.consume import consume_events

        topic = self.topics.decisions.name
        last_save = time.monotonic()
        try:
            async for received in consume_events(
                self._consumer,
                self.publisher.producer,
                deadletter_topic=self.topics.deadletter.name,
            ):
                if not self.keyring or await self._verified(received):
                    for executor in self._concerned(received.event.payload):
                        outcome = await executor.handle(received.event)
                        self.handled[outcome] = self.handled.get(outcome, 0) + 1
                if time.monotonic() - last_save >= SAVE_EVERY_S:
                    await self._save_positions(topic)
                    last_save = time.monotonic()
        finally:
            if self._consumer is not None:
                try:
                    await self._save_positions(topic)
                except Exception:  # shutting down: a re-read later is harmless
                    log.warning("could not save decision positions", exc_info=True)

    def _concerned(self, payload: Event) -> list[Executor]:
        """The executors a decision concerns: the nodes it names, and for a stop
        (``TaskPreempted``) every node running a member of that gang, since a gang's
        one stop names rank 0's node only."""
        named = [self.executors[n] for n in dict.fromkeys(decision_nodes(payload))
                 if n in self.executors]
        if isinstance(payload, TaskPreempted):
            named += [e for e in self.executors.values()
                      if e not in named and e.runs_gang_member(payload.task_id)]
        return named

    async def _save_positions(self, topic: str) -> None:
        """Persist the consumer's positions: past every record handled so far, valid or
        dead-lettered (``consume_events`` finishes with a record before the next)."""
        positions = {
            tp.partition: int(await self._consumer.position(tp))
            for tp in self._consumer.assignment()
        }
        if positions:
            self.positions.save_positions(topic, positions)

    async def _verified(self, received: Received) -> bool:
        """Is the decision signed by a trusted scheduler? Dead-letter it if not."""
        from schemas.consume import send_deadletter
        from schemas.signing import Refusal, verify_origin

        origin = verify_origin(
            received.topic, received.key, received.value, received.headers, self.keyring
        )
        if not isinstance(origin, Refusal):
            return True
        log.warning("decision refused: %s", origin.message, extra={"offset": received.offset})
        dead = origin.dead_letter(
            received.value,
            topic=received.topic,
            partition=received.partition,
            offset=received.offset,
            key=received.key,
            event_type=received.event.type,
            event_id=received.event.event_id,
        )
        await send_deadletter(self.publisher.producer, dead, self.topics.deadletter.name)
        return False

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
